// The keys: every key is handled at once against the query on screen; keys typed while none is wait,
// in order, for the next one shown (P.waiting, drained when the desk shows it). Also the time at work
// on the query on screen, which keys and clicks keep counting.

import {P, $, draft, keepDraft, slots} from './panel_state.js';
import {act, firstKeys, paced} from './panel_outbox.js';
import {retry, say} from './panel_messages.js';
import {drawGrades, openHelp} from './panel_drawing.js';
import {leave, onShown} from './panel_desk.js';

// ---- time at work on the query on screen: gaps of inactivity count at most the idle cap
export function activity() {
  if (!P.timer) return;
  const now = performance.now();
  P.timer.active += Math.min(now - P.timer.last, P.data.idle_cap * 1000);
  P.timer.last = now;
}

// ---- keys
export function grade(digit) {
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

export function submit() {
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

export function skip(flagged) {
  const note = ($('.note') && $('.note').value.trim()) || '';
  if (flagged && !note) {
    say('Write in the note field what is wrong with the query, then press Enter (or Flag & skip) again.', 'warn');
    $('.note').focus();
    return;
  }
  act(flagged ? 'flag' : 'skip', {note: note || null});
  leave();
}

function typing(event) {
  const target = event.composedPath()[0];
  return target && target.tagName && (/^(TEXTAREA|SELECT)$/.test(target.tagName) || target.isContentEditable ||
         (target.tagName === 'INPUT' && !/^(radio|checkbox|button)$/.test(target.type)));
}

export function onKey(event) {
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
  const ours = /^[0-3]$/.test(key) || ['Enter', 'Backspace', 'ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight',
                                      'Tab', '?', 's', 'S', 'f', 'F', 'r', 'R', 'Escape'].includes(key);
  const help = $('.help');
  if (help && !help.hidden) {
    if (key === '?' || key === 'Escape') { event.preventDefault(); help.hidden = true; return; }
    // The arrows and Tab scroll the guidelines; any other key of the panel closes them and acts
    // (a judge who starts grading over the first-visit guidelines loses no key).
    if (!ours || /^(Arrow|Tab)/.test(key)) return;
    help.hidden = true;
  }
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

onShown(drain);
