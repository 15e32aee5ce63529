// The grading panel (judging_app/pages/panel.py): the query, both blind groups and their grades, drawn
// and graded in the browser. The panel owns the keyboard; the server hears from it once per action
// (submit, skip, flag & skip, a review saved): the panel's outbox, sent as one state value.
//
// Transitions never wait for the server: the panel holds the next queries (claimed for the judge),
// shows the next one the moment Enter is pressed, and keeps the previous one's action in its
// outbox until the server answers it. Every key is handled synchronously, against the query on
// screen when it was typed; keys typed while no query is on screen (the panel ran out of queries
// held ready) wait, in order, for the next one, and keep waiting through any number of such spells
// (a waiting Enter that submits the last query held leaves the keys after it waiting again).
// An answer is built on the holding list of the message it answers: it never takes away the query on
// screen unless that query was on screen when the message was sent (see receive), and an answer to no
// message at all (a page load, the reconnect after an app restart) is answered with a hello that says
// what the panel holds.

const P = window.qcatPanel = window.qcatPanel || {
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

const NAMES = ['Off-topic', 'Acceptable', 'Good', 'Excellent'];
const esc = (text) => String(text).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
const store = () => { try { return window.sessionStorage; } catch (e) { return null; } };
const draftKey = (id) => `qcat-panel-${P.data.judge}-draft-${id}`;
const outboxKey = () => `qcat-panel-${P.data.judge}-outbox`;
const failedKey = () => `qcat-panel-${P.data.judge}-failed`;
const $ = (selector) => P.root.querySelector(selector);
const $$ = (selector) => Array.from(P.root.querySelectorAll(selector));

function draft(screen) {
  if (!P.drafts.has(screen.id)) {
    let saved = null;
    try { saved = JSON.parse((store() && store().getItem(draftKey(screen.id))) || 'null'); } catch (e) { saved = null; }
    const grades = screen.slots.map((slot, i) => (saved && Number.isInteger(saved.grades[i])) ? saved.grades[i]
                                                 : (Number.isInteger(slot.grade) ? slot.grade : null));
    P.drafts.set(screen.id, {grades, note: (saved && saved.note) || ''});
  }
  return P.drafts.get(screen.id);
}

function keepDraft() {
  if (!P.current || P.data.mode !== 'grade' || !store()) return;
  try { store().setItem(draftKey(P.current.id), JSON.stringify(draft(P.current))); } catch (e) { /* full: in memory only */ }
}

function forget(id) {
  P.drafts.delete(id);
  try { if (store()) store().removeItem(draftKey(id)); } catch (e) { /* nothing kept to forget */ }
}

// ---- time at work on the query on screen: gaps of inactivity count at most the idle cap
function activity() {
  if (!P.timer) return;
  const now = performance.now();
  P.timer.active += Math.min(now - P.timer.last, P.data.idle_cap * 1000);
  P.timer.last = now;
}

// ---- talking to the server
const RESEND_MS = 3000;
const DONE_ASK_MS = 30000;  // with nothing left for the judge: ask again whether a query came back  // an action unanswered this long is sent again (a message lost in a reconnect)

function keepOutbox() {  // in the tab, so that a reload sends them again (or keeps them for R)
  if (!store()) return;
  try {
    store().setItem(outboxKey(), JSON.stringify(P.outbox));
    store().setItem(failedKey(), JSON.stringify(P.failed));
  } catch (e) { /* storage full or refused: kept in memory only, and sent all the same */ }
}

// How many queries to hold (the one on screen included): twice as many as the judge gets through,
// at their pace of late, while a message goes to the server and back (its slowest of late: a busy
// server's round trips vary that much), and a margin; within the server's bounds (data.hold_range).
const MARGIN = 2, FIRST_TRIP_MS = 2000;  // before the first answer: a guess on the slow side
const recent = (list, value, keep) => { list.push(value); if (list.length > keep) list.shift(); };

function holdWanted() {
  const [least, most] = (P.data && P.data.hold_range) || [1, 1];
  if (!P.paces.length) return least;
  const pace = [...P.paces].sort((a, b) => a - b)[Math.floor(P.paces.length / 2)];
  const trip = P.trips.length ? Math.max(...P.trips) : FIRST_TRIP_MS;
  return Math.max(least, Math.min(most, Math.ceil(2 * trip / Math.max(pace, 1)) + MARGIN));
}

function send(hello) {
  keepOutbox();
  // One message at a time: Streamlit drops the answer of a run that a newer message of the panel
  // overtook, so a judge typing faster than the server answers heard nothing back until they paused.
  // What comes meanwhile waits in the outbox and goes with the next message, sent with the answer.
  if (P.sentTimes.size && performance.now() - P.sentAt < RESEND_MS) { P.sendPending = true; return; }
  P.sendPending = false;
  P.sentAt = performance.now();
  P.sends = (P.sends || 0) + 1;  // makes every message new, so that a resend reaches the server too
  P.sentTimes.set(P.sends, P.sentAt);
  P.sentOnScreen.set(P.sends, P.order[0]);
  if (hello) (P.hellos = P.hellos || new Set()).add(P.sends);  // its round trip is not timed (below)
  P.asked = holdWanted();
  // P.order: the query on screen first, then those held ready (a finished one leaves it at once)
  P.setState('outbox', {actions: P.outbox.slice(), send: P.sends, holding: P.order.slice(), want: P.asked});
}

function paced(at) {  // the judge finished a query (Enter, S, a click): their pace, as typed
  if (P.lastDoneAt !== undefined) recent(P.paces, at - P.lastDoneAt, 8);
  P.lastDoneAt = at;
}

function firstKeys(at) {
  // Before the judge's first query is done, their pace is guessed from their first grade keys (a key
  // per listing and Enter), so that a fast judge's panel asks for more before the first Enter.
  if (P.paces.length || !P.current) return;
  P.keyTimes = (P.keyTimes || []).concat([at]);
  if (P.keyTimes.length !== 3) return;
  const perKey = (P.keyTimes[2] - P.keyTimes[0]) / 2;
  recent(P.paces, perKey * (P.current.slots.length + 1), 8);
  if (P.order.length < holdWanted() - 1) send();  // after the message on its way, if one is (send waits)
}

function heard(data) {
  // The server's answer to message data.heard (and to those before it): the round trip, measured.
  // A hello (what a new or reconnected panel holds, sent on its first answer) is answered by an idle
  // page's quick run: it says little of the round trips of the judge's actions, so it is not counted.
  const sent = P.sentTimes.get(data.heard);
  if (sent !== undefined && !(P.hellos && P.hellos.has(data.heard))) recent(P.trips, performance.now() - sent, 8);
  for (const n of [...P.sentTimes.keys()]) if (n <= data.heard) P.sentTimes.delete(n);
}



function act(kind, extra) {
  const screen = P.current;
  const action = Object.assign({id: `${Date.now().toString(36)}-${(P.counter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
                                kind, query: screen.id, text: screen.plain}, extra);
  P.outbox.push(action);
  send();
  return action;
}

function say(text, tone, kind) {  // the panel's one message line (a newer message replaces it)
  P.messages = [{text, tone, kind}];
  drawMessages();
}

// ---- keys
function slots() { return P.current ? P.current.slots : []; }

function grade(digit) {
  const d = draft(P.current), n = slots().length;
  let at = P.focus < n ? P.focus : d.grades.findIndex((g) => g === null);
  if (at < 0) return;
  d.grades[at] = digit;
  P.focus = at + 1;
  keepDraft();
  drawGrades(true);
}

function move(step) {
  P.focus = Math.max(0, Math.min(slots().length, P.focus + step));
  drawGrades(true);
}

function nudge(step) {
  const d = draft(P.current);
  if (P.focus >= slots().length) return;
  const now = d.grades[P.focus];
  d.grades[P.focus] = Math.max(0, Math.min(3, now === null ? (step > 0 ? 0 : 3) : now + step));
  keepDraft();
  drawGrades(false);
}

function unGrade() {
  const d = draft(P.current);
  if (P.focus < slots().length && d.grades[P.focus] !== null) d.grades[P.focus] = null;
  else if (P.focus > 0) { P.focus -= 1; d.grades[P.focus] = null; }
  keepDraft();
  drawGrades(true);
}

function submit() {
  const d = draft(P.current), missing = d.grades.filter((g) => g === null).length;
  if (missing) {
    P.focus = d.grades.findIndex((g) => g === null);
    say(`Grade every listing first: ${missing} of ${d.grades.length} are not graded yet.`, 'warn', 'incomplete');
    drawGrades(true);
    return;
  }
  activity();
  const grades = slots().map((slot, i) => [slot.listing, slot.side, d.grades[i]]);
  const note = ($('.note') && $('.note').value.trim()) || null;
  if (P.data.mode === 'review') { act('review', {grades, note: null}); leave(); return; }
  act('submit', {grades, note, seconds: Math.round((P.timer ? P.timer.active : 0)) / 1000});
  leave();
}

function skip(flagged) {
  const note = ($('.note') && $('.note').value.trim()) || '';
  if (flagged && !note) {
    say('Write in the note field what is wrong with the query, then press Enter (or Flag & skip) again.', 'warn');
    $('.note').focus();
    return;
  }
  act(flagged ? 'flag' : 'skip', {note: note || null});
  leave();
}

function leave() {
  // The query is done here: the next one held ready is shown at once.
  const left = P.current;
  const note = $('.note');
  if (note && P.root.getRootNode().activeElement === note) note.blur();  // the keys grade again
  P.finishedHere.add(left.id);
  forget(left.id);
  P.order = P.order.filter((id) => id !== left.id);
  P.pressedAt = performance.now();
  showNext();
}

function retry() {
  if (!P.failed.length) return;
  P.retriedAt = performance.now();
  P.failed.forEach((action) => {
    P.outbox.push(Object.assign({}, action, {id: `${action.id.split('~')[0]}~${(P.counter++).toString(36)}`}));
  });
  P.failed = [];
  say('Sending again…', 'info');
  send();
}

function typing(event) {
  const target = event.composedPath()[0];
  return target && target.tagName && (/^(TEXTAREA|SELECT)$/.test(target.tagName) || target.isContentEditable ||
         (target.tagName === 'INPUT' && !/^(radio|checkbox|button)$/.test(target.type)));
}

function onKey(event) {
  if (!P.root || !P.root.isConnected || !P.data || !['grade', 'review'].includes(P.data.mode)) return;
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const key = event.key, target = event.composedPath()[0];
  const inNote = target && target.classList && target.classList.contains('note');
  if (inNote) {
    if (key === 'Enter') { event.preventDefault(); skip(true); }
    else if (key === 'Escape') { event.preventDefault(); target.blur(); }
    return;
  }
  if (typing(event) || dialogOpen()) return;  // the sidebar's fields keep their keys
  const help = $('.help');
  if (help && !help.hidden) {
    if (key === '?' || key === 'Escape') { event.preventDefault(); help.hidden = true; }
    return;
  }
  const ours = /^[0-3]$/.test(key) || ['Enter', 'Backspace', 'ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight',
                                      'Tab', '?', 's', 'S', 'f', 'F', 'r', 'R', 'Escape'].includes(key);
  if (!ours) return;
  event.preventDefault();
  if (['Enter', 's', 'S'].includes(key)) paced(performance.now());
  else if (/^[0-3]$/.test(key)) firstKeys(performance.now());
  if ((!P.current || P.waiting.length) && !['?', 'r', 'R'].includes(key)) {
    P.waiting.push({key, shift: event.shiftKey});  // between queries: the key goes to the next query shown
    return;
  }
  handle(key, event.shiftKey);
}

function dialogOpen() {  // a dialog the judge sees (Streamlit's connection error is hidden: the panel says it)
  const dialog = document.querySelector('[role="dialog"]');
  return !!dialog && (!dialog.checkVisibility || dialog.checkVisibility());
}

function drain() {
  // The keys typed while no query was on screen, in order, on the queries shown now. A waiting Enter
  // shows the next query (leave -> showNext, which does not drain again: this loop goes on), or none:
  // then the keys after it wait, in order, for the next query the server sends.
  if (P.draining) return;
  P.draining = true;
  try {
    while (P.current && P.waiting.length) {
      const k = P.waiting.shift();
      handle(k.key, k.shift);
    }
  } finally {
    P.draining = false;
  }
}

function openHelp() {
  const help = $('.help');
  help.hidden = false;
  help.scrollIntoView({block: 'nearest'});
}

function handle(key, shift) {
  if (key === '?') { openHelp(); return; }
  if (key === 'r' || key === 'R') { retry(); return; }
  if (!P.current) return;
  activity();
  if (/^[0-3]$/.test(key)) grade(Number(key));
  else if (key === 'Enter') submit();
  else if (key === 'Backspace') unGrade();
  else if (key === 'ArrowDown' || (key === 'Tab' && !shift)) move(1);
  else if (key === 'ArrowUp' || (key === 'Tab' && shift)) move(-1);
  else if (key === 'ArrowRight') nudge(1);
  else if (key === 'ArrowLeft') nudge(-1);
  else if (P.data.mode === 'review' && key === 'Escape') { act('back', {}); leave(); }
  else if (P.data.mode === 'grade' && (key === 's' || key === 'S')) skip(false);
  else if (P.data.mode === 'grade' && (key === 'f' || key === 'F')) { $('.note').focus(); say('Say what is wrong with the query, then press Enter to flag and skip it (Esc: back to grading).', 'info'); }
}

if (!window.qcatPanelKeys) {  // one listener for the page's life; it acts on the panel mounted now
  window.qcatPanelKeys = true;
  document.addEventListener('keydown', (event) => onKey(event), true);
  for (const type of ['pointerdown', 'wheel', 'scroll']) document.addEventListener(type, () => activity(), {capture: true, passive: true});
  setInterval(() => {  // at least once: the server stores an action once, however often it hears of it
    // (a message unanswered for RESEND_MS, lost in a restart, goes again with what is held now);
    // and while the store is down, ask again now and then, so that the panel learns when it is back
    const since = performance.now() - (P.sentAt || 0);
    const due = ((P.outbox.length || P.failed.length || P.sendPending || P.sentTimes.size || (P.data && P.data.store_down)) && since > RESEND_MS)
      || (P.data && P.data.mode === 'done' && since > DONE_ASK_MS);
    if (P.root && P.root.isConnected && due) send();
    if (P.root && P.root.isConnected) drawConnection();
  }, 1000);
}

// ---- drawing
function cardHtml(item, names) {
  const title = item.link ? `<a href="${item.link}" target="_blank" rel="noopener noreferrer" tabindex="-1">${item.title}</a>` : item.title;
  const picture = item.image ? `<img class="thumb" src="${item.image}" alt="" loading="lazy">` : '';
  const chips = item.slot === undefined ? `<p class="same">Same listing as Group A result ${item.same_as}: graded there, the grade counts for both groups.</p>`
    : `<div class="grades" role="radiogroup" aria-label="Grade for result ${item.position}">${names.map((name, g) =>
        `<button type="button" tabindex="-1" role="radio" class="chip" data-slot="${item.slot}" data-grade="${g}">${g} ${name}</button>`).join('')}</div>`;
  return `<div class="card"${item.slot === undefined ? '' : ` data-slot="${item.slot}"`}>${picture}<p><strong>${item.position}. ${title}</strong>`
    + (item.facts ? `<br>${item.facts}` : '') + `<br><span class="muted">${item.category} · ${item.listing}</span></p>${chips}</div>`;
}

// A category of a category session: its full path, the leaf in bold (the path is escaped by the server).
function categoryHtml(item, names) {
  const parts = item.title.split(' &gt; ');
  const path = parts.slice(0, -1).map((p) => `${p} › `).join('') + `<strong>${parts[parts.length - 1]}</strong>`;
  return `<div class="card category" data-slot="${item.slot}"><p>${item.position}. ${path}</p>`
    + `<div class="grades" role="radiogroup" aria-label="Grade for category ${item.position}">${names.map((name, g) =>
        `<button type="button" tabindex="-1" role="radio" class="chip" data-slot="${item.slot}" data-grade="${g}">${g} ${name}</button>`).join('')}</div></div>`;
}

function groupHtml(name, items, names) {
  return `<section class="group"><h3>${name}</h3>${items.length ? items.map((item) => cardHtml(item, names)).join('') : '<p class="muted">This search returned nothing.</p>'}</section>`;
}

function groupsHtml(s) {
  const names = s.grade_names || NAMES;
  if (s.kind === 'categories') {
    return `<div class="categories"><section class="group"><h3>Categories proposed for this query</h3>${s.left.map((item) => categoryHtml(item, names)).join('')}</section></div>`;
  }
  return `<div class="groups">${groupHtml('Group A', s.left, names)}${groupHtml('Group B', s.right, names)}</div>`;
}

function drawQuery() {
  const s = P.current, review = P.data.mode === 'review';
  const body = $('.body');
  if (!s) {
    body.innerHTML = P.data.mode === 'done'
      ? '<p class="all-done">All done: no query in this session needs your judgment right now. Thank you! (Should one come back to the queue, it shows here.)</p>'
      : '<p class="loading">Loading the next query…</p>';
    $('.actions').hidden = true;
    return;
  }
  body.innerHTML = `<h2 class="query">Query: ${s.text}</h2>` + (review ? '<p class="note-line">You submitted this query already: change any grade, then press Enter to save (Esc: back to grading). Every version is kept; the results use the latest.</p>' : '')
    + groupsHtml(s);
  $('.actions').hidden = false;
  $('.submit').textContent = review ? 'Save changes (Enter)' : 'Submit grades (Enter)';
  for (const node of $$('.grade-only')) node.hidden = review;
  const note = $('.note');
  note.value = draft(s).note || '';
  for (let node = P.root.host || P.root; node; node = node.parentElement || (node.getRootNode && node.getRootNode().host)) {
    if (node.scrollTop) node.scrollTop = 0;
  }
  window.scrollTo(0, 0);
  drawGrades(false);
}

function drawGrades(scroll) {
  if (!P.current) return;
  const d = draft(P.current), n = slots().length;
  for (const chip of $$('.chip')) {
    const picked = d.grades[Number(chip.dataset.slot)] === Number(chip.dataset.grade);
    chip.classList.toggle('picked', picked);
    chip.setAttribute('aria-checked', picked ? 'true' : 'false');
  }
  for (const card of $$('.card[data-slot]')) card.classList.toggle('focus', Number(card.dataset.slot) === P.focus);
  $('.submit').classList.toggle('focus', P.focus >= n);
  const left = d.grades.filter((g) => g === null).length;
  $('.count').textContent = left ? `${left} of ${n} to grade` : 'all graded: Enter submits';
  if (!left && P.messages.some((m) => m.kind === 'incomplete')) { P.messages = []; drawMessages(); }
  if (scroll) {
    const target = P.focus < n ? $(`.card[data-slot="${P.focus}"]`) : null;
    if (target) target.scrollIntoView({block: 'nearest'});
  }
}

function drawMessages() {
  // One line, in a place of its own that never moves the listings: the store's trouble if any, else
  // the latest message (the full text on hover, should a narrow window cut it).
  const box = $('.messages'), m = P.messages[P.messages.length - 1];
  if (P.offline) {
    const kept = P.outbox.length + P.failed.length;
    const text = 'The app is restarting or the connection dropped: your grades are kept in this window'
      + (kept ? ` (${kept} quer${kept === 1 ? 'y' : 'ies'} waiting to be sent)` : '') + ' and go to the server when it is back. Go on grading.';
    box.innerHTML = `<p class="msg warn" role="status"><span class="text">${text}</span></p>`;
    box.title = text;
  } else if (P.failed.length) {
    const n = P.failed.length;
    const text = `Not saved yet: the store cannot be reached. ${n} quer${n === 1 ? 'y is' : 'ies are'} kept here with `
      + `${n === 1 ? 'its' : 'their'} grades, sent again when it is back.`;
    box.innerHTML = `<p class="msg error" role="alert"><span class="text">${text}</span>`
      + '<button type="button" class="retry" tabindex="-1">Retry now (R)</button></p>';
    box.title = text;
  } else if (P.data.store_down) {
    box.innerHTML = `<p class="msg error" role="alert"><span class="text">${esc(P.data.store_down)}</span></p>`;
    box.title = P.data.store_down;
  } else {
    box.innerHTML = m ? `<p class="msg ${m.tone}"><span class="text">${esc(m.text)}</span></p>` : '';
    box.title = m ? m.text : '';
  }
  const button = $('.retry');
  if (button) button.onclick = retry;
}

function drawConnection() {
  // While the app restarts (or the connection drops), the panel says in its message line, in place of
  // Streamlit's "Connection error" box (hidden by panel.py's page style), that nothing typed is lost.
  const lost = !!document.querySelector('[data-testid="stConnectionStatus"]');
  if (lost !== !!P.offline || (lost && P.offlineKept !== P.outbox.length + P.failed.length)) {
    P.offline = lost;
    P.offlineKept = P.outbox.length + P.failed.length;
    drawMessages();
  }
}

function drawHeader() {
  if (P.data.progress) P.progress = P.data.progress;  // the last counts known stay while the store is down
  const p = P.progress;
  $('.session').textContent = P.data.session ? `Session: ${P.data.session}` : '';
  $('.progress').textContent = p ? `You: ${p.judged} judged, ${p.skipped} skipped · session: ${p.done} of ${p.needed} judgments, ${p.complete} of ${p.queries} queries complete` : '';
  $('.help-text').innerHTML = P.data.guidelines_html || '';
}

function showNext() {
  const id = P.order.find((q) => !P.finishedHere.has(q));
  P.current = id === undefined ? null : P.screens.get(id);
  P.focus = 0;
  if (!P.current && P.pressedAt !== undefined && P.data.mode === 'grade' && !P.dry) P.loadingShown += 1;
  P.dry = !P.current;
  P.messages = P.messages.filter((m) => m.kind !== 'incomplete');
  if (P.current) {
    const d = draft(P.current);
    P.focus = Math.max(0, d.grades.findIndex((g) => g === null));
    if (d.grades.every((g) => g !== null)) P.focus = d.grades.length;
    P.timer = {id: P.current.id, last: performance.now(), active: 0};
    if (P.lastDoneAt === undefined) P.lastDoneAt = performance.now();  // the judge's pace counts from the first query
  }
  drawQuery();
  if (P.current && P.pressedAt !== undefined) {
    const started = P.pressedAt;
    P.pressedAt = undefined;
    requestAnimationFrame(() => P.transitions.push({query: P.current ? P.current.id : null, ms: performance.now() - started}));
  }
  drain();
}

// ---- what the server sent
function receive(data, redraw) {
  const fresh = P.epoch !== data.epoch;
  P.data = data;
  if (fresh) {  // a new panel: sign-in, another session, review mode in or out
    P.epoch = data.epoch;
    P.screens = new Map(); P.order = []; P.current = null; P.finishedHere = new Set(); P.waiting = [];
    if (P.judge !== data.judge) {  // another judge in this tab: the last one's actions stay in the tab, under their name
      P.judge = data.judge;
      P.outbox = []; P.failed = []; P.drafts = new Map(); P.messages = [];
      try {  // actions of this judge's tab before a reload, not yet answered (or kept for R)
        P.outbox = JSON.parse((store() && store().getItem(outboxKey())) || '[]');
        P.failed = JSON.parse((store() && store().getItem(failedKey())) || '[]');
      } catch (e) { P.outbox = []; P.failed = []; }
    }
    // a query whose action is still on its way is finished here: never shown blank again
    for (const action of P.outbox.concat(P.failed)) if (action.kind !== 'back') P.finishedHere.add(action.query);
    if (P.outbox.length) send();
  }
  if (Number.isInteger(data.heard)) heard(data);
  const answers = data.answers || {};
  const answered = P.outbox.filter((a) => answers[a.id]);
  if (answered.length) {
    P.outbox = P.outbox.filter((a) => !answers[a.id]);
    let told = null;  // of several answers at once, the last warning, else the last one
    for (const action of answered) {
      const answer = answers[action.id];
      if (answer.status === 'store_down') { P.failed.push(action); continue; }
      if (answer.status === 'back') continue;
      const tone = ['saved', 'skipped', 'changed'].includes(answer.status) ? 'ok' : 'warn';
      if (!told || tone === 'warn' || told.tone !== 'warn') told = {text: answer.message, tone};
    }
    if (told) say(told.text, told.tone);
    keepOutbox();
  }
  if (!P.failed.length && !data.store_down && answered.length === 0 && fresh) P.messages = data.notice ? [{text: data.notice, tone: 'ok'}] : [];
  // An answer to no message of this panel (the first run of a Streamlit session: a page load, or the
  // reconnect after an app restart) was picked knowing nothing of what the panel holds: after a restart
  // it could give this window the queries another window of the judge shows. A panel that holds
  // queries keeps them and tells the server at once (the server records what a window holds only from
  // its messages); a new one takes the queue and says so at once too.
  const unasked = !Number.isInteger(data.heard), keepHeld = unasked && !fresh && P.order.length > 0;
  // An answer to no message comes from a server that has heard none of ours (a first run, or a new
  // server after a restart): a message still waiting for its answer was lost on the way and never
  // will be answered. Waiting for it kept the hello below from going, and the server never learned
  // what this window holds.
  if (unasked) P.sentTimes.clear();
  // A query the panel holds already comes as its id alone.
  const queue = keepHeld ? [] : (data.queue || []).filter((s) => !P.finishedHere.has(s.id) && (s.slots || P.screens.has(s.id)));
  for (const s of queue) {
    if (!s.slots) continue;
    s.plain = new DOMParser().parseFromString(s.text, 'text/html').documentElement.textContent;
    P.screens.set(s.id, s);
  }
  const ids = keepHeld ? P.order.filter((id) => !P.finishedHere.has(id)) : queue.map((s) => s.id);
  const listed = new Set((data.queue || []).map((s) => s.id));
  if (!keepHeld) P.finishedHere = new Set([...P.finishedHere].filter((id) => listed.has(id) || P.outbox.some((a) => a.query === id)));
  // The answer was built on the holding list of the message it answers (data.heard), with the query
  // on screen then first. If the judge has moved on since, the query on screen now was only held
  // ahead in that list: its absence says nothing (the server passes over a query held ahead whose
  // claim others took; an older server trimmed the list to the number wanted). It stays, and the
  // next message, with it first, settles it; only an answer to a message sent while it was on
  // screen takes it away (graded or skipped in another window, or taken by another judge).
  const shown = P.current, basis = Number.isInteger(data.heard) ? P.sentOnScreen.get(data.heard) : undefined;
  if (Number.isInteger(data.heard)) for (const n of [...P.sentOnScreen.keys()]) if (n < data.heard) P.sentOnScreen.delete(n);
  const stale = shown && !ids.includes(shown.id) && !fresh && basis !== undefined && basis !== shown.id;
  if (stale) ids.unshift(shown.id);
  if (shown && !ids.includes(shown.id) && !data.store_down) {
    say(`“${shown.plain}” was already graded or skipped in another window, or taken by another judge after a long pause: nothing was changed. Here is your next query.`, 'warn');
    forget(shown.id);
    const note = $('.note');
    if (note && P.root.getRootNode().activeElement === note) note.blur();
  }
  P.order = ids;
  drawHeader();
  if (!shown || !ids.includes(shown.id)) showNext();
  else if (redraw) drawQuery();
  else drawGrades(false);
  if (data.open_guidelines && fresh) openHelp();
  drawMessages();
  drawConnection();
  if (P.failed.length && !data.store_down && performance.now() - (P.retriedAt || 0) > RESEND_MS) retry();  // the store is back
  else if (unasked && P.data.mode === 'grade' && !P.sentTimes.size) send(true);  // what is held, told
  else if ((P.sendPending || stale) && !P.sentTimes.size) send();  // what waited for this answer; a kept query settled
  else refill(data);
}

function refill(data) {
  // Fewer queries held than the judge gets through while a message goes to the server and back:
  // ask for more now, not at the next Enter. Only once every message has its answer, and only while
  // the server gave as many as it was asked for (else it has no more for this judge).
  if (P.data.mode !== 'grade' || data.store_down || P.sentTimes.size || P.failed.length) return;
  if (P.order.length < holdWanted() - 1 && (data.queue || []).length >= (data.hold || Infinity)) send();
}

export default function (component) {
  const {parentElement, data, setStateValue} = component;
  const root = parentElement.querySelector('.qcat-panel');
  const remounted = P.root !== root;  // a new element (an app restart, a page rerun): draw it all again
  P.root = root;
  P.setState = setStateValue;
  if (!P.root.dataset.wired) {
    P.root.dataset.wired = '1';
    P.root.addEventListener('click', (event) => {
      const target = event.target.closest('button');
      if (!target || !P.current && !target.classList.contains('close-help')) return;
      activity();
      if (['submit', 'skip', 'back'].some((name) => target.classList.contains(name))) paced(performance.now());
      if (target.classList.contains('chip')) { P.focus = Number(target.dataset.slot); grade(Number(target.dataset.grade)); }
      else if (target.classList.contains('submit')) submit();
      else if (target.classList.contains('skip')) skip(false);
      else if (target.classList.contains('flag')) skip(true);
      else if (target.classList.contains('open-help')) openHelp();
      else if (target.classList.contains('close-help')) $('.help').hidden = true;
      else if (target.classList.contains('back')) { act('back', {}); leave(); }
    });
    P.root.addEventListener('input', (event) => {
      if (event.target.classList.contains('note') && P.current) { draft(P.current).note = event.target.value; keepDraft(); }
    });
  }
  receive(data, remounted);
  const mine = P.root;
  return () => { if (P.root === mine) P.root = null; };  // a remount may have run before this cleanup
}
