// The console's shell: hash routing, the auto-refresh loop, the footer's
// "answered by" line and the banners (docs/console.md).
//
// Routes: #/jobs?FILTERS, #/jobs/ID, #/backends, #/cluster, #/options,
// #/events?FILTERS.
import { h, clear, fmtTime, fmtDuration } from "./dom.js";
import { onAnswer } from "./api.js";
import * as jobs from "./jobs.js";
import * as job from "./job.js";
import * as backends from "./backends.js";
import * as cluster from "./cluster.js";
import * as options from "./options.js";
import * as events from "./events.js";

// REFRESH_MS is the auto-refresh period; /ui/?refresh_ms=N sets another
// (at least 200 ms).
export const REFRESH_MS = Math.max(200, Number(new URLSearchParams(location.search).get("refresh_ms")) || 5000);

const pages = { jobs, job, backends, cluster, options, events };
const main = document.getElementById("app");
const banners = document.getElementById("banners");
const answeredBy = document.getElementById("answered-by");
const updated = document.getElementById("updated");
const pauseBtn = document.getElementById("pause");

let current = null; // { page, route, view, seq }
let seq = 0;
let timer = null;
let answers = [];
// The pause lasts for the tab (sessionStorage), when the browser keeps it.
const store = {
  get() { try { return sessionStorage.getItem("lm.paused"); } catch (e) { return null; } },
  set(v) { try { sessionStorage.setItem("lm.paused", v); } catch (e) { /* not kept */ } },
};
let paused = store.get() === "1";

export function parseRoute(hash) {
  const raw = (hash || "").replace(/^#/, "");
  const [path, qs] = raw.split("?", 2);
  const parts = path.split("/").filter(Boolean);
  const params = new URLSearchParams(qs || "");
  if (parts[0] === "jobs" && parts.length === 2 && /^\d+$/.test(parts[1])) return { page: "job", id: parts[1], params };
  if (parts.length === 1 && pages[parts[0]] && parts[0] !== "job") return { page: parts[0], params };
  return { page: "jobs", params, unknown: parts.length > 0 && parts[0] !== "jobs" };
}

onAnswer((body) => answers.push(body));

function showAnswers(errors) {
  clear(banners);
  // The footer names the master of the last answer, or one that knows no
  // leader when an answer of this refresh came from such a master.
  const last = answers.find((a) => a.answered_by && a.answered_by.known_leader === false) || answers[answers.length - 1];
  const stale = [...new Set(answers.map((a) => a.stale_warning).filter(Boolean))];
  for (const w of stale) banners.appendChild(h("div", { class: "banner warn", "data-banner": "stale" }, "Possibly stale: ", w));
  if (answers.some((a) => a.answered_by && a.answered_by.known_leader === false)) {
    banners.appendChild(h("div", { class: "banner warn", "data-banner": "no-leader" },
      "The answering master knows no leader: what you see may be old, and nothing can change until a leader is elected. ",
      "Check with: lancemaster operator raft health"));
  }
  for (const e of errors) banners.appendChild(h("div", { class: "banner error", "data-banner": "error" }, e));
  if (last && last.answered_by) {
    const a = last.answered_by;
    const role = a.is_leader ? "the leader" : a.known_leader ? "a follower; leader " + (a.leader_id || "?") : "a master that knows no leader";
    const contact = a.is_leader ? "" : a.last_contact_ms === -1 ? " · never heard from a leader" :
      a.last_contact_ms !== undefined ? " · last contact " + fmtDuration(a.last_contact_ms) + " ago" : "";
    answeredBy.textContent = "answered by " + (a.node_id || "?") + " (" + role + ")" + contact;
    answeredBy.dataset.node = a.node_id || "";
  }
}

async function refresh() {
  if (!current) return;
  const mine = current;
  answers = [];
  const errors = [];
  main.dataset.state = "loading";
  try {
    await mine.view.refresh();
  } catch (e) {
    errors.push((e.code ? e.code + ": " : "") + e.message);
  }
  if (mine !== current) return; // the route changed meanwhile
  showAnswers(errors);
  updated.textContent = "updated " + fmtTime(Date.now()).slice(11);
  main.dataset.state = errors.length ? "error" : "ready";
  main.dataset.renders = String(Number(main.dataset.renders || "0") + 1);
  schedule();
}

function schedule() {
  clearTimeout(timer);
  if (!paused) timer = setTimeout(refresh, REFRESH_MS);
}

function route() {
  const r = parseRoute(location.hash);
  if (r.unknown) {
    history.replaceState(null, "", "#/jobs");
  }
  clearTimeout(timer);
  if (current && current.view.unmount) current.view.unmount();
  clear(main);
  main.dataset.page = r.page;
  main.dataset.route = location.hash;
  main.dataset.renders = "0";
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === r.page || (r.page === "job" && a.dataset.page === "jobs"));
  }
  current = { page: r.page, route: r, seq: ++seq };
  current.view = pages[r.page].mount(main, r);
  refresh();
}

function setPaused(p) {
  paused = p;
  store.set(p ? "1" : "0");
  pauseBtn.textContent = p ? "Resume" : "Pause";
  pauseBtn.setAttribute("aria-pressed", String(p));
  document.body.classList.toggle("paused", p);
  if (p) clearTimeout(timer);
  else refresh();
}

pauseBtn.addEventListener("click", () => setPaused(!paused));
pauseBtn.textContent = paused ? "Resume" : "Pause";
pauseBtn.setAttribute("aria-pressed", String(paused));
document.body.classList.toggle("paused", paused);
window.addEventListener("hashchange", route);
if (!location.hash) history.replaceState(null, "", "#/jobs");
route();
