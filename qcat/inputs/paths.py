"""Why a path a command was given cannot be read, said truly: a missing file, a directory, a
symbolic link to nowhere or in a loop, or standard input (``-``, ``/dev/stdin``: a pipe or a
terminal), which commands that read a file more than once do not take."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from qcat.errors import InputError, shown

STDIN = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")
NOT_A_FILE = ("is not a regular file but a pipe, terminal or device: reading standard input is not supported; "
              "save the input to a file and give that")


def why_missing(path: str | Path) -> str | None:
    """Why nothing is at ``path`` (``does not exist``, a dangling or looping symbolic link), or
    None where something is."""
    try:
        os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return f"is a symbolic link to {shown(os.readlink(path))}, which does not exist"
        return "does not exist"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop (following it leads back to itself)"
        return f"cannot be read ({exc.strerror or exc})"
    return None


def file_problem(path: str | Path) -> str | None:
    """Why ``path`` is not a regular file to read, as the end of ``FLAG PATH: ...``; None when it is one."""
    if str(path) == "-":
        return "'-' (standard input) is not supported: give a file"
    missing = why_missing(path)
    if missing is not None:
        return "no such file" if missing == "does not exist" else missing
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        return "is a directory; give a file"
    if not stat.S_ISREG(mode):
        return NOT_A_FILE
    return None


def check_file(path: str | Path, flag: str | None = None) -> Path:
    """``path``, or :class:`InputError` saying truly why it is not a regular file to read."""
    problem = file_problem(path)
    if problem is not None:
        raise InputError(f"{flag + ' ' if flag else ''}{path}: {problem}")
    return Path(path)
