// trace ui: the router. Every page is a hash URL, so a page can be bookmarked, reloaded
// and gone back to:
//   #/?q=&content=&label=&status=&model=&from=&before=&order=&cursor=   the runs
//   #/run/RUN            a run: its timeline        #/run/RUN/event/SEQ   with one event open
//   #/diff/A/B           two runs side by side
import { get, snapshot } from './api.js';
import { showDiff } from './diff.js';
import { showError } from './nav.js';
import { showRun } from './run.js';
import { showRuns } from './runs.js';

const main = document.getElementById('main');
const crumbs = document.getElementById('crumbs');

function parseHash() {
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query] = hash.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(query || '') };
}

async function route() {
  const { parts, params } = parseHash();
  window.scrollTo(0, 0);
  try {
    if (parts[0] === 'run' && parts[1]) {
      await showRun(main, crumbs, parts[1], parts[2] === 'event' ? Number(parts[3]) : 0, params);
    } else if (parts[0] === 'diff' && parts[1] && parts[2]) {
      await showDiff(main, crumbs, parts[1], parts[2]);
    } else {
      await showRuns(main, crumbs, params);
    }
  } catch (e) {
    showError(main, e);
  }
}

async function showStore() {
  try {
    const s = await get('store');
    document.getElementById('store').textContent =
      s.store + ' · ' + s.runs + ' runs' + (s.redacted ? ' · redacted' : '') + (snapshot ? ' · static page' : '');
  } catch {
    // The page says why when it loads; the header stays empty.
  }
}

window.addEventListener('hashchange', route);
document.addEventListener('keydown', (e) => {
  if (e.target.closest('input, textarea, select')) return;
  if (e.key === '/') {
    const filter = document.getElementById('filter-q');
    if (filter) {
      e.preventDefault();
      filter.focus();
    }
  }
});
if (snapshot && !location.hash) history.replaceState(null, '', snapshot.start);
showStore();
route();
