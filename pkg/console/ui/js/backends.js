// The backends page: per backend its slots held against its capacity,
// accepting or draining, process epoch, version, last heard, and the jobs
// holding its slots.
import { h, clear, text, fmtTime, fmtAgo, badge, cli, table } from "./dom.js";
import { get } from "./api.js";

export function mount(main) {
  const summary = h("div", { class: "summary" });
  const body = h("div", { id: "backends-table" });
  const next = h("div");
  clear(main).append(h("div", { class: "page-head" }, h("h1", null, "Backends"), summary), body, next);
  return {
    async refresh() {
      // The list is the registry and the leader's heartbeat view; slots,
      // capacity, accepting and the jobs holding slots are in each
      // backend's own answer (backends show).
      const ans = await get("backends");
      const list = await Promise.all((ans.backends || []).map((b) =>
        get("backends/" + Number(b.backend_id)).then((d) => d.backend || b, () => b)));
      render(list, summary, body, next);
    },
  };
}

function slots(b) {
  const held = b.held_slots || 0;
  const cap = b.capacity || 0;
  const bar = h("span", { class: "slotbar", title: held + " of " + (cap || "?") + " slots held" }, h("span", { class: "fill" }));
  bar.firstChild.style.width = (cap > 0 ? Math.min(100, Math.round((100 * held) / cap)) : held > 0 ? 100 : 0) + "%";
  if (cap > 0 && held >= cap) bar.classList.add("full");
  return h("span", { class: "slots" }, bar, " " + held + " / " + (cap ? cap : "?"));
}

function acceptance(b) {
  if (b.drained) return h("span", null, badge("DRAINING"), b.drain_actor ? h("span", { class: "muted" }, " by " + b.drain_actor) : null);
  if (b.accepting === false) return h("span", null, badge("NOT_ACCEPTING"), b.not_accepting_reason ? h("div", { class: "muted small" }, b.not_accepting_reason) : null);
  if (b.accepting) return badge("ACCEPTING");
  return "—";
}

function render(list, summary, body, next) {
  const now = Date.now();
  const rows = list.map((b) => h("tr", { "data-backend-id": b.backend_id, class: b.alive === false ? "st-row-DEAD" : "" },
    h("td", { "data-col": "id" }, String(b.backend_id)),
    h("td", { "data-col": "address" }, h("code", null, text(b.address))),
    h("td", { "data-col": "alive" }, b.alive === undefined ? "—" : badge(b.alive ? "ALIVE" : "DEAD")),
    h("td", { "data-col": "accepting" }, acceptance(b)),
    h("td", { "data-col": "slots" }, slots(b)),
    h("td", { "data-col": "epoch", class: "num" }, text(b.process_epoch)),
    h("td", { "data-col": "version" }, text(b.version)),
    h("td", { "data-col": "last-heard", title: fmtTime(b.last_heard_ms) }, fmtAgo(b.last_heard_ms, now)),
    h("td", { "data-col": "jobs" }, (b.invocations || []).length
      ? (b.invocations || []).map((inv, i) => [i ? " " : "", h("a", { href: "#/jobs/" + Number(inv.job_id), class: "joblink", title: text(inv.mutation_state) + " " + text(inv.build_phase) }, String(inv.job_id))])
      : "—"),
    h("td", { "data-col": "warning" }, b.warning ? h("span", { class: "warn-text" }, b.warning) : "")));
  clear(body).append(list.length
    ? table(["ID", "Address", "Alive", "Dispatch", "Slots", "Epoch", "Version", "Last heard", "Jobs holding slots", "Warning"], rows, { class: "grid", id: "backends" })
    : h("p", { class: "empty" }, "No backend is registered."));
  const held = list.reduce((n, b) => n + (b.held_slots || 0), 0);
  const cap = list.reduce((n, b) => n + (b.capacity || 0), 0);
  clear(summary).append(h("span", { class: "muted" }, list.length + " registered · " + held + " of " + cap + " slots held · " +
    list.filter((b) => b.alive).length + " alive · " + list.filter((b) => b.drained).length + " draining"));
  const first = list[0];
  const cmds = [["lancemaster backends list", "the same table in a terminal"]];
  if (first) {
    cmds.push(["lancemaster backends show " + Number(first.backend_id), "one backend's slots and the jobs holding them"]);
    cmds.push(first.drained
      ? ["lancemaster backends undrain " + Number(first.backend_id), "take new dispatches again"]
      : ["lancemaster backends drain " + Number(first.backend_id), "no new dispatches; running ones finish"]);
  }
  cmds.push(["lancemaster backends add HOST:PORT", "register another backend"]);
  clear(next).append(cli(cmds));
}
