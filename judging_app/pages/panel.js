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
//
// The panel's code is in modules by concern, each imported by those above it (panel.py serves them
// together): panel_state.js (the state, the drafts), panel_outbox.js (talking to the server),
// panel_messages.js (the message line), panel_drawing.js, panel_desk.js (the queries held and the
// server's answers), panel_keys.js; this module wires the page's listeners and mounts the panel.

import {P, $, draft, keepDraft} from './panel_state.js';
import {DONE_ASK_MS, RESEND_MS, act, paced, send} from './panel_outbox.js';
import {drawConnection} from './panel_messages.js';
import {openHelp} from './panel_drawing.js';
import {leave, receive} from './panel_desk.js';
import {activity, grade, onKey, skip, submit} from './panel_keys.js';

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
