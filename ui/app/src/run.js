// One run: what it was, where it came from (lineage), a replay button, the waterfall of
// every event and the panel of the event that is open.
import { get, snapshot } from './api.js';
import { clear, el, fmtDuration, fmtMs, fmtTime, shortId } from './dom.js';
import { eventPanel } from './event.js';
import { navigate, showError } from './nav.js';
import { replayBox, replayResult } from './replay.js';

const LIVE_REFRESH_MS = 2000;
let liveTimer = null;

function eventTitle(e) {
  switch (e.kind) {
    case 'llm_call':
      return (e.api || e.endpoint) + ' · ' + e.prompt_tokens + ' → ' + e.sampled_tokens + ' tokens' +
        (e.finish_reason ? ' · ' + e.finish_reason : '') + (e.http_status && e.http_status !== 200 ? ' · HTTP ' + e.http_status : '');
    case 'tool_call':
      return e.name + '(' + (e.arguments_json || '') + ')';
    case 'tool_result':
      return e.name + ' → ' + (e.content || '') + (e.is_error ? ' (error)' : '');
    case 'context_chunk':
      return e.source + (e.chunk_id ? ' #' + e.chunk_id : '') + ': ' + (e.content || '');
    case 'template_var':
      return e.name + ' = ' + e.value;
    case 'clock_read':
      return e.clock + ' ' + (e.text || e.value_ns);
    case 'output':
      return (e.stream === 'stderr' ? 'stderr: ' : '') + (e.text || '');
    case 'note':
      return e.topic + ': ' + e.text;
    case 'run_end':
      return e.how + (e.exit_code ? ' exit ' + e.exit_code : '') + (e.reason ? ': ' + e.reason : '');
    default:
      return e.error || '';
  }
}

// The bar of one event on the waterfall: a model call's queue, prefill and decode as
// segments of its span; any other event a tick at its time.
function bar(e, totalMs) {
  const pct = (ms) => Math.max(0, Math.min(100, (ms / totalMs) * 100)) + '%';
  const track = el('div', { class: 'track' });
  const t = e.timings;
  if (e.kind === 'llm_call' && t && t.total_ms > 0) {
    const start = t.start_offset_ms || Math.max(0, e.offset_ms - t.total_ms);
    const other = Math.max(0, t.total_ms - t.queue_ms - t.prefill_ms - t.decode_ms);
    const span = el('div', { class: 'span', style: `left:${pct(start)};width:${pct(t.total_ms)}` });
    for (const [cls, ms, name] of [['queue', t.queue_ms, 'queue'], ['prefill', t.prefill_ms, 'prefill'],
      ['decode', t.decode_ms, 'decode'], ['rest', other, 'other']]) {
      if (ms > 0) span.append(el('div', { class: 'seg ' + cls, style: `flex-grow:${ms}`, title: name + ' ' + fmtMs(ms) }));
    }
    track.append(span);
  } else {
    track.append(el('div', { class: 'tick k-' + e.kind, style: `left:${pct(e.offset_ms || 0)}` }));
  }
  return track;
}

function lineageBox(run) {
  const items = [];
  if (run.rerun && run.rerun.parent_run) {
    const r = run.rerun;
    items.push(el('div', {}, (r.mode === 'fork' ? 'Fork of ' : 'Rerun of '),
      el('a', { href: '#/run/' + r.parent_run, id: 'parent-link' }, shortId(r.parent_run)),
      r.live_from_call ? ', live from call ' + r.live_from_call : '',
      r.divergence ? ' · diverged: ' + r.divergence : ' · followed the recording',
      ' · ', el('a', { href: '#/diff/' + r.parent_run + '/' + run.run_id, id: 'diff-parent' }, 'diff with its parent')));
  }
  if (run.children && run.children.length) {
    items.push(el('div', {}, 'Re-run as:', el('ul', { class: 'tree', id: 'children' }, run.children.map((c) =>
      el('li', {}, el('a', { href: '#/run/' + c.run_id }, shortId(c.run_id)), ' ',
        c.rerun_mode === 'fork' ? 'fork' : 'rerun', c.diverged_at_call ? ' · diverged at call ' + c.diverged_at_call : '',
        ' · ', el('a', { href: '#/diff/' + run.run_id + '/' + c.run_id }, 'diff'))))));
  }
  return items.length ? el('section', { class: 'panel lineage', id: 'lineage' }, el('h3', {}, 'Lineage'), items) : '';
}

export async function showRun(main, crumbs, id, openSeq, params) {
  clearTimeout(liveTimer);
  const run = await get('runs/' + encodeURIComponent(id));
  clear(crumbs, el('a', { href: '#/' }, 'Runs'), ' › ', el('span', { class: 'mono' }, shortId(run.run_id)));
  const events = run.events;
  const end = Math.max(1, ...events.map((e) => (e.offset_ms || 0)));
  const vars = events.filter((e) => e.kind === 'template_var');
  let callNumber = 0;
  const forkCall = run.rerun && run.rerun.mode === 'fork' ? run.rerun.live_from_call : 0;
  const panel = el('aside', { class: 'panel event', id: 'event-panel' });
  const rows = events.map((e) => {
    const call = e.kind === 'llm_call' ? ++callNumber : 0;
    const tr = el('tr', {
      tabIndex: 0,
      'data-seq': e.seq,
      'data-call': call || null,
      class: 'k-' + (e.kind || 'bad') + (e.seq === openSeq ? ' open' : '') + (call && call === forkCall ? ' fork-point' : ''),
    },
    el('td', { class: 'num mono' }, '#' + e.seq),
    el('td', { class: 'num' }, '+' + ((e.offset_ms || 0) / 1000).toFixed(3) + 's'),
    el('td', {}, el('span', { class: 'kind k-' + e.kind }, call ? 'call ' + call : e.kind)),
    el('td', { class: 'title' }, eventTitle(e)),
    el('td', { class: 'bar' }, bar(e, end)));
    tr.addEventListener('click', () => navigate('#/run/' + run.run_id + '/event/' + e.seq));
    tr.addEventListener('keydown', (k) => {
      if (k.key === 'Enter') navigate('#/run/' + run.run_id + '/event/' + e.seq);
    });
    return tr;
  });
  const s = run.summary;
  const info = el('dl', { class: 'info' },
    el('dt', {}, 'Status'), el('dd', {}, el('span', { class: 'status s-' + run.status, id: 'run-status' }, run.status)),
    el('dt', {}, 'Command'), el('dd', { class: 'mono' }, (run.argv || []).join(' ')),
    el('dt', {}, 'Started'), el('dd', {}, fmtTime(run.start_time_ns) + ' · ' + fmtDuration(s.duration_ns)),
    run.label ? [el('dt', {}, 'Label'), el('dd', {}, run.label)] : '',
    el('dt', {}, 'Model'), el('dd', {}, [run.model.name, run.model.architecture, run.model.dtype].filter(Boolean).join(' · ') || '—'),
    el('dt', {}, 'Counts'), el('dd', {}, s.events + ' events · ' + s.model_calls + ' model calls · ' + s.sampled_tokens + ' tokens'),
    run.verifications.length ? [el('dt', {}, 'Verified'), el('dd', {}, run.verifications.slice(0, 3).map((v) =>
      el('div', {}, v.verdict + ' on ' + v.machine + ' (' + fmtTime(v.time_ns) + ')')))] : '',
    run.redaction && run.redaction.applied ? [el('dt', {}, 'Redaction'), el('dd', {}, 'applied (' + ((run.redaction.fields || []).length) + ' fields changed)')] : '');
  const errors = run.errors.length
    ? el('div', { class: 'error', role: 'alert', id: 'run-errors' }, run.errors.map((e) => el('div', {}, e.message)))
    : '';
  const forkNote = forkCall
    ? el('p', { class: 'fork-note', id: 'fork-note' }, 'Calls before call ' + forkCall + ' were answered from the recording; this fork runs live from call ' + forkCall + '.')
    : '';
  const timeline = el('table', { class: 'timeline', id: 'timeline' },
    el('thead', {}, el('tr', {}, ['Seq', 'Time', 'Kind', 'Event', 'Waterfall'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows));
  clear(main,
    el('h2', {}, 'Run ', el('span', { class: 'mono' }, run.run_id)),
    errors, info, lineageBox(run),
    snapshot
      ? (snapshot.replays[run.run_id]
        ? el('section', { class: 'panel replay' }, el('div', { id: 'replay-result' }, replayResult(snapshot.replays[run.run_id])))
        : '')
      : replayBox(run.run_id, '', 'replay', 'Replay the run', 'Re-execute every model call on the deterministic engine and compare token by token.'),
    forkNote,
    el('div', { class: 'split' }, el('section', { class: 'tl' }, timeline,
      run.next_seq ? el('p', { class: 'muted' }, 'This page shows the first events; the run has more.') : ''), panel));
  const open = events.find((e) => e.seq === openSeq);
  if (open) {
    clear(panel, el('p', { class: 'muted' }, 'Loading event…'));
    try {
      const detail = await get('runs/' + run.run_id + '/events/' + open.seq);
      clear(panel, eventPanel(detail, vars, run.run_id, rows[events.indexOf(open)].dataset.call));
    } catch (e) {
      showError(panel, e);
    }
    rows[events.indexOf(open)].focus({ preventScroll: true });
    rows[events.indexOf(open)].scrollIntoView({ block: 'nearest' });
  } else {
    clear(panel, el('p', { class: 'muted' }, 'Select an event to see it whole.'));
    const fork = rows.find((r) => r.classList.contains('fork-point'));
    if (fork) fork.scrollIntoView({ block: 'center' });
  }
  // A run still being recorded: the page follows it.
  if (run.status === 'recording') {
    liveTimer = setTimeout(() => {
      if (location.hash.startsWith('#/run/' + run.run_id)) showRun(main, crumbs, id, openSeq, params).catch((e) => showError(main, e));
    }, LIVE_REFRESH_MS);
  }
}
