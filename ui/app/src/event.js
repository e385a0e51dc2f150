// The panel of one event. A model call shows what the model saw: the messages as the
// agent sent them, the rendered prompt (template variables marked), the sampled tokens
// coloured by their margin to the runner-up, the sampling parameters, usage and timings,
// and the raw request and response.
import { el, fmtMs, marginClass, prettyJson } from './dom.js';
import { snapshot } from './api.js';
import { replayBox } from './replay.js';

// The text of a message's content: a string, or the text parts of a list.
function contentText(content) {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((p) => (typeof p === 'string' ? p : p.text !== undefined ? p.text : JSON.stringify(p))).join('\n');
  }
  return JSON.stringify(content);
}

// The messages of a request in any of the APIs, as [{role, text}].
export function requestMessages(request) {
  const out = [];
  if (!request || typeof request !== 'object') return out;
  if (request.instructions) out.push({ role: 'instructions', text: contentText(request.instructions) });
  if (request.system) out.push({ role: 'system', text: contentText(request.system) });
  const list = Array.isArray(request.messages) ? request.messages : Array.isArray(request.input) ? request.input : null;
  if (list) {
    for (const m of list) {
      let text = contentText(m.content);
      if (m.tool_calls) text += (text ? '\n' : '') + JSON.stringify(m.tool_calls);
      out.push({ role: m.role || m.type || '?', text });
    }
  } else if (typeof request.input === 'string') {
    out.push({ role: 'user', text: request.input });
  } else if (request.prompt !== undefined) {
    out.push({ role: 'prompt', text: contentText(request.prompt) });
  }
  return out;
}

// The rendered prompt with each template variable's value marked where it occurs.
function markedPrompt(prompt, vars) {
  const marks = [];
  for (const v of vars) {
    if (!v.value) continue;
    let at = prompt.indexOf(v.value);
    while (at >= 0) {
      marks.push({ start: at, end: at + v.value.length, name: v.name });
      at = prompt.indexOf(v.value, at + v.value.length);
    }
  }
  marks.sort((a, b) => a.start - b.start || b.end - a.end);
  const pre = el('pre', { class: 'prompt', id: 'rendered-prompt' });
  let pos = 0;
  for (const m of marks) {
    if (m.start < pos) continue;  // overlaps one already marked
    pre.append(prompt.slice(pos, m.start));
    pre.append(el('mark', { title: 'template variable ' + m.name, 'data-var': m.name }, prompt.slice(m.start, m.end)));
    pos = m.end;
  }
  pre.append(prompt.slice(pos));
  return pre;
}

function tokenView(tokens) {
  const list = tokens.tokens;
  if (!list.length) return el('p', { class: 'muted' }, 'No sampled tokens recorded (an upstream call, or redacted).');
  const box = el('div', { class: 'tokens', id: 'tokens' });
  for (const t of list) {
    const tip = [`step ${t.step} · id ${t.id}`];
    if (t.logit !== undefined) tip.push('logit ' + t.logit.toFixed(4));
    if (t.logprob !== undefined) tip.push('logprob ' + t.logprob.toFixed(4));
    if (t.runner_up_id !== undefined) {
      tip.push('runner-up ' + (t.runner_up_text !== undefined ? JSON.stringify(t.runner_up_text) + ' ' : '') +
        'id ' + t.runner_up_id + ' logit ' + t.runner_up_logit.toFixed(4));
      tip.push('margin ' + t.margin.toFixed(4));
    }
    box.append(el('span', { class: 'tok ' + marginClass(t.margin), title: tip.join('\n'), 'data-step': t.step },
      t.text !== undefined ? t.text : '⟨' + t.id + '⟩'));
  }
  return [box, el('p', { class: 'muted legend' },
    'Background: margin between the chosen token\'s logit and the runner-up\'s — ',
    el('span', { class: 'tok m0' }, '< 0.5'), ' ', el('span', { class: 'tok m1' }, '< 1.5'), ' ',
    el('span', { class: 'tok m2' }, '< 3'), ' fragile; hover a token for its logits.',
    tokens.text_from ? '' : ' Token texts need the run\'s model folder (not found): ids shown.')];
}

function fields(pairs) {
  return el('dl', { class: 'info' }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));
}

function callPanel(d, vars, runId, call) {
  const e = d.event.llm_call || {};
  let request = null;
  try {
    request = JSON.parse(d.request_json || 'null');
  } catch {
    request = null;
  }
  const messages = requestMessages(request);
  const params = e.params || {};
  return [
    el('h3', {}, 'Model call · ', d.api || d.endpoint),
    d.error ? el('div', { class: 'error' }, 'HTTP ' + d.http_status + ': ' + d.error) : '',
    call && d.sampled_tokens > 0 && !snapshot
      ? replayBox(runId, call, 'replay-call', 'Replay this call', 'Re-execute call ' + call + ' alone.')
      : '',
    el('h4', {}, 'Messages as sent'),
    el('div', { class: 'messages', id: 'messages' }, messages.map((m) =>
      el('div', { class: 'msg r-' + m.role }, el('div', { class: 'role' }, m.role), el('div', { class: 'text' }, m.text)))),
    el('h4', {}, 'What the model saw (rendered prompt, ' + d.prompt_tokens + ' tokens)'),
    markedPrompt(d.rendered_prompt || '', vars),
    el('h4', {}, 'Sampled tokens'),
    tokenView(d.tokens),
    el('h4', {}, 'Sampling and engine'),
    fields([['model', d.model], ['temperature', d.temperature], ['top_p', params.top_p], ['top_k', params.top_k],
      ['max tokens', params.max_tokens], ['request seed', params.seed], ['seed used', d.seed_used], ['numerics', d.numerics],
      ['batch size', d.batch_size], ['finish', d.finish_reason], ['stream', d.stream ? 'yes' : 'no'],
      ['prompt tokens reused', d.prompt_tokens_reused]]),
    el('h4', {}, 'Usage and timings'),
    fields([['input tokens', d.usage.input_tokens], ['output tokens', d.usage.output_tokens],
      ['cached input tokens', d.usage.cached_input_tokens], ['queue', fmtMs(d.timings.queue_ms)],
      ['prefill', fmtMs(d.timings.prefill_ms)], ['decode', fmtMs(d.timings.decode_ms)],
      ['total', fmtMs(d.timings.total_ms)]]),
    el('details', {}, el('summary', {}, 'Request as sent'), el('pre', { class: 'raw', id: 'raw-request' }, prettyJson(d.request_json))),
    el('details', {}, el('summary', {}, 'Response as sent'), el('pre', { class: 'raw', id: 'raw-response' }, prettyJson(d.response_json))),
  ];
}

export function eventPanel(detail, vars, runId, call) {
  if (detail.kind === 'llm_call') return callPanel(detail, vars, runId, call);
  const skip = new Set(['event', 'seq', 'kind', 'wall_time_ns', 'offset_ms']);
  return [
    el('h3', {}, detail.kind.replace('_', ' '), ' · #' + detail.seq),
    el('dl', { class: 'info' }, Object.entries(detail).filter(([k]) => !skip.has(k)).map(([k, v]) =>
      [el('dt', {}, k), el('dd', { class: 'pre' }, typeof v === 'string' ? prettyJson(v) : JSON.stringify(v))])),
  ];
}
