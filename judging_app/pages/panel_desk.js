// The desk of held queries: the screens the server sent, the order they are shown in (the one on
// screen first), the next one shown the moment one is done, and the server's answers (receive).

import {P, $, store, forget, draft} from './panel_state.js';
import {RESEND_MS, failedKey, heard, holdWanted, keepOutbox, outboxKey, send} from './panel_outbox.js';
import {drawConnection, drawMessages, retry, say} from './panel_messages.js';
import {drawGrades, drawHeader, drawQuery, openHelp} from './panel_drawing.js';

// What runs once showNext has drawn the next query: the keys typed while none was on screen
// (panel_keys.js, which acts on the desk, hands its drain here).
let afterShown = () => {};
export function onShown(then) { afterShown = then; }

export function leave() {
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

export function showNext() {
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
  afterShown();
}

// ---- what the server sent
export function receive(data, redraw) {
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
