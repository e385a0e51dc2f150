// Building the page without a framework: el() makes an element from a tag, its attributes
// (properties, `on*` handlers, `class`, `data-*`) and children (nodes or strings, never
// parsed as HTML: text from a recorded run cannot inject markup).
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'class') node.className = value;
    else if (key.startsWith('data-') || key.startsWith('aria-') || key === 'role' || key === 'for') {
      node.setAttribute(key, value === true ? '' : String(value));
    } else node[key] = value;
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(node, c);
    else node.append(c instanceof Node ? c : String(c));
  }
}

export function clear(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

export function fmtTime(ns) {
  if (!ns) return '';
  return new Date(Number(ns) / 1e6).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function fmtDuration(ns) {
  const s = Number(ns) / 1e9;
  if (s < 60) return s.toFixed(1) + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + String(Math.floor(s % 60)).padStart(2, '0') + 's';
  return Math.floor(s / 3600) + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
}

export function fmtMs(ms) {
  if (ms === undefined || ms === null) return '';
  return ms < 1000 ? ms.toFixed(1) + ' ms' : (ms / 1000).toFixed(2) + ' s';
}

export function shortId(id) {
  return id ? id.slice(0, 10) : '';
}

// Pretty JSON of a string that holds JSON, else the string itself.
export function prettyJson(text) {
  if (!text) return '';
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

// The background class of a token by its margin to the runner-up (the same bands as
// `trace replay --html`): fragile tokens red, then orange, yellow; comfortable ones plain.
export function marginClass(margin) {
  if (margin === undefined || margin === null) return 'mx';
  if (margin < 0.5) return 'm0';
  if (margin < 1.5) return 'm1';
  if (margin < 3.0) return 'm2';
  return 'm3';
}
