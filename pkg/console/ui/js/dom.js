// DOM building without markup: every piece of data becomes a text node
// (textContent), never HTML. Attributes are set one by one; event handler
// attributes are refused, so data can never become code.

// h(tag, attrs, ...children): attrs is an object (class, href, data-*, ...);
// a child is a Node, a string or number (a text node), an array (flattened)
// or null/undefined/false (skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (/^on/i.test(k)) throw new Error("h: event attributes are not allowed: " + k);
    if (k === "href" && !String(v).startsWith("#")) throw new Error("h: only in-page links: " + v);
    el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// text is what a missing value shows.
export function text(v) {
  return v === undefined || v === null || v === "" ? "—" : String(v);
}

// fmtTime: an epoch-ms time as UTC "2026-12-02 01:05:56Z".
export function fmtTime(ms) {
  if (ms === undefined || ms === null || ms <= 0) return "—";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

// fmtAgo: how long ago an epoch-ms time was, in words ("3 s ago").
export function fmtAgo(ms, now) {
  if (ms === undefined || ms === null || ms <= 0) return "—";
  return fmtDuration(Math.max(0, (now || Date.now()) - ms)) + " ago";
}

export function fmtDuration(ms) {
  if (ms === undefined || ms === null || ms < 0) return "—";
  if (ms < 1000) return ms + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}

export function fmtBytes(n) {
  if (n === undefined || n === null || n < 0) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(1)) + " " + units[i];
}

export function yesNo(v) {
  return v === undefined || v === null ? "—" : v ? "yes" : "no";
}

// badge: a state as a coloured pill; the class names its state.
export function badge(state, extra) {
  const s = state || "UNKNOWN";
  return h("span", { class: "badge st-" + s.replace(/[^A-Za-z0-9_]/g, "_") + (extra ? " " + extra : "") }, s);
}

// kv: a definition list of [label, value] pairs; a value may be a Node.
// Pairs whose value is undefined are left out.
export function kv(pairs) {
  const dl = h("dl", { class: "kv" });
  for (const [k, v] of pairs) {
    if (v === undefined) continue;
    dl.appendChild(h("dt", null, k));
    dl.appendChild(h("dd", null, v instanceof Node ? v : text(v)));
  }
  return dl;
}

export function card(title, ...body) {
  return h("section", { class: "card" }, h("h2", null, title), ...body);
}

// cli: copyable boxes with the commands the operator may want next, each
// [command, what it does]. Copying only puts text on the clipboard.
export function cli(commands) {
  const box = h("section", { class: "card cli" }, h("h2", null, "Next, with the CLI"));
  for (const [cmd, why] of commands) {
    const code = h("code", { class: "cmd" }, cmd);
    const btn = h("button", { type: "button", class: "copy", title: "Copy the command" }, "Copy");
    btn.addEventListener("click", () => copy(cmd, code, btn));
    box.appendChild(h("div", { class: "cli-row" }, h("pre", null, "$ ", code), btn, why ? h("p", { class: "muted" }, why) : null));
  }
  return box;
}

function copy(cmd, code, btn) {
  const done = () => { btn.textContent = "Copied"; setTimeout(() => { btn.textContent = "Copy"; }, 1500); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(cmd).then(done, () => select(code));
  } else {
    select(code);
  }
}

function select(node) {
  const range = document.createRange();
  range.selectNodeContents(node);
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}

// shellQuote quotes a value for a POSIX shell command line when it needs it.
export function shellQuote(s) {
  s = String(s);
  return /^[A-Za-z0-9_.,:/=@%+-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'";
}

export function table(headers, rows, attrs) {
  return h("table", attrs || { class: "grid" },
    h("thead", null, h("tr", null, headers.map((c) => h("th", null, c)))),
    h("tbody", null, rows));
}
