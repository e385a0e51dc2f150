// Replays from the page: a button, its progress (the server's event stream) and the
// verdict per call, with the first divergent token in context when there is one.
import { followReplay, post } from './api.js';
import { clear, el } from './dom.js';
import { showError } from './nav.js';

export function replayResult(report, prefix = 'replay') {
  const d = report.first_divergence;
  const calls = el('table', { class: 'verdicts' },
    el('thead', {}, el('tr', {}, ['Call', 'Verdict', 'Tokens', 'Max |Δlogit|'].map((h) => el('th', {}, h)))),
    el('tbody', {}, report.calls.map((c) => el('tr', { 'data-call': c.call },
      el('td', { class: 'num' }, c.call), el('td', { class: 'verdict v-' + c.level }, c.level),
      el('td', { class: 'num' }, c.tokens_verified + '/' + c.tokens_recorded),
      el('td', { class: 'num' }, c.max_logit_diff)))));
  const parts = [el('p', { id: prefix + '-verdict', class: 'verdict v-' + report.level, 'data-level': report.level },
    report.level === 'bitwise' ? 'bitwise: every token and logit reproduced' : report.level,
    ' · ' + report.tokens_verified + ' tokens on ' + report.device + ', ' + report.numerics)];
  // Where the recording and this replay ran, when that differs: under one canonical contract
  // a different path is no mismatch (the bits must match anyway).
  const fp = report.fingerprint_differences || [];
  if (fp.length) {
    const same = fp.every((f) => f.same_contract);
    parts.push(el('details', { class: 'fingerprint', id: prefix + '-fingerprint' },
      el('summary', {}, fp.length + ' fingerprint difference' + (fp.length > 1 ? 's' : '') +
        (same ? ': same contract (' + report.numerics + '), different path' : '')),
      el('table', {}, el('tbody', {}, fp.map((f) => el('tr', {},
        el('td', {}, f.field), el('td', { class: 'mono' }, f.recorded || '(none)'), el('td', {}, '→'),
        el('td', { class: 'mono' }, f.current || '(none)'),
        el('td', { class: 'muted' }, f.same_contract ? 'same contract' : '')))))));
  }
  if (d) {
    parts.push(el('div', { class: 'divergence', id: prefix === 'replay' ? 'divergence' : prefix + '-divergence' },
      el('h4', {}, 'First divergent token: call ' + d.call + ', step ' + d.step),
      el('p', { class: 'mono context' }, d.text_before,
        el('span', { class: 'rec', title: 'recorded' }, d.recorded_token.text),
        el('span', { class: 'rep', title: 'replayed' }, d.replayed_token.text)),
      el('table', {}, el('tbody', {},
        el('tr', {}, el('th', {}, 'recorded'), el('td', { class: 'mono' }, JSON.stringify(d.recorded_token.text) + ' id ' + d.recorded_token.id),
          el('td', {}, 'logit ' + d.recorded_logit + ', margin ' + d.recorded_margin)),
        el('tr', {}, el('th', {}, 'replayed'), el('td', { class: 'mono' }, JSON.stringify(d.replayed_token.text) + ' id ' + d.replayed_token.id),
          el('td', {}, 'logit ' + d.replayed_logit + ', margin ' + d.replayed_margin)))),
      d.first_differing_layer !== null ? el('p', {}, 'First differing layer: ' + d.first_differing_layer) : ''));
  }
  return [parts, calls];
}

// A replay button with its progress bar and result: the whole run, or (calls: "3") one
// call. `prefix` keeps the element ids of two boxes on one page apart.
export function replayBox(runId, calls, prefix, title, note) {
  const progress = el('progress', { id: prefix + '-progress', max: 1, value: 0, hidden: true });
  const status = el('span', { id: prefix + '-status', class: 'muted' });
  const result = el('div', { id: prefix + '-result' });
  const button = el('button', {
    id: prefix + '-button',
    onclick: async () => {
      button.disabled = true;
      clear(result);
      progress.hidden = false;
      progress.removeAttribute('value');
      status.textContent = 'starting…';
      try {
        const { replay } = await post('replays', { run: runId, calls });
        await followReplay(replay, (s) => {
          if (s.tokens_total > 0) {
            progress.max = s.tokens_total;
            progress.value = s.tokens_done;
          }
          status.textContent = s.done ? '' : `call ${s.calls_done}/${s.calls_total} · ${s.tokens_done}/${s.tokens_total} tokens`;
          if (s.done) {
            progress.hidden = true;
            if (s.error) clear(result, el('div', { class: 'error', role: 'alert' }, s.error));
            else clear(result, replayResult(s.report, prefix));
          }
        });
      } catch (e) {
        progress.hidden = true;
        showError(result, e);
      } finally {
        button.disabled = false;
      }
    },
  }, title);
  return el('section', { class: 'panel replay' }, el('p', { class: 'muted' }, note), button, ' ', progress, ' ', status, result);
}

