// Moving between pages (hash URLs, main.js routes them) and showing a failure in place.
import { ApiError, setKey } from './api.js';
import { clear, el } from './dom.js';

export function navigate(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}

function keyForm(message) {
  const input = el('input', { type: 'password', id: 'api-key', autocomplete: 'off', 'aria-label': 'API key' });
  return el('form', {
    class: 'panel keyform',
    onsubmit: (e) => {
      e.preventDefault();
      setKey(input.value.trim());
      window.dispatchEvent(new HashChangeEvent('hashchange'));
    },
  }, el('h2', {}, 'API key'), el('p', {}, message), input, ' ', el('button', { type: 'submit' }, 'Open'));
}

export function showError(target, e) {
  if (e instanceof ApiError && e.status === 401) {
    clear(target, keyForm('This trace ui server needs its API key (--api-key-file or TRACE_API_KEY).'));
    return;
  }
  clear(target, el('div', { class: 'error', role: 'alert' }, e.message || String(e)));
}
