"""What a reload's 200 means: every worker serves the new bundle.

With one worker, the worker that answers is the only one. With several (pre-forked), the
supervisor makes a :class:`ReloadBoard` before forking: shared memory holding the generation of
the last reload asked for and, per worker slot, the pid, the generation it last loaded, whether
that load was refused, and the bundle hash it serves. ``POST /v1/reload`` asks for a new
generation, reloads its own worker, has the supervisor signal the others (SIGHUP), and waits
until every live slot has loaded that generation; it answers 200 only if all of them serve the
bundle it loaded, and says which worker serves what otherwise.
"""

from __future__ import annotations

import asyncio
import mmap
import multiprocessing
import os
import signal
import struct
import time
from dataclasses import dataclass

OK, REFUSED = 1, 2
_HEADER = struct.Struct("<q")  # the generation last asked for
_SLOT = struct.Struct("<qqq64s")  # pid (0: no worker), generation loaded, OK/REFUSED, bundle hash
WAIT_S = 60.0  # how long a reload waits for the other workers
POLL_S = 0.02


@dataclass(frozen=True)
class WorkerState:
    pid: int
    generation: int
    refused: bool
    bundle_hash: str

    def to_json(self) -> dict:
        return {"pid": self.pid, "bundle_hash": self.bundle_hash, "last_reload": "refused" if self.refused else "ok"}


class ReloadBoard:
    """The shared record of reloads across workers (made by the supervisor, before forking)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._memory = mmap.mmap(-1, _HEADER.size + workers * _SLOT.size)  # MAP_SHARED: forks see one copy
        self._lock = multiprocessing.Lock()

    def ask(self) -> int:
        """A new generation of the bundle to load, for a reload asked over HTTP."""
        with self._lock:
            generation = _HEADER.unpack_from(self._memory, 0)[0] + 1
            _HEADER.pack_into(self._memory, 0, generation)
            return generation

    def asked(self) -> int:
        with self._lock:
            return _HEADER.unpack_from(self._memory, 0)[0]

    def record(self, slot: int, generation: int, refused: bool, bundle_hash: str) -> None:
        with self._lock:
            _SLOT.pack_into(self._memory, _HEADER.size + slot * _SLOT.size, os.getpid(), generation,
                            REFUSED if refused else OK, bundle_hash.encode("ascii"))

    def clear(self, slot: int) -> None:
        """The worker in ``slot`` has ended (the supervisor starts another there)."""
        with self._lock:
            _SLOT.pack_into(self._memory, _HEADER.size + slot * _SLOT.size, 0, 0, 0, b"")

    def states(self) -> list[WorkerState]:
        """The live workers' states, slot by slot."""
        with self._lock:
            slots = [_SLOT.unpack_from(self._memory, _HEADER.size + i * _SLOT.size) for i in range(self.workers)]
        return [WorkerState(pid, generation, state == REFUSED, digest.rstrip(b"\0").decode("ascii"))
                for pid, generation, state, digest in slots if pid]


class SingleWorker:
    """Reloads of a service with one worker: nothing to coordinate."""

    startup_generation = 0

    def __init__(self) -> None:
        self._generation = 0
        self._state: WorkerState | None = None

    def ask(self) -> int:
        self._generation += 1
        return self._generation

    def asked(self) -> int:
        return self._generation

    def record(self, generation: int, refused: bool, bundle_hash: str) -> None:
        self._state = WorkerState(os.getpid(), generation, refused, bundle_hash)

    async def everywhere(self, generation: int) -> tuple[list[WorkerState], bool]:
        return [self._state], True


class PreforkedWorker:
    """Reloads of one of several pre-forked workers (see the module docstring)."""

    def __init__(self, board: ReloadBoard, slot: int, supervisor: int, startup_generation: int) -> None:
        self.board = board
        self.slot = slot
        self.supervisor = supervisor
        # The generation the worker's first bundle was loaded for: 0 at start; a replacement
        # worker's, the one asked for when the supervisor loaded it. (Not the one asked for when
        # the worker comes up: a reload asked for meanwhile is not in its bundle.)
        self.startup_generation = startup_generation

    def ask(self) -> int:
        return self.board.ask()

    def asked(self) -> int:
        return self.board.asked()

    def record(self, generation: int, refused: bool, bundle_hash: str) -> None:
        self.board.record(self.slot, generation, refused, bundle_hash)

    async def everywhere(self, generation: int) -> tuple[list[WorkerState], bool]:
        """Have the other workers load ``generation`` and wait for them: (every live worker's
        state, whether all of them got to it within ``WAIT_S``)."""
        os.kill(self.supervisor, signal.SIGHUP)  # the supervisor sends it on to the other workers
        deadline = time.monotonic() + WAIT_S
        while True:
            states = self.board.states()
            if all(state.generation >= generation for state in states):
                return states, True
            if time.monotonic() > deadline:
                return states, False
            await asyncio.sleep(POLL_S)
