// Calls to trace ui's JSON API (docs/ui.md). The API key, when the server needs one, is
// asked for once and kept for the tab (sessionStorage), sent as a bearer token; it never
// goes into a URL.
const KEY = 'trace-ui-key';

// A static page (`trace replay --html`, `trace diff --html`) carries the API replies it
// needs: calls are answered from it, and nothing is fetched.
const snapshotNode = document.getElementById('trace-snapshot');
export const snapshot = snapshotNode ? JSON.parse(snapshotNode.textContent) : null;

// The path and its non-empty parameters in name order: ui/snapshot.h SnapshotKey.
function snapshotKey(path, params) {
  const names = Object.keys(params || {}).filter((k) => params[k] !== undefined && params[k] !== null && params[k] !== '').sort();
  return path + names.map((k, i) => (i ? '&' : '?') + k + '=' + params[k]).join('');
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers() {
  const key = sessionStorage.getItem(KEY);
  return key ? { Authorization: 'Bearer ' + key } : {};
}

export function setKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

async function call(method, path, params) {
  if (snapshot) {
    const reply = snapshot.replies[snapshotKey(path, params)];
    if (method === 'GET' && reply !== undefined) return reply;
    throw new ApiError(404, 'not_in_page', 'This is a static page: it holds the runs it was written with, and this view is not one of them (open it with `trace ui`).');
  }
  const url = new URL('/ui/api/' + path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
  }
  let res;
  try {
    res = await fetch(url, { method, headers: headers() });
  } catch (e) {
    throw new ApiError(0, 'network', 'the trace ui server cannot be reached: ' + e.message);
  }
  let body = null;
  try {
    body = await res.json();
  } catch {
    throw new ApiError(res.status, 'bad_reply', 'the server answered ' + res.status + ' without JSON');
  }
  if (!res.ok) {
    const e = body && body.error ? body.error : {};
    throw new ApiError(res.status, e.code || String(res.status), e.message || 'HTTP ' + res.status);
  }
  return body;
}

export const get = (path, params) => call('GET', path, params);
export const post = (path, params) => call('POST', path, params);

// Reads a replay's server-sent events, calling onState with each state until it is done.
export async function followReplay(id, onState) {
  const res = await fetch('/ui/api/replays/' + encodeURIComponent(id) + '/events', {
    headers: headers(),
  });
  if (!res.ok || !res.body) throw new ApiError(res.status, 'stream', 'the replay stream failed');
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const chunk = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of chunk.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const state = JSON.parse(line.slice(6));
        onState(state);
        if (state.done) return;
      }
    }
  }
}
