// The panel's one message line: what it says (say), the store's trouble with its Retry (R), which
// sends again what the store could not take, and the line shown while the app restarts.

import {P, $, esc} from './panel_state.js';
import {send} from './panel_outbox.js';

export function say(text, tone, kind) {  // the panel's one message line (a newer message replaces it)
  P.messages = [{text, tone, kind}];
  drawMessages();
}

export function retry() {
  if (!P.failed.length) return;
  P.retriedAt = performance.now();
  P.failed.forEach((action) => {
    P.outbox.push(Object.assign({}, action, {id: `${action.id.split('~')[0]}~${(P.counter++).toString(36)}`}));
  });
  P.failed = [];
  say('Sending again…', 'info');
  send();
}

export function drawMessages() {
  // One line, in a place of its own that never moves the listings: the store's trouble if any, else
  // the latest message (the full text on hover, should a narrow window cut it).
  const box = $('.messages'), m = P.messages[P.messages.length - 1];
  if (P.offline) {
    const kept = P.outbox.length + P.failed.length;
    // short enough for one line in the panel's column at 1280 px beside the sidebar, count included
    const text = 'The app is restarting or the connection dropped: your grades are kept in this window'
      + (kept ? ` (${kept} quer${kept === 1 ? 'y' : 'ies'} to send).` : ' and sent when it is back.') + ' Go on grading.';
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

export function drawConnection() {
  // While the app restarts (or the connection drops), the panel says in its message line, in place of
  // Streamlit's "Connection error" box (hidden by panel.py's page style), that nothing typed is lost.
  const lost = !!document.querySelector('[data-testid="stConnectionStatus"]');
  if (lost !== !!P.offline || (lost && P.offlineKept !== P.outbox.length + P.failed.length)) {
    P.offline = lost;
    P.offlineKept = P.outbox.length + P.failed.length;
    drawMessages();
  }
}
