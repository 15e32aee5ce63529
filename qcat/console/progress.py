"""Progress on the terminal for steps that take more than a moment (ingesting, training,
simulating, searching, building a judging session).

Drawn with rich on stderr when stderr is a terminal and rich is installed (the data, train,
eval and judge extras bring it); silent otherwise, with ``qcat --quiet ...`` or with
``QCAT_QUIET=1``, so logs and pipes get the commands' own lines only.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator

QUIET_ENV = "QCAT_QUIET"


def shown() -> bool:
    """Whether progress is drawn: a terminal on stderr, not quiet, rich importable."""
    if os.environ.get(QUIET_ENV) or not sys.stderr.isatty():
        return False
    return importlib.util.find_spec("rich") is not None


@contextmanager
def task(description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """A progress line for one step: a bar when ``total`` is known, else a spinner, with the
    elapsed time. Yields ``advance(n=1)``."""
    if not shown():
        yield lambda n=1: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True), transient=True) as progress:
        handle = progress.add_task(description, total=total)
        yield lambda n=1: progress.advance(handle, n)


def announce(message: str) -> None:
    """A one-off line about a slow step about to happen (``compiling XReg kernels, once``),
    on stderr, unless quiet."""
    if not os.environ.get(QUIET_ENV) and sys.stderr.isatty():
        print(f"qcat: {message}", file=sys.stderr, flush=True)


def announce_compilation(what: str, kernel) -> None:
    """Announce that numba is about to compile ``what`` when ``kernel`` (a ``cache=True``
    dispatcher) has nothing cached on this machine yet: the one slow first run explained."""
    cache_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    if index is None or not os.path.exists(index):
        announce(f"compiling {what}, once (numba keeps them cached on this machine)")
