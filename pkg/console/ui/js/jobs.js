// The jobs page: filters (several states, catalog, db, table, mutation and
// index type, unresolved), a table of the matching jobs newest first, paging
// with the API's next_cursor. The filters live in the URL (#/jobs?state=...),
// so a filtered view can be bookmarked and the back button works.
import { h, clear, text, fmtTime, fmtAgo, badge, cli, shellQuote, table } from "./dom.js";
import { get } from "./api.js";

export const STATES = ["PENDING", "RUNNING", "RESOLVING", "COMMITTED", "NOT_COMMITTED", "UNKNOWN", "CANCELLED"];
export const REFRESH_STATES = ["refresh:REQUIRED", "refresh:RUNNING", "refresh:FAILED", "refresh:DONE"];
const MUTATION_TYPES = ["CREATE", "REPLACE", "DROP", "OPTIMIZE"];
const INDEX_TYPES = ["IVF_PQ", "IVF_FLAT", "IVF_RQ", "IVF_HNSW_SQ", "IVF_HNSW_PQ", "BTREE", "BITMAP", "LABEL_LIST", "FTS", "FM"];
const TEXT_FILTERS = ["catalog", "db", "table"];

// filtersOf reads the filters of a route; the API takes them as they are.
export function filtersOf(params) {
  const f = {};
  for (const k of ["state", "catalog", "db", "table", "mutation_type", "index_type", "cursor"]) {
    const v = params.get(k);
    if (v) f[k] = v;
  }
  if (params.get("unresolved") === "true") f.unresolved = true;
  return f;
}

function hashOf(f) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v !== undefined && v !== "" && v !== false) q.set(k, v === true ? "true" : v);
  const s = q.toString();
  return "#/jobs" + (s ? "?" + s : "");
}

function go(f) {
  location.hash = hashOf(f);
}

export function mount(main, route) {
  const f = filtersOf(route.params);
  const chosen = new Set((f.state || "").split(",").filter(Boolean));
  const change = (mut) => {
    const next = { ...f };
    delete next.cursor; // a new filter starts at the first page
    mut(next);
    go(next);
  };

  const chipsOf = (list) => {
    const box = h("div", { class: "chips" });
    for (const s of list) {
      const input = h("input", { type: "checkbox", value: s, checked: chosen.has(s), "data-state": s });
      input.addEventListener("change", () => change((n) => {
        const set = new Set(chosen);
        if (input.checked) set.add(s); else set.delete(s);
        n.state = [...STATES, ...REFRESH_STATES].filter((x) => set.has(x)).join(",");
      }));
      box.appendChild(h("label", { class: "chip" }, input, s.replace("refresh:", "")));
    }
    return box;
  };
  const unresolved = h("input", { type: "checkbox", id: "f-unresolved", checked: !!f.unresolved });
  unresolved.addEventListener("change", () => change((n) => { n.unresolved = unresolved.checked; }));

  const catalogs = h("datalist", { id: "catalog-names" });
  const inputs = TEXT_FILTERS.map((k) => {
    const inp = h("input", { type: "search", id: "f-" + k, name: k, placeholder: k, value: f[k] || "", list: k === "catalog" ? "catalog-names" : null, autocomplete: "off", spellcheck: "false" });
    inp.addEventListener("change", () => change((n) => { n[k] = inp.value.trim(); }));
    return h("label", { class: "field" }, h("span", null, k), inp);
  });
  const select = (k, values) => {
    const sel = h("select", { id: "f-" + k, name: k }, h("option", { value: "" }, "any"),
      values.map((v) => h("option", { value: v, selected: f[k] === v }, v)));
    sel.addEventListener("change", () => change((n) => { n[k] = sel.value; }));
    return h("label", { class: "field" }, h("span", null, k.replace("_", " ")), sel);
  };
  const clearBtn = h("a", { class: "button", href: "#/jobs", id: "f-clear" }, "Clear filters");

  const summary = h("div", { class: "summary", id: "jobs-summary" });
  const attention = h("div", { id: "attention" });
  const body = h("div", { id: "jobs-table" });
  const pager = h("div", { class: "pager", id: "pager" });
  const next = h("div", { id: "jobs-cli" });
  clear(main).append(
    h("div", { class: "page-head" }, h("h1", null, "Jobs"), summary),
    h("section", { class: "filters card" },
      h("div", { class: "filter-row", id: "state-filter" }, h("span", { class: "label" }, "state"), chipsOf(STATES),
        h("span", { class: "label sep" }, "refresh"), chipsOf(REFRESH_STATES)),
      h("div", { class: "filter-row" }, inputs, select("mutation_type", MUTATION_TYPES), select("index_type", INDEX_TYPES),
        h("label", { class: "chip unresolved-chip" }, unresolved, "unresolved only"), clearBtn, catalogs)),
    attention, body, pager, next);

  let catalogsLoaded = false;
  return {
    async refresh() {
      if (!catalogsLoaded) {
        catalogsLoaded = true;
        try {
          const c = await get("catalogs");
          clear(catalogs).append(...(c.catalogs || []).map((x) => h("option", { value: x.name })));
        } catch (e) { /* the filter still takes a typed name */ }
      }
      const ans = await get("jobs", f);
      render(ans, f, { summary, attention, body, pager, next });
    },
  };
}

function render(ans, f, el) {
  const jobs = ans.jobs || [];
  const now = Date.now();
  const rows = jobs.map((j) => {
    const state = j.mutation_state || "UNKNOWN";
    const cls = ["job-row", "st-row-" + state, j.unresolved ? "unresolved" : "", state === "UNKNOWN" && !j.force_released ? "needs-operator" : ""];
    const tr = h("tr", { class: cls.filter(Boolean).join(" "), "data-job-id": j.job_id, "data-state": state, "data-unresolved": j.unresolved ? "true" : "false" },
      h("td", { "data-col": "id" }, h("a", { href: "#/jobs/" + Number(j.job_id) }, String(j.job_id))),
      h("td", { "data-col": "state" }, badge(state), j.force_released ? h("span", { class: "tag" }, "released") : null,
        j.restore_hold ? h("span", { class: "tag", title: "held by a snapshot restore: never dispatched again" }, "held") : null,
        j.unresolved ? h("span", { class: "tag tag-unresolved", title: "holds its fence and quota" }, "unresolved") : null),
      h("td", { "data-col": "refresh" }, text(j.refresh_state)),
      h("td", { "data-col": "target" }, [j.catalog, j.db, j.table].map(text).join(".")),
      h("td", { "data-col": "index" }, text(j.index_name)),
      h("td", { "data-col": "mutation" }, text(j.mutation_type)),
      h("td", { "data-col": "type" }, text(j.index_type)),
      h("td", { "data-col": "backend" }, j.backend_id ? String(j.backend_id) : "—"),
      h("td", { "data-col": "attempts", class: "num" }, text(j.dispatch_attempts)),
      h("td", { "data-col": "created", title: fmtTime(j.create_time_ms) }, fmtAgo(j.create_time_ms, now)),
      h("td", { "data-col": "updated", title: fmtTime(j.update_time_ms) }, fmtAgo(j.update_time_ms, now)),
      h("td", { "data-col": "creator" }, text(j.creator)));
    tr.addEventListener("click", (ev) => {
      if (ev.target.closest("a")) return;
      location.hash = "#/jobs/" + Number(j.job_id);
    });
    return tr;
  });
  clear(el.body).append(jobs.length
    ? table(["Job", "State", "Refresh", "Table", "Index", "Mutation", "Type", "Backend", "Attempts", "Created", "Updated", "Creator"], rows, { class: "grid jobs", id: "jobs" })
    : h("p", { class: "empty", id: "no-jobs" }, "No job matches these filters."));

  const counts = {};
  for (const j of jobs) counts[j.mutation_state || "UNKNOWN"] = (counts[j.mutation_state || "UNKNOWN"] || 0) + 1;
  const unres = jobs.filter((j) => j.unresolved).length;
  clear(el.summary).append(
    h("span", { class: "muted" }, jobs.length + " on this page"),
    ...STATES.filter((s) => counts[s]).map((s) => h("span", { class: "count" }, badge(s), " ", String(counts[s]))),
    unres ? h("span", { class: "count" }, h("span", { class: "tag tag-unresolved" }, "unresolved"), " ", String(unres)) : null);

  const stuck = jobs.filter((j) => j.mutation_state === "UNKNOWN" && !j.force_released);
  clear(el.attention);
  if (stuck.length) {
    el.attention.append(h("div", { class: "banner error", "data-banner": "unknown-jobs" },
      stuck.length + (stuck.length === 1 ? " UNKNOWN job needs" : " UNKNOWN jobs need") + " an operator: its fence, quota and slot stay held until force-released. Jobs: ",
      stuck.map((j, i) => [i ? ", " : "", h("a", { href: "#/jobs/" + Number(j.job_id) }, String(j.job_id))])));
  }

  clear(el.pager);
  if (f.cursor) el.pager.append(h("a", { class: "button", href: hashOf({ ...f, cursor: undefined }), id: "first-page" }, "« First page"));
  if (ans.next_cursor) el.pager.append(h("a", { class: "button", href: hashOf({ ...f, cursor: ans.next_cursor }), id: "next-page" }, "Next page »"));

  const flags = [];
  if (f.state) flags.push("--state " + shellQuote(f.state));
  for (const k of TEXT_FILTERS) if (f[k]) flags.push("--" + k + " " + shellQuote(f[k]));
  if (f.mutation_type) flags.push("--type " + shellQuote(f.mutation_type));
  if (f.index_type) flags.push("--index-type " + shellQuote(f.index_type));
  if (f.unresolved) flags.push("--unresolved");
  const cmds = [["lancemaster jobs list " + [...flags, "--all"].join(" "), "the same list in a terminal (-o json for scripts)"]];
  if (stuck.length) {
    cmds.push(["lancemaster jobs show " + Number(stuck[0].job_id), "look at the evidence of an UNKNOWN job first"]);
    cmds.push(["lancemaster jobs resolve " + Number(stuck[0].job_id) + " --force-release --comment 'why it is safe'",
      "free its fence, quota and slot once you know no worker runs it (the outcome stays UNKNOWN)"]);
  }
  clear(el.next).append(cli(cmds));
}
