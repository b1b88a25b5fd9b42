// The same-origin /v1 read API (docs/console.md): GET only, JSON answers.
// Every answer, success or error, carries answered_by and may carry
// stale_warning; each is handed to the listener app.js installs, which
// shows them in the footer and the banners.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let listener = () => {};

export function onAnswer(fn) {
  listener = fn;
}

// query builds "?k=v&..." from an object, leaving out empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === "" || v === false) continue;
    q.set(k, v === true ? "true" : String(v));
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

export async function get(path, params) {
  const url = "/v1/" + path + query(params);
  let resp;
  try {
    resp = await fetch(url, { method: "GET", headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, "UNREACHABLE", "the master did not answer: " + e.message);
  }
  let body = null;
  try {
    body = await resp.json();
  } catch (e) {
    throw new ApiError(resp.status, "BAD_ANSWER", "the answer to " + url + " is not JSON (HTTP " + resp.status + ")");
  }
  if (body && typeof body === "object") listener(body);
  if (!resp.ok) {
    const err = (body && body.error) || {};
    throw new ApiError(resp.status, err.code || "HTTP_" + resp.status, err.message || "HTTP " + resp.status);
  }
  return body;
}
