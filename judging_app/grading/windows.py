"""The queries each open window (browser tab) of a judge holds, so that two windows of one judge are
never offered the same query.

The grading panel of every window holds queries claimed for the judge; the claims are the judge's,
not the window's, so without this record a second window got the same open queries as the first,
and the grades typed in one of them were not stored. :class:`Windows` keeps, per judge and session,
which queries each window holds (as the app's one process sees them, keyed by the window's
Streamlit session); :meth:`Windows.picking` serialises the picking of one judge's windows, so that
two of them asking at once cannot take the same query. A window that is gone (its Streamlit
session ended: the tab closed or reloaded) holds nothing: ``alive`` says which are still there.
An app restart starts with no record, and each window's next message records what it holds again.
No Streamlit here: the app passes the window's key and ``alive``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager


class Windows:
    """Per (judge, session): window -> the ids of the queries it holds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._picking: dict[tuple[int, int], threading.Lock] = {}
        self._held: dict[tuple[int, int], dict[str, tuple[int, ...]]] = {}

    @contextmanager
    def picking(self, judge_id: int, session_id: int) -> Iterator[None]:
        """One window of the judge at a time picks its queries (read, claim, record)."""
        with self._lock:
            lock = self._picking.setdefault((judge_id, session_id), threading.Lock())
        with lock:
            yield

    def held_elsewhere(self, judge_id: int, session_id: int, window: str,
                       alive: Callable[[str], bool] = lambda window: True) -> set[int]:
        """The queries the judge's other windows that are still open hold; the record of those
        gone is dropped."""
        with self._lock:
            windows = self._held.get((judge_id, session_id), {})
            for gone in [other for other in windows if other != window and not alive(other)]:
                del windows[gone]
            return {query for other, ids in windows.items() if other != window for query in ids}

    def hold(self, judge_id: int, session_id: int, window: str, ids: Iterable[int]) -> None:
        """Record what the window holds now (after it was sent its queue)."""
        with self._lock:
            self._held.setdefault((judge_id, session_id), {})[window] = tuple(ids)

    def forget(self, judge_id: int, window: str) -> None:
        """The window holds nothing any more (its judge signed out, or it shows a review)."""
        with self._lock:
            for (judge, _), windows in self._held.items():
                if judge == judge_id:
                    windows.pop(window, None)


WINDOWS = Windows()  # the app's one record (one Streamlit server process)
