// The run list: filters, a server-side page, keyboard navigation (j/k or arrows, Enter to
// open, x to select for a diff).
import { get } from './api.js';
import { clear, el, fmtDuration, shortId } from './dom.js';
import { navigate } from './nav.js';

const STATUSES = ['complete', 'recording', 'incomplete', 'crashed'];

function hashOf(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  return '#/' + (s ? '?' + s : '');
}

function verdictText(run) {
  return (run.verifications || []).map((v) => v.verdict).join(', ');
}

function lineage(run) {
  if (!run.parent_run) return '';
  return (run.rerun_mode === 'fork' ? 'fork of ' : 'rerun of ') + shortId(run.parent_run);
}

export async function showRuns(main, crumbs, params) {
  clear(crumbs, el('span', {}, 'Runs'));
  const current = Object.fromEntries(params.entries());
  const page = await get('runs', current);
  const field = (name, label, attrs) =>
    el('label', {}, label, ' ', el('input', { id: 'filter-' + name, name, value: current[name] || '', ...attrs }));
  const status = el('select', { id: 'filter-status', name: 'status' },
    el('option', { value: '' }, 'any'),
    STATUSES.map((s) => el('option', { value: s, selected: current.status === s }, s)));
  const order = el('select', { id: 'filter-order', name: 'order' },
    el('option', { value: 'newest', selected: current.order !== 'oldest' }, 'newest first'),
    el('option', { value: 'oldest', selected: current.order === 'oldest' }, 'oldest first'));
  const form = el('form', {
    class: 'filters',
    role: 'search',
    onsubmit: (e) => {
      e.preventDefault();
      const data = Object.fromEntries(new FormData(form).entries());
      if (data.order === 'newest') delete data.order;
      navigate(hashOf(data));
    },
  },
  field('q', 'Text', { placeholder: 'command or label  ( / )', type: 'search' }),
  field('content', 'In prompts and outputs', { type: 'search', size: 16 }),
  field('label', 'Label', { size: 10 }),
  el('label', {}, 'Status ', status),
  field('model', 'Model', { size: 12 }),
  field('from', 'From', { type: 'date' }),
  field('before', 'Before', { type: 'date' }),
  el('label', {}, 'Order ', order),
  el('button', { type: 'submit', id: 'filter-apply' }, 'Filter'));

  const selected = new Set();
  const diffButton = el('button', {
    id: 'diff-selected',
    disabled: true,
    onclick: () => {
      const [a, b] = [...selected];
      navigate('#/diff/' + a + '/' + b);
    },
  }, 'Diff the two selected runs');
  const rows = page.runs.map((r) => {
    const box = el('input', {
      type: 'checkbox',
      class: 'select-run',
      'aria-label': 'select run ' + r.run_id,
      onchange: () => {
        if (box.checked) selected.add(r.run_id);
        else selected.delete(r.run_id);
        diffButton.disabled = selected.size !== 2;
      },
    });
    const tr = el('tr', { tabIndex: 0, 'data-run': r.run_id, class: r.problem ? 'damaged' : '' },
      el('td', { onclick: (e) => e.stopPropagation() }, box),
      el('td', { class: 'mono' }, el('a', { href: '#/run/' + r.run_id }, shortId(r.run_id))),
      el('td', {}, r.label),
      el('td', { class: 'cmd', title: r.command }, r.command),
      el('td', { class: 'nowrap' }, r.started),
      el('td', { class: 'num' }, fmtDuration(r.duration_ns)),
      el('td', {}, el('span', { class: 'status s-' + r.status }, r.problem ? 'damaged' : r.status)),
      el('td', { class: 'num' }, r.model_calls),
      el('td', { class: 'num' }, r.sampled_tokens),
      el('td', {}, r.model),
      el('td', { class: 'verdict' }, verdictText(r)),
      el('td', {}, r.parent_run ? el('a', { href: '#/run/' + r.parent_run }, lineage(r)) : ''));
    tr.addEventListener('click', (e) => {
      if (!e.target.closest('a')) navigate('#/run/' + r.run_id);
    });
    tr.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') navigate('#/run/' + r.run_id);
      else if (e.key === 'x') box.click();
    });
    return tr;
  });
  const table = el('table', { class: 'runs', id: 'runs' },
    el('thead', {}, el('tr', {}, ['', 'Run', 'Label', 'Command', 'Started', 'Duration', 'Status',
      'Calls', 'Tokens', 'Model', 'Verified', 'Lineage'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows));
  table.addEventListener('keydown', (e) => {
    const i = rows.indexOf(document.activeElement);
    if (i < 0) return;
    if (e.key === 'j' || e.key === 'ArrowDown') rows[Math.min(i + 1, rows.length - 1)].focus();
    else if (e.key === 'k' || e.key === 'ArrowUp') rows[Math.max(i - 1, 0)].focus();
    else return;
    e.preventDefault();
  });
  const pager = el('div', { class: 'pager' },
    current.cursor ? el('a', { href: hashOf({ ...current, cursor: '' }), id: 'first-page' }, '« First page') : '',
    page.next ? el('a', { href: hashOf({ ...current, cursor: page.next }), id: 'next-page' }, 'Next page »') : '',
    page.scan_limited ? el('span', { class: 'muted' }, ' (this page stopped after scanning many runs; the next page goes on)') : '');
  clear(main, form,
    el('div', { class: 'toolbar' }, diffButton,
      el('span', { class: 'muted' }, ' j/k move · Enter opens · x selects · / filters')),
    page.runs.length ? table : el('p', { class: 'empty', id: 'no-runs' }, 'No runs match.'),
    pager);
  if (rows.length) rows[0].focus({ preventScroll: true });
}
