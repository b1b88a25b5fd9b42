// The cluster page: the Raft members as the leader sees them (list-peers),
// and every member's own status (health): leader, term, lag, version,
// failure tolerance.
import { h, clear, text, yesNo, badge, kv, card, cli, table, fmtTime, fmtAgo } from "./dom.js";
import { get } from "./api.js";

export function mount(main) {
  const top = h("div", { id: "cluster-summary" });
  const peers = h("div", { id: "members-table" });
  const health = h("div", { id: "health-table" });
  const next = h("div");
  clear(main).append(h("div", { class: "page-head" }, h("h1", null, "Cluster")), top, peers, health, next);
  return {
    async refresh() {
      const [m, hl] = await Promise.all([get("members"), get("health")]);
      render(m.members || {}, hl.health || {}, top, peers, health, next);
    },
  };
}

function render(m, hl, top, peers, health, next) {
  const leader = m.leader_id || hl.leader_id;
  clear(top).append(h("div", { class: "cards3" },
    card("Leader", h("p", { class: "big", id: "leader" }, text(leader)), kv([["term", m.term], ["commit index", m.commit_index], ["applied index", m.applied_index]])),
    card("Quorum", kv([["voters", hl.voters], ["quorum", hl.quorum], ["healthy voters", hl.healthy_voters],
      ["failure tolerance", h("strong", { id: "failure-tolerance" }, text(hl.failure_tolerance))], ["max lag", hl.max_lag]])),
    card("Health", h("p", { class: "big" }, hl.healthy === undefined ? "—" : badge(hl.healthy ? "HEALTHY" : "UNHEALTHY")),
      kv([["leader commit index", hl.leader_commit_index]]))));

  const prow = (p) => h("tr", { "data-member": p.id },
    h("td", { "data-col": "id" }, p.id, p.is_leader ? h("span", { class: "tag tag-leader" }, "leader") : null),
    h("td", null, text(p.suffrage)),
    h("td", null, h("code", null, text(p.raft_address))),
    h("td", null, h("code", null, text(p.rpc_address))),
    h("td", null, p.health ? badge(p.health) : "—"),
    h("td", { title: fmtTime(p.last_contact_ms) }, fmtAgo(p.last_contact_ms)),
    h("td", null, p.last_error ? h("span", { class: "warn-text" }, p.last_error) : ""));
  clear(peers).append(card("Members (as the leader sees them)",
    table(["Member", "Suffrage", "Raft address", "RPC address", "Health", "Last contact", "Last error"], (m.peers || []).map(prow), { class: "grid", id: "members" })));

  const hrow = (x) => {
    const s = x.status || {};
    return h("tr", { "data-member": x.id },
      h("td", null, x.id, x.is_leader ? h("span", { class: "tag tag-leader" }, "leader") : null),
      h("td", null, x.reachable ? text(s.state) : badge("UNREACHABLE")),
      h("td", { class: "num" }, text(s.term)),
      h("td", null, text(s.leader_id)),
      h("td", { class: "num", "data-col": "lag" }, text(x.lag)),
      h("td", { class: "num" }, text(s.applied_index)),
      h("td", null, text(s.version)),
      h("td", null, x.healthy === undefined ? "—" : yesNo(x.healthy)),
      h("td", null, x.error ? h("span", { class: "warn-text" }, x.error) : text(x.leader_contact)));
  };
  clear(health).append(card("Each member's own status",
    table(["Member", "State", "Term", "Leader", "Lag", "Applied", "Version", "Healthy", "Leader contact / error"], (hl.members || []).map(hrow), { class: "grid", id: "health" })));

  clear(next).append(cli([
    ["lancemaster operator raft health", "every member's own status, lag and failure tolerance"],
    ["lancemaster operator raft list-peers", "the members as the leader sees them"],
    ["lancemaster operator raft transfer-leader", "move the leadership (e.g. before a restart)"],
  ]));
}
