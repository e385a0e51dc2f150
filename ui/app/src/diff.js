// Two runs side by side: which of the eight sources of variation changed (the result of
// `trace diff`), the first difference, and every aligned difference by kind.
import { get } from './api.js';
import { clear, el, shortId } from './dom.js';

function differences(title, list, a, b) {
  if (!list || !list.length) return '';
  return el('section', { class: 'panel' }, el('h3', {}, title), el('table', { class: 'diffs' },
    el('thead', {}, el('tr', {}, ['A', 'B', 'Difference'].map((h) => el('th', {}, h)))),
    el('tbody', {}, list.map((d) => el('tr', {},
      el('td', { class: 'mono' }, d.seq_a ? el('a', { href: '#/run/' + a + '/event/' + d.seq_a }, '#' + d.seq_a) : '—'),
      el('td', { class: 'mono' }, d.seq_b ? el('a', { href: '#/run/' + b + '/event/' + d.seq_b }, '#' + d.seq_b) : '—'),
      el('td', { class: 'pre' }, d.description))))));
}

function fieldTable(title, list) {
  if (!list || !list.length) return '';
  return el('section', { class: 'panel' }, el('h3', {}, title), el('table', { class: 'diffs' },
    el('thead', {}, el('tr', {}, ['Field', 'A', 'B'].map((h) => el('th', {}, h)))),
    el('tbody', {}, list.map((f) => el('tr', {}, el('td', {}, f.field), el('td', { class: 'mono' }, f.a), el('td', { class: 'mono' }, f.b))))));
}

export async function showDiff(main, crumbs, a, b) {
  const d = await get('diff', { a, b });
  clear(crumbs, el('a', { href: '#/' }, 'Runs'), ' › diff ', el('span', { class: 'mono' }, shortId(d.run_a) + ' ↔ ' + shortId(d.run_b)));
  const sources = el('table', { class: 'sources', id: 'sources' },
    el('thead', {}, el('tr', {}, ['Source', 'Changed', 'Evidence'].map((h) => el('th', {}, h)))),
    el('tbody', {}, d.sources.map((s) => el('tr', { class: s.changed ? 'changed' : '', 'data-source': s.source },
      el('td', {}, s.source), el('td', {}, s.changed ? 'changed' : 'same'), el('td', { class: 'pre' }, s.evidence)))));
  const first = d.first_difference;
  const calls = d.calls.filter((c) => c.answers_differ || c.request_diff || c.prompt_text_diff || (c.params && c.params.length));
  clear(main,
    el('h2', {}, 'Diff ', el('a', { href: '#/run/' + d.run_a, class: 'mono' }, shortId(d.run_a)), ' ↔ ',
      el('a', { href: '#/run/' + d.run_b, class: 'mono' }, shortId(d.run_b))),
    el('p', { id: 'diff-summary', class: d.identical ? 'verdict v-bitwise' : 'verdict v-diverged' },
      d.identical ? 'The runs are identical.' : 'Changed: ' + (d.changed.join(', ') || 'nothing the eight sources name') + '.'),
    first ? el('p', { id: 'first-difference' }, 'First difference: ', el('span', { class: 'pre' }, first.description)) : '',
    el('section', { class: 'panel' }, el('h3', {}, 'Sources of variation'), sources),
    fieldTable('Header', d.header_differences), fieldTable('Model', d.model_differences),
    fieldTable('Engine and machine', d.fingerprint_differences),
    calls.length ? el('section', { class: 'panel' }, el('h3', {}, 'Model calls that differ'), el('table', { class: 'diffs' },
      el('thead', {}, el('tr', {}, ['Call', 'Where', 'What'].map((h) => el('th', {}, h)))),
      el('tbody', {}, calls.map((c) => el('tr', {},
        el('td', { class: 'num' }, c.call),
        el('td', { class: 'mono' }, '#' + c.seq_a + ' / #' + c.seq_b),
        el('td', { class: 'pre' }, [c.prompt_text_diff, c.request_diff,
          c.first_output_token >= 0 ? 'first different output token at step ' + c.first_output_token + ': ' +
            JSON.stringify(c.output_token_a.text) + ' vs ' + JSON.stringify(c.output_token_b.text) : '']
          .filter(Boolean).join('\n'))))))) : '',
    differences('Tool results', d.tool_results, d.run_a, d.run_b),
    differences('Retrieved context', d.context_chunks, d.run_a, d.run_b),
    differences('Template variables', d.template_variables, d.run_a, d.run_b),
    differences('Clock reads', d.clock_reads, d.run_a, d.run_b),
    differences('Other events', d.other_events, d.run_a, d.run_b));
}
