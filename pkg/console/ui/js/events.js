// The events page: the audit trail (who changed what and when: catalogs,
// backends, options, cancels and releases, membership), newest first, with
// the kind, subject and actor filters and paging of /v1/events. Filters live
// in the URL (#/events?kind=backend.).
import { h, clear, text, fmtTime, fmtAgo, cli, shellQuote, table } from "./dom.js";
import { get } from "./api.js";

const FILTERS = ["kind", "subject", "actor"];

function hashOf(f) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v) q.set(k, v);
  const s = q.toString();
  return "#/events" + (s ? "?" + s : "");
}

export function mount(main, route) {
  const f = {};
  for (const k of [...FILTERS, "cursor"]) if (route.params.get(k)) f[k] = route.params.get(k);
  const inputs = FILTERS.map((k) => {
    const inp = h("input", { type: "search", id: "e-" + k, name: k, value: f[k] || "", autocomplete: "off", spellcheck: "false",
      placeholder: k === "kind" ? "e.g. backend." : k });
    inp.addEventListener("change", () => {
      const next = { ...f, cursor: undefined };
      next[k] = inp.value.trim();
      location.hash = hashOf(next);
    });
    return h("label", { class: "field" }, h("span", null, k), inp);
  });
  const body = h("div", { id: "events-table" });
  const pager = h("div", { class: "pager" });
  const next = h("div", { id: "events-cli" });
  clear(main).append(h("div", { class: "page-head" }, h("h1", null, "Events")),
    h("section", { class: "filters card" }, h("div", { class: "filter-row" }, inputs,
      h("a", { class: "button", href: "#/events", id: "e-clear" }, "Clear filters"))),
    body, pager, next);
  return {
    async refresh() {
      const ans = await get("events", f);
      const events = ans.events || [];
      const now = Date.now();
      const rows = events.map((e) => h("tr", { "data-seq": e.seq },
        h("td", { class: "num" }, String(e.seq)),
        h("td", { title: fmtTime(e.time_ms) }, fmtAgo(e.time_ms, now)),
        h("td", { "data-col": "kind" }, h("code", null, text(e.kind))),
        h("td", { "data-col": "subject" }, text(e.subject)),
        h("td", { "data-col": "actor" }, text(e.actor), e.claimed && e.claimed !== e.actor ? h("span", { class: "muted" }, " (as " + e.claimed + ")") : null,
          e.verified ? h("span", { class: "tag", title: "the identity a certificate proved" }, "verified") : null),
        h("td", { "data-col": "summary" }, text(e.summary)),
        h("td", { class: "num muted" }, "#" + text(e.index))));
      clear(body).append(events.length
        ? table(["Seq", "When", "Kind", "Subject", "Actor", "What", "Journal"], rows, { class: "grid", id: "events" })
        : h("p", { class: "empty" }, "No event matches these filters."));
      clear(pager);
      if (f.cursor) pager.append(h("a", { class: "button", href: hashOf({ ...f, cursor: undefined }), id: "events-first" }, "« First page"));
      if (ans.next_cursor) pager.append(h("a", { class: "button", href: hashOf({ ...f, cursor: ans.next_cursor }), id: "events-next" }, "Next page »"));
      const flags = FILTERS.filter((k) => f[k]).map((k) => "--" + k + " " + shellQuote(f[k]));
      clear(next).append(cli([["lancemaster events " + flags.join(" "), "the same trail in a terminal (-o json for scripts)"]]));
    },
  };
}
