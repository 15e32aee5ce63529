"""Judges without browsers: each speaks the grading panel's own protocol to a real `qcat judge app`.

The panel (judging_app/pages/panel*.js) is a Streamlit custom component; it talks to the server
through Streamlit's WebSocket, ``/_stcore/stream``, in protobuf messages from ``streamlit.proto``.
A protocol judge opens that WebSocket and sends what the browser sends:

* ``BackMsg.rerun_script`` (a ``ClientState``) with no widget state: the page load. The server
  answers with ``ForwardMsg``s: ``new_session`` (the page's script hash), ``delta``s (the sign-in
  form: a ``text_input`` and a form-submit ``button``, each with its widget id) and
  ``script_finished``.
* The sign-in: a ``rerun_script`` whose ``widget_states`` hold the token (``string_value`` of the
  text input) and ``trigger_value`` true for the submit button, as a form submit sends them.
* Each panel message: ``setStateValue('outbox', …)`` of panel_outbox.js's ``send`` is a
  ``rerun_script`` of the grading fragment (``fragment_id`` as the panel's delta carries it) whose
  ``widget_states`` hold the component's whole state as ``json_value``:
  ``{"outbox": {"actions": [...], "send": n, "holding": [query ids, the one on screen first],
  "want": k}}``. An Enter adds ``{"id", "kind": "submit", "query", "text", "grades": [[listing,
  side, 0-3], ...], "note": null, "seconds"}`` to the actions (panel_keys.js ``submit``).
* The answer is the panel's ``bidi_component`` delta, its ``json`` the panel's data: ``queue`` (the
  queries held, one already held sent as its id alone), ``answers`` (by action id), ``heard`` (the
  message answered), ``hold``/``hold_range``, ``mode``. A cacheable message the client said it
  holds (``cached_message_hashes``) comes as ``ref_hash``.
* The sidebar's "Your judgments" fragment asks for an ``auto_rerun`` every 15 s: sent, as the
  browser sends it (``is_auto_rerun``, that ``fragment_id``, every widget state).

What to send and when is the panel's own logic, :class:`judging_panel.Panel` (panel_desk.js,
panel_outbox.js). These messages were checked against those a real Chromium sends through the
panel. Not sent: the page's HTTP requests (HTML, scripts, /_stcore/health, host-config), static
and once a page.

A judge grades at ``pace`` queries a minute: the moment a query is on screen they read it (the
time a query takes, less their keys), type a grade per listing ``key_s`` apart, then Enter; they
never type ahead of a query they cannot see. ``loading_shown`` and ``transitions`` are the panel's
(:mod:`judging_panel`): an Enter after which no query was held ready, and the seconds from each
Enter to the next query held.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import time
from pathlib import Path

import websockets
from judging_panel import Panel
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

SETTLE_S = 60.0  # after the window, how long a judge waits for the answers to their last actions


class Judge:
    """One judge: a WebSocket of their own to the app, the panel's logic, a judge's rhythm."""

    def __init__(self, port: int, token: str, pace: float, key_s: float, seed: int) -> None:
        self.port, self.token, self.pace, self.key_s, self.seed = port, token, pace, key_s, seed
        self.rng = random.Random(seed)
        self.panel = Panel()
        self.widgets: dict[str, tuple[str, object]] = {}  # widget id -> (WidgetState field, value), as sent
        self.page_hash = ""
        self.cache: dict[str, tuple[int, ForwardMsg]] = {}  # hash -> (script runs then, message): the browser's cache
        self.runs = 0
        self.sign_in_form: dict[str, str] = {}
        self.panel_id = self.panel_fragment = ""
        self.autos: dict[str, asyncio.Task] = {}
        self.changed = asyncio.Event()
        self.typed: dict[int, dict[tuple[str, str], int]] = {}
        self.seconds = 0.0
        self.auto_reruns = 0

    async def open(self) -> None:
        self.ws = await websockets.connect(f"ws://127.0.0.1:{self.port}/_stcore/stream", subprotocols=["streamlit"],
                                           max_size=None)
        self.tasks = [asyncio.create_task(self.read()), asyncio.create_task(self.ticks())]
        self.tasks[0].add_done_callback(lambda _: self.changed.set())  # a judge waiting hears of it at once

    async def close(self) -> None:
        for task in [*self.tasks, *self.autos.values()]:
            task.cancel()
        await self.ws.close()

    async def rerun(self, fragment: str = "", auto: bool = False) -> None:
        """``BackMsg.rerun_script``, as the browser's sendRerunBackMsg sends it: every widget state."""
        back = BackMsg()
        state = back.rerun_script
        state.page_script_hash, state.fragment_id, state.is_auto_rerun = self.page_hash, fragment, auto
        state.cached_message_hashes.extend(self.cache)
        context = state.context_info
        context.timezone, context.timezone_offset, context.locale = "UTC", 0, "en-US"
        context.url, context.is_embedded, context.color_scheme = f"http://127.0.0.1:{self.port}/", False, "light"
        for widget_id, (field, value) in self.widgets.items():
            widget = state.widget_states.widgets.add()
            widget.id = widget_id
            setattr(widget, field, value)
        self.widgets = {k: v for k, v in self.widgets.items() if v[0] != "trigger_value"}  # a trigger goes once
        await self.ws.send(back.SerializeToString())

    async def flush(self) -> None:
        """What the panel sends: setStateValue('outbox', value), a rerun of the panel's fragment."""
        while self.panel.outgoing:
            self.widgets[self.panel_id] = ("json_value", json.dumps({"outbox": self.panel.outgoing.pop(0)}))
            await self.rerun(self.panel_fragment)

    async def read(self) -> None:
        async for raw in self.ws:
            message = ForwardMsg()
            message.ParseFromString(raw)
            kind = message.WhichOneof("type")
            if kind == "ref_hash":  # a message the browser said it holds
                message = self.cache[message.ref_hash][1]
                kind = message.WhichOneof("type")
            if message.metadata.cacheable:
                self.cache[message.hash] = (self.runs, message)
            if kind == "new_session":
                self.page_hash = message.new_session.page_script_hash
            elif kind == "script_finished":  # the cache keeps what the last 2 runs used (maxCachedMessageAge)
                self.runs += 1
                self.cache = {h: (run, m) for h, (run, m) in self.cache.items() if self.runs - run <= 2}
            elif kind == "auto_rerun" and message.auto_rerun.fragment_id not in self.autos:
                fragment, every = message.auto_rerun.fragment_id, message.auto_rerun.interval
                self.autos[fragment] = asyncio.create_task(self.auto_rerun(fragment, every))
            elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                self.element(message.delta.new_element, message.delta.fragment_id)
            await self.flush()
            self.changed.set()

    def element(self, element, fragment: str) -> None:
        kind = element.WhichOneof("type")
        if kind == "text_input":
            self.sign_in_form["token"] = element.text_input.id
        elif kind == "button" and element.button.is_form_submitter:
            self.sign_in_form["submit"] = element.button.id
        elif kind == "bidi_component":
            for widget_id in self.sign_in_form.values():  # the sign-in form is gone from the page
                self.widgets.pop(widget_id, None)
            self.panel_id, self.panel_fragment = element.bidi_component.id, fragment
            self.panel.receive(json.loads(element.bidi_component.json))

    async def auto_rerun(self, fragment: str, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            await self.rerun(fragment, auto=True)
            self.auto_reruns += 1

    async def ticks(self) -> None:
        while True:
            await asyncio.sleep(1)
            if self.panel_id:
                self.panel.tick()
                await self.flush()

    async def until(self, done, seconds: float) -> bool:
        deadline = time.perf_counter() + seconds
        while not done():
            if self.tasks[0].done():  # the connection closed, or what the server sent could not be read
                self.tasks[0].result()
                raise RuntimeError(f"judge {self.seed}: the app closed the connection")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), max(0.0, deadline - time.perf_counter()))
            except TimeoutError:
                return done()
        return True

    async def sign_in(self) -> None:
        await self.rerun()  # the page load
        if not await self.until(lambda: len(self.sign_in_form) == 2, 120):
            raise RuntimeError("no sign-in form")
        self.widgets = {self.sign_in_form["token"]: ("string_value", self.token),
                        self.sign_in_form["submit"]: ("trigger_value", True)}
        await self.rerun()
        if not await self.until(lambda: self.panel.current is not None, 300):
            raise RuntimeError(f"judge {self.seed}: no query after signing in ({self.panel.data.get('mode')})")

    async def grade(self, end: float) -> None:
        """Until ``end``: read the query on screen, type its grades, Enter; the first read is cut at
        random, so that the judges do not all press Enter together."""
        period, began = 60 / self.pace, time.perf_counter()
        while await self.until(lambda: self.panel.current is not None, end - time.perf_counter()):
            screen = self.panel.current
            keys = len(screen["slots"]) + 1
            think = self.rng.uniform(0, period) if not self.typed else max(0.0, period - keys * self.key_s)
            if time.perf_counter() + think + keys * self.key_s > end:
                break
            shown_at = time.perf_counter()
            await asyncio.sleep(think)
            q = len(self.typed)
            digits = [(self.seed + q + i * (1 + q % 3)) % 4 for i in range(len(screen["slots"]))]
            for _ in digits:
                self.panel.key(time.perf_counter())
                await self.flush()
                await asyncio.sleep(self.key_s)
            if self.panel.current is not screen:  # taken away while the judge typed
                continue
            self.typed[screen["id"]] = {(s["listing"], s["side"]): d for s, d in zip(screen["slots"], digits)}
            self.panel.submit(digits, time.perf_counter() - shown_at)
            await self.flush()
            await asyncio.sleep(self.key_s)
        self.seconds = time.perf_counter() - began

    def settled(self) -> bool:
        return not (self.panel.outbox or self.panel.failed or self.panel.sent_times or self.panel.send_pending)

    def result(self) -> dict:
        p = self.panel
        return {"typed": self.typed, "seconds": self.seconds, "transitions": p.transitions,
                "loading_shown": p.loading_shown, "statuses": p.statuses, "settled": self.settled(),
                "ran_out": p.data.get("mode") == "done", "panel_messages": p.sends, "auto_reruns": self.auto_reruns,
                "round_trips": p.round_trips}


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process under it (``qcat judge app`` runs the Streamlit server as a child)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            pending += [int(child) for child in task.read_text().split()]
    return found


def cpu_seconds(pids: list[int], reaped: bool = False) -> float:
    """utime + stime of the processes (/proc/PID/stat), with ``reaped`` that of their children gone."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone since
            continue
        total += sum(int(f) for f in fields[11:15 if reaped else 13])
    return total / CLOCK_TICKS


def peak_memory_mb(pids: list[int]) -> float:
    """The largest peak resident size (VmHWM) among the processes."""
    peaks = [0]
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(int(line.split()[1]))
    return round(max(peaks) / 1024, 1)


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


def store_cpu_seconds(postmaster: int | None) -> float | None:
    """A PostgreSQL server's CPU: the postmaster with its live and reaped backends."""
    if postmaster is None:
        return None
    return cpu_seconds([postmaster], reaped=True) + cpu_seconds(process_tree(postmaster)[1:])


async def _drive(port: int, tokens: list[str], pace: float, minutes: float, key_s: float, app_pid: int,
                 postmaster: int | None) -> tuple[list[Judge], dict]:
    judges = [Judge(port, token, pace, key_s, i) for i, token in enumerate(tokens)]
    try:
        for judge in judges:
            await judge.open()
        await asyncio.gather(*(judge.sign_in() for judge in judges))
        server = process_tree(app_pid)
        before = (cpu_seconds(server), own_cpu_seconds(), store_cpu_seconds(postmaster), time.perf_counter())
        await asyncio.gather(*(judge.grade(before[3] + minutes * 60) for judge in judges))
        await asyncio.gather(*(judge.until(judge.settled, SETTLE_S) for judge in judges))
        after = (cpu_seconds(server), own_cpu_seconds(), store_cpu_seconds(postmaster), time.perf_counter())
        usage = {"server_cpu_s": after[0] - before[0], "driver_cpu_s": after[1] - before[1],
                 "store_server_cpu_s": None if postmaster is None else after[2] - before[2],
                 "window_s": after[3] - before[3], "server_peak_memory_mb": peak_memory_mb(server)}
    finally:
        for judge in judges:
            if hasattr(judge, "ws"):
                await judge.close()
    return judges, usage


def drive(port: int, tokens: list[str], pace: float, minutes: float, key_s: float, app_pid: int,
          postmaster: int | None = None) -> tuple[list[dict], dict]:
    """Every judge signs in, then all grade for ``minutes`` (the grading window: from the moment all
    are signed in until the last answer to their last action, at most :data:`SETTLE_S` after the
    minutes), each at ``pace`` queries a minute with keys ``key_s`` apart. What each judge typed
    and met (:meth:`Judge.result`), and the window's use: the app's CPU seconds (its process tree's
    utime + stime from /proc), its peak memory (VmHWM), this driver's own CPU seconds (getrusage)
    and, given its postmaster's pid, a PostgreSQL server's."""
    judges, usage = asyncio.run(_drive(port, tokens, pace, minutes, key_s, app_pid, postmaster))
    return [judge.result() for judge in judges], usage
