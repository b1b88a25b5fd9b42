// The job page: the timeline as a picture (one step per journaled
// transition: kind, time, actor, journal index, detail), the dispatch
// identity, the result and its evidence, the build, the log tail, and the
// CLI commands that fit the job's state. Only named fields are shown: a
// field the page does not know never reaches the screen.
import { h, clear, text, fmtTime, fmtDuration, fmtBytes, yesNo, badge, kv, card, cli } from "./dom.js";
import { get } from "./api.js";

// LOG_BYTES is how much of the log's end the page shows.
export const LOG_BYTES = 16384;

export function mount(main, route) {
  const id = Number(route.id);
  const head = h("div", { class: "page-head" }, h("h1", null, "Job " + id));
  const content = h("div", { id: "job" });
  clear(main).append(h("p", null, h("a", { href: "#/jobs" }, "« all jobs")), head, content);
  // The log tail (/v1/jobs/ID/logs: the backend's redacted worker log, else
  // the journal's tail) is read at the first render, then again only while
  // the job may still write to it.
  let logs = null;
  let live = true;
  return {
    async refresh() {
      const [ans, l] = await Promise.all([get("jobs/" + id),
        live ? get("jobs/" + id + "/logs", { max_bytes: LOG_BYTES }).then((x) => x.logs || {}, (e) => ({ error: e })) : null]);
      if (l) logs = l;
      const st = ans.job && ans.job.mutation_state;
      live = st === "PENDING" || st === "RUNNING" || st === "RESOLVING";
      render(ans, logs, head, content);
    },
  };
}

function render(ans, logs, head, content) {
  const j = ans.job || {};
  const state = j.mutation_state || "UNKNOWN";
  const what = [j.mutation_type, j.index_type, j.index_name].filter(Boolean).join(" ");
  clear(head).append(h("h1", null, "Job " + Number(j.job_id) + " ", badge(state, "big")),
    h("p", { class: "subtitle" }, text(what), " on ", [j.catalog, j.db, j.table].map(text).join("."),
      j.unresolved ? h("span", { class: "tag tag-unresolved" }, "unresolved") : null,
      j.force_released ? h("span", { class: "tag" }, "force-released") : null,
      j.restore_hold ? h("span", { class: "tag" }, "held") : null));

  const notes = [];
  if (state === "UNKNOWN" && !j.force_released) {
    notes.push(h("div", { class: "banner error", "data-banner": "unknown" },
      "The outcome is UNKNOWN: no trusted result and no proof from the dataset. The job keeps its fence, quota and slot until an operator force-releases it."));
  }
  if (state === "RESOLVING") notes.push(h("div", { class: "banner warn" }, "RESOLVING: the worker is gone without a trusted result; the outcome is being read from the dataset."));
  if (j.restore_hold) {
    notes.push(h("div", { class: "banner warn", "data-banner": "held" },
      "Held by a snapshot restore: nothing vouches for what happened to this job after the file was saved, so it is never dispatched again."));
  }
  if (j.force_warning) notes.push(h("div", { class: "banner warn" }, "Force-release warning: ", j.force_warning));

  const tl = timeline(ans.timeline || []);
  const identity = card("Dispatch identity", kv([
    ["backend", j.backend_id ? h("a", { href: "#/backends" }, String(j.backend_id)) : "—"],
    ["process epoch", j.process_epoch],
    ["dispatch revision", j.dispatch_revision],
    ["invocation id", j.invocation_id ? h("code", null, j.invocation_id) : "—"],
    ["leader term", j.leader_term],
    ["dispatched", fmtTime(j.dispatch_time_ms)],
    ["deadline", fmtTime(j.deadline_ms)],
    ["attempts", j.dispatch_attempts],
    ["holds slot", yesNo(j.holds_slot)],
  ]));
  const evidence = card("Result and evidence", kv([
    ["outcome", badge(state)],
    ["refresh", text(j.refresh_state)],
    ["result code", j.result_code ? h("code", null, j.result_code) : "—"],
    ["termination proof", j.termination_proof ? h("code", null, j.termination_proof) : "—"],
    ["termination message", j.termination_message || undefined],
    ["completion reason", text(j.completion_reason)],
    ["result message", j.result_message || undefined],
    ["metadata advanced", j.external_metadata_advanced === undefined ? undefined : yesNo(j.external_metadata_advanced)],
    ["result dataset version", j.result_dataset_version],
    ["index uuid", j.index_uuid || undefined],
    ["leftover index uuid", j.leftover_index_uuid || undefined],
    ["resolve after", j.resolve_after_ms ? fmtTime(j.resolve_after_ms) : undefined],
    ["refresh failed at", j.refresh_failure_time_ms ? fmtTime(j.refresh_failure_time_ms) : undefined],
    ["cancelled by", j.cancel_actor || undefined],
    ["force-released", j.force_released ? "by " + text(j.force_actor) + " at " + fmtTime(j.force_time_ms) : undefined],
    ["force note", j.force_note || undefined],
  ]));
  const build = card("Build", kv([
    ["phase", text(j.build_phase)],
    ["phases", phases(ans.timeline || [], state)],
    ["build elapsed", j.build_elapsed_ms !== undefined ? fmtDuration(j.build_elapsed_ms) : "—"],
    ["last progress", j.progress_time_ms ? fmtTime(j.progress_time_ms) : undefined],
    ["started", fmtTime(j.start_time_ms)],
    ["finished", fmtTime(j.finish_time_ms)],
    ["wall time", j.wall_ms !== undefined ? fmtDuration(j.wall_ms) : "—"],
    ["peak memory", j.peak_memory_bytes !== undefined ? fmtBytes(j.peak_memory_bytes) + (j.peak_memory_source ? " (" + j.peak_memory_source + ")" : "") : "—"],
    ["optimized indexes", j.optimized_indexes && j.optimized_indexes.length ? String(j.optimized_indexes.length) : undefined],
  ]));
  const def = card("Definition", kv([
    ["catalog", j.catalog], ["db", j.db], ["table", j.table], ["index", j.index_name],
    ["mutation", j.mutation_type], ["index type", j.index_type], ["column", j.column],
    ["properties", j.properties_json ? h("code", null, j.properties_json) : undefined],
    ["if not exists", j.if_not_exists ? "yes" : undefined], ["if exists", j.if_exists ? "yes" : undefined],
    ["admitted dataset version", j.admitted_dataset_version],
    ["creator", j.creator], ["claimed creator", j.claimed_creator || undefined],
    ["created", fmtTime(j.create_time_ms)], ["updated", fmtTime(j.update_time_ms)], ["revision", j.rev],
  ]));
  clear(content).append(...notes,
    h("div", { class: "job-layout" },
      h("div", { class: "col-main" }, card("Timeline", tl), logTail(Number(j.job_id), logs)),
      h("div", { class: "col-side" }, evidence, identity, build, def)),
    cli(commands(j)));
}

export function timeline(events) {
  if (!events.length) return h("p", { class: "empty" }, "No transitions recorded.");
  const ol = h("ol", { class: "timeline", id: "timeline" });
  let prev = null;
  for (const e of events) {
    const delta = prev !== null && e.time_ms ? "+" + fmtDuration(Math.max(0, e.time_ms - prev)) : "";
    if (e.time_ms) prev = e.time_ms;
    const kind = String(e.kind || "?");
    ol.appendChild(h("li", { class: "ev ev-" + kind.replace(/[^A-Za-z0-9_]/g, "_"), "data-kind": kind, "data-index": e.index },
      h("span", { class: "dot" }),
      h("div", { class: "ev-body" },
        h("div", { class: "ev-head" }, h("strong", { class: "ev-kind" }, kind),
          h("span", { class: "ev-time" }, fmtTime(e.time_ms)), delta ? h("span", { class: "ev-delta muted" }, delta) : null,
          h("span", { class: "ev-index muted", title: "journal (Raft) index of the entry that made it" },
            e.index ? "journal #" + e.index : "journal # not recorded")),
        e.actor ? h("div", { class: "ev-actor" }, "by ", e.actor) : null,
        e.detail ? h("div", { class: "ev-detail" }, e.detail) : null)));
  }
  return ol;
}

// phases: the build phases of the timeline, each with how long it lasted
// (until the next transition), or "running" for the current one.
function phases(events, state) {
  const out = h("span", { class: "phases", id: "phases" });
  events.forEach((e, i) => {
    if (e.kind !== "PHASE") return;
    const next = events.slice(i + 1).find((x) => x.time_ms);
    const took = next && e.time_ms ? fmtDuration(Math.max(0, next.time_ms - e.time_ms)) : state === "RUNNING" ? "running" : "";
    out.appendChild(h("span", { class: "phase" }, h("strong", null, e.detail || "?"), took ? " " + took : ""));
  });
  return out.childNodes.length ? out : undefined;
}

function logTail(id, logs) {
  const more = "The whole log: lancemaster jobs logs " + id;
  if (!logs) return card("Log tail", h("p", { class: "empty" }, more));
  if (logs.error) return card("Log tail", h("p", { class: "empty" }, "The log could not be read (" + logs.error.message + "). " + more));
  const from = logs.source === "backend" ? "from the backend" : logs.source === "journal" ? "the journal's tail" : "";
  const meta = [from, logs.truncated ? "truncated" : "", logs.phase ? "phase " + logs.phase : ""].filter(Boolean).join(", ");
  return card("Log tail" + (meta ? " (" + meta + ")" : ""),
    logs.note ? h("p", { class: "muted" }, logs.note) : null,
    logs.log ? h("pre", { class: "log", id: "log-tail" }, logs.log) : h("p", { class: "empty" }, "No log. " + more));
}

function commands(j) {
  const id = Number(j.job_id);
  const st = j.mutation_state;
  const out = [["lancemaster jobs show " + id, "the same view in a terminal (--consistent reads through the leader)"]];
  if (st === "PENDING" || st === "RUNNING" || st === "RESOLVING" || j.unresolved) out.push(["lancemaster jobs watch " + id, "follow it until it is terminal and refreshed"]);
  if (st === "PENDING" && j.restore_hold) out.push(["lancemaster jobs cancel " + id, "held: cancel it, check the dataset, then admit the work again if it is still needed"]);
  else if (st === "PENDING") out.push(["lancemaster jobs cancel " + id, "cancel it before a dispatch (PENDING only)"]);
  if (st === "UNKNOWN" && !j.force_released) {
    out.push(["lancemaster jobs resolve " + id + " --force-release --comment 'why it is safe'",
      "free its fence, quota and slot once you know no worker runs it; the outcome stays UNKNOWN"]);
  }
  out.push(["lancemaster jobs logs " + id, "the build's redacted worker log"]);
  if (j.backend_id) out.push(["lancemaster backends show " + Number(j.backend_id), "the backend that ran it"]);
  return out;
}
