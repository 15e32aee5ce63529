// Drawing: the query on screen with its blind groups (cards, a category session's categories), the
// grades picked, the header (session, progress, guidelines) and the guidelines opened.

import {P, $, $$, draft, slots} from './panel_state.js';
import {drawMessages} from './panel_messages.js';

const NAMES = ['Off-topic', 'Acceptable', 'Good', 'Excellent'];

// A listing's card is never higher than three lines of text and its grades, whatever its texts: the
// title on two lines at most, then the brand, price, category and listing on the lines left (two beside
// a one-line title, else one; fitTitles), each cut short with an ellipsis where it does not fit, the
// whole text on hover. So Group A's first five cards sit above the actions at 1280x800 (panel.css), long
// titles and brands included. The texts come escaped.
function cardHtml(item, names) {
  const title = item.link ? `<a href="${item.link}" target="_blank" rel="noopener noreferrer" tabindex="-1">${item.title}</a>` : item.title;
  const picture = item.image ? `<img class="thumb" src="${item.image}" alt="" loading="lazy">` : '';
  const chips = item.slot === undefined ? `<p class="same">Same listing as Group A result ${item.same_as}: graded there, the grade counts for both groups.</p>`
    : `<div class="grades" role="radiogroup" aria-label="Grade for result ${item.position}">${names.map((name, g) =>
        `<button type="button" tabindex="-1" role="radio" class="chip" data-slot="${item.slot}" data-grade="${g}">${g} ${name}</button>`).join('')}</div>`;
  const where = `${item.category} · ${item.listing}`, about = item.facts ? `${item.facts} · ${where}` : where;
  return `<div class="card"${item.slot === undefined ? '' : ` data-slot="${item.slot}"`}>${picture}`
    + `<p class="title" title="${item.title}"><strong>${item.position}. ${title}</strong></p>`
    + `<p class="about" title="${about}">${item.facts ? `${item.facts} · ` : ''}<span class="muted">${where}</span></p>${chips}</div>`;
}

// A category of a category session: its full path, the leaf in bold (the path is escaped by the server).
function categoryHtml(item, names) {
  const parts = item.title.split(' &gt; ');
  const path = parts.slice(0, -1).map((p) => `${p} › `).join('') + `<strong>${parts[parts.length - 1]}</strong>`;
  return `<div class="card category" data-slot="${item.slot}"><p>${item.position}. ${path}</p>`
    + `<div class="grades" role="radiogroup" aria-label="Grade for category ${item.position}">${names.map((name, g) =>
        `<button type="button" tabindex="-1" role="radio" class="chip" data-slot="${item.slot}" data-grade="${g}">${g} ${name}</button>`).join('')}</div></div>`;
}

// A card whose title takes one line gives its third line to the rest (class short-title, panel.css):
// measured once drawn, and again whenever a title's box changes (the window's width, a font loaded).
const titles = new ResizeObserver((entries) => {
  for (const {target} of entries) {
    target.parentElement.classList.toggle('short-title', target.firstElementChild.getClientRects().length <= 1);
  }
});

function fitTitles() {
  titles.disconnect();
  for (const title of $$('.card p.title')) titles.observe(title);
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

export function drawQuery() {
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
  fitTitles();
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

export function drawGrades(scroll) {
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

export function drawHeader() {
  if (P.data.progress) P.progress = P.data.progress;  // the last counts known stay while the store is down
  const p = P.progress;
  $('.session').textContent = P.data.session ? `Session: ${P.data.session}` : '';
  $('.progress').textContent = p ? `You: ${p.judged} judged, ${p.skipped} skipped · session: ${p.done} of ${p.needed} judgments, ${p.complete} of ${p.queries} queries complete` : '';
  $('.help-text').innerHTML = P.data.guidelines_html || '';
}

export function openHelp() {
  const help = $('.help');
  help.hidden = false;
  help.scrollIntoView({block: 'nearest'});
}
