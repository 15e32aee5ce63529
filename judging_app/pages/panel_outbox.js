// Talking to the server: the outbox (the actions it has not answered yet), sent as one message at a
// time and sent again when unanswered (RESEND_MS); how many queries to hold, from the judge's pace
// and the round trips of late.

import {P, store} from './panel_state.js';

export const RESEND_MS = 3000;  // an action unanswered this long is sent again (a message lost in a reconnect)
export const DONE_ASK_MS = 30000;  // with nothing left for the judge: ask again whether a query came back
export const outboxKey = () => `qcat-panel-${P.data.judge}-outbox`;
export const failedKey = () => `qcat-panel-${P.data.judge}-failed`;

export function keepOutbox() {  // in the tab, so that a reload sends them again (or keeps them for R)
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

export function holdWanted() {
  const [least, most] = (P.data && P.data.hold_range) || [1, 1];
  if (!P.paces.length) return least;
  const pace = [...P.paces].sort((a, b) => a - b)[Math.floor(P.paces.length / 2)];
  const trip = P.trips.length ? Math.max(...P.trips) : FIRST_TRIP_MS;
  return Math.max(least, Math.min(most, Math.ceil(2 * trip / Math.max(pace, 1)) + MARGIN));
}

export function send(hello) {
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

export function paced(at) {  // the judge finished a query (Enter, S, a click): their pace, as typed
  if (P.lastDoneAt !== undefined) recent(P.paces, at - P.lastDoneAt, 8);
  P.lastDoneAt = at;
}

export function firstKeys(at) {
  // Before the judge's first query is done, their pace is guessed from their first grade keys (a key
  // per listing and Enter), so that a fast judge's panel asks for more before the first Enter.
  if (P.paces.length || !P.current) return;
  P.keyTimes = (P.keyTimes || []).concat([at]);
  if (P.keyTimes.length !== 3) return;
  const perKey = (P.keyTimes[2] - P.keyTimes[0]) / 2;
  recent(P.paces, perKey * (P.current.slots.length + 1), 8);
  if (P.order.length < holdWanted() - 1) send();  // after the message on its way, if one is (send waits)
}

export function heard(data) {
  // The server's answer to message data.heard (and to those before it): the round trip, measured.
  // A hello (what a new or reconnected panel holds, sent on its first answer) is answered by an idle
  // page's quick run: it says little of the round trips of the judge's actions, so it is not counted.
  const sent = P.sentTimes.get(data.heard);
  if (sent !== undefined && !(P.hellos && P.hellos.has(data.heard))) recent(P.trips, performance.now() - sent, 8);
  for (const n of [...P.sentTimes.keys()]) if (n <= data.heard) P.sentTimes.delete(n);
}

export function act(kind, extra) {
  const screen = P.current;
  const action = Object.assign({id: `${Date.now().toString(36)}-${(P.counter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
                                kind, query: screen.id, text: screen.plain}, extra);
  P.outbox.push(action);
  send();
  return action;
}
