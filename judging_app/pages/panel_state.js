// The panel's state, kept on window.qcatPanel for the page's life (a remount or a rerun finds it
// again; the tests read it), the helpers every part uses (the panel's elements, the tab's storage,
// escaping), and the drafts: the grades of a query in progress, kept in the tab.

export const P = window.qcatPanel = window.qcatPanel || {
  data: null, root: null, setState: null,
  screens: new Map(),   // query id -> screen (as the server sent it)
  order: [],            // ids of the queries held, the one on screen first
  current: null,        // the screen on display, or null while waiting for one
  focus: 0,             // the slot the keys grade; slots.length: the actions
  drafts: new Map(),    // query id -> {grades: [0-3 | null per slot], note}
  outbox: [],           // actions the server has not answered yet
  failed: [],           // actions the store could not take: the judge sends them again (R)
  finishedHere: new Set(),  // queries submitted or skipped here (dropped from later queues)
  waiting: [],          // keys typed while no query was on screen, in order: they go to the next ones shown
  draining: false,      // the waiting keys are being handled
  timer: null,          // {id, last, active} for the query on screen
  transitions: [],      // ms from Enter (or S, F) to the next query drawn: the benchmark reads them
  loadingShown: 0,      // how often Enter (or S, F) found no query held ready ("Loading the next query…")
  paces: [],            // ms between the judge's last actions (their pace), the latest last
  trips: [],            // ms from a message to the server's answer to it, the latest last
  sentTimes: new Map(), // message number -> when it was sent (until its answer comes)
  sentOnScreen: new Map(), // message number -> the query on screen when it was sent (the last answered one kept)
  counter: 0, epoch: null, messages: [],
};

export const esc = (text) => String(text).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
export const store = () => { try { return window.sessionStorage; } catch (e) { return null; } };
const draftKey = (id) => `qcat-panel-${P.data.judge}-draft-${id}`;
export const $ = (selector) => P.root.querySelector(selector);
export const $$ = (selector) => Array.from(P.root.querySelectorAll(selector));

export function slots() { return P.current ? P.current.slots : []; }

export function draft(screen) {
  if (!P.drafts.has(screen.id)) {
    let saved = null;
    try { saved = JSON.parse((store() && store().getItem(draftKey(screen.id))) || 'null'); } catch (e) { saved = null; }
    const grades = screen.slots.map((slot, i) => (saved && Number.isInteger(saved.grades[i])) ? saved.grades[i]
                                                 : (Number.isInteger(slot.grade) ? slot.grade : null));
    P.drafts.set(screen.id, {grades, note: (saved && saved.note) || ''});
  }
  return P.drafts.get(screen.id);
}

export function keepDraft() {
  if (!P.current || P.data.mode !== 'grade' || !store()) return;
  try { store().setItem(draftKey(P.current.id), JSON.stringify(draft(P.current))); } catch (e) { /* full: in memory only */ }
}

export function forget(id) {
  P.drafts.delete(id);
  try { if (store()) store().removeItem(draftKey(id)); } catch (e) { /* nothing kept to forget */ }
}
