"""Writing a command's output so that a failed or interrupted command leaves nothing behind.

Every file or directory a command writes (a model bundle, an aggregated click table, a
simulated log, a golden CSV) is first written into a temporary sibling (same directory, so
same file system) and renamed into place once complete: a reader never sees half a bundle, and
a disk that fills up, a permission error or Ctrl-C leaves no partial output at the target.
An ``OSError`` while writing becomes a one-line :class:`~qcat.errors.InputError` naming the
target. The output gets the mode the umask gives any new file or directory (0644/0755 under umask
022), not the private mode of a temporary one.

A model bundle directory is also locked while it is being made (:class:`OutputLock`, a
``flock`` on a hidden sibling file, released when the process ends, however it ends), so two
``qcat train`` runs into one ``--out`` cannot both write it: the second is refused at once.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from qcat.errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the lock file's exclusive creation is the lock
    fcntl = None

STAGING_INFIX = ".qcat-tmp-"
LOCK_SUFFIX = ".qcat-lock"

# Absolute target path -> the lock this process holds on it (a lock is taken once per process).
_HELD: dict[Path, "OutputLock"] = {}


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _umask() -> int:
    """The process's umask (read from /proc where there is one: setting it to read it is not
    thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def as_created(path: Path, directory: bool) -> None:
    """Give a staging file or directory (which ``tempfile`` makes 0600 or 0700, for itself) the
    mode a plain ``open`` or ``mkdir`` gives under the umask (0644 and 0755 under umask 022), so
    that the output, once renamed into place, reads like any other file the user makes."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def write_error(path: Path, exc: OSError, flag: str | None = "--out", what: str = "") -> InputError:
    """An ``OSError`` met while writing ``path``, as one line naming it."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    where = f"{flag} {path}" if flag else str(path)
    return InputError(f"{where}: cannot write{' ' + what if what else ''} ({reason}); nothing was written there")


def _make_parents(directory: Path, flag: str | None, target: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; the ones created, deepest last."""
    missing = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    if current.exists() and not current.is_dir():
        raise InputError(f"{flag + ' ' if flag else ''}{target}: {current} is not a directory")
    created = []
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            _remove_dirs(created)
            raise write_error(target, exc, flag) from None
        created.append(path)
    return created


def _remove_dirs(created: list[Path]) -> None:
    for path in reversed(created):
        try:
            path.rmdir()
        except OSError:
            break


def check_writable_file(path: Path, flag: str = "--out", suffixes: tuple[str, ...] | None = None,
                        overwrite: bool = True, force_flag: str | None = None) -> Path:
    """Check, before any work, that a command can write the file ``path``: a suffix among
    ``suffixes`` (if given), not a directory, not an existing file unless ``overwrite``, and a
    directory it can create a file in (probed by creating and removing a temporary file in the
    nearest existing directory above it)."""
    path = Path(path)
    if suffixes is not None and not any(path.name.lower().endswith(s) for s in suffixes):
        raise InputError(f"{flag} {path}: cannot tell the format from the name; use one of {', '.join(suffixes)}")
    if path.is_dir():
        raise InputError(f"{flag} {path} is a directory; give a file name")
    if not overwrite and (path.exists() or path.is_symlink()):
        hint = f" (give {force_flag} to replace it)" if force_flag else ""
        raise InputError(f"{flag} {path} exists; choose another name or remove it{hint}")
    directory = _absolute(path).parent
    while not directory.exists() and directory.parent != directory:
        directory = directory.parent
    if not directory.is_dir():
        raise InputError(f"{flag} {path}: {directory} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=f".{path.name}{STAGING_INFIX}")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise write_error(path, exc, flag) from None
    return path


@contextmanager
def atomic_file(path: Path, flag: str | None = "--out", overwrite: bool = True,
                force_flag: str | None = None) -> Iterator[Path]:
    """A temporary path next to ``path`` to write; renamed to ``path`` when the block ends
    without an error, removed otherwise. ``overwrite=False``: refuse (at the rename too) to
    replace a file that exists. Missing parent directories are created (and removed again on
    failure)."""
    path = Path(path)
    created = _make_parents(_absolute(path).parent, flag, path)
    try:
        # The staging name ends like the target's (.csv.gz, .parquet): writers that pick the
        # format from the name write the same format.
        fd, name = tempfile.mkstemp(dir=_absolute(path).parent, prefix=f".{path.name}{STAGING_INFIX}",
                                    suffix="".join(path.suffixes[-2:]))
        os.close(fd)
    except OSError as exc:
        _remove_dirs(created)
        raise write_error(path, exc, flag) from None
    staging = Path(name)
    try:
        try:
            yield staging
            if staging.exists():
                as_created(staging, directory=False)
            if overwrite:
                os.replace(staging, path)
            else:
                _link_no_replace(staging, path, flag, force_flag)
        except OSError as exc:
            raise write_error(path, exc, flag) from None
    except BaseException:
        staging.unlink(missing_ok=True)
        _remove_dirs(created)
        raise
    staging.unlink(missing_ok=True)


def _link_no_replace(staging: Path, path: Path, flag: str | None, force_flag: str | None) -> None:
    """Move ``staging`` to ``path`` unless ``path`` exists (atomically: a hard link fails on an
    existing name)."""
    try:
        os.link(staging, path)
    except FileExistsError:
        hint = f" (give {force_flag} to replace it)" if force_flag else ""
        raise InputError(f"{flag + ' ' if flag else ''}{path} appeared while this command ran; not replaced{hint}") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOTSUP):
            raise
        if path.exists() or path.is_symlink():  # a file system without hard links: check, then rename
            raise InputError(f"{flag + ' ' if flag else ''}{path} appeared while this command ran; not replaced") from None
        os.replace(staging, path)
        return
    staging.unlink()


class OutputLock:
    """An exclusive lock on a target path, for as long as this process holds it (``flock`` on
    the hidden sibling ``.NAME.qcat-lock``, which is removed on release; a process that dies
    releases it with its file descriptors). Taking it also removes staging directories that a
    killed run of the same target left behind."""

    def __init__(self, target: Path, flag: str = "--out"):
        self.target = Path(target)
        self.flag = flag
        self.absolute = _absolute(self.target)
        self.lock_path = self.absolute.parent / f".{self.absolute.name}{LOCK_SUFFIX}"
        self.created: list[Path] = []
        self.fd: int | None = None

    def acquire(self) -> "OutputLock":
        self.created = _make_parents(self.absolute.parent, self.flag, self.target)
        try:
            self.fd = self._lock()
        except BaseException:
            _remove_dirs(self.created)
            raise
        _HELD[self.absolute] = self
        for stale in self.absolute.parent.glob(f".{self.absolute.name}{STAGING_INFIX}*"):
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
        return self

    def _busy(self) -> InputError:
        return InputError(f"{self.flag} {self.target} is being written by another qcat process (lock "
                          f"{self.lock_path}); wait for it to finish or choose another {self.flag}")

    def _lock(self) -> int:
        while True:
            try:
                if fcntl is None:
                    return os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileExistsError:
                raise self._busy() from None
            except OSError as exc:
                raise write_error(self.target, exc, self.flag) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise self._busy() from None
            # The holder before us may have removed the file between our open and our lock:
            # the lock counts only if the file we locked is still the one at the path.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.lock_path))
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)

    def release(self) -> None:
        if self.fd is None:
            return
        _HELD.pop(self.absolute, None)
        try:
            self.lock_path.unlink(missing_ok=True)  # while still holding it: see _lock
        finally:
            os.close(self.fd)
            self.fd = None
        if not self.target.exists():
            _remove_dirs(self.created)

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


def check_new_directory(path: Path, flag: str = "--out") -> None:
    """Refuse an output directory that is a file or a directory that is not empty."""
    if path.is_file():
        raise InputError(f"{flag} {path} is a file; give a directory for the model bundle")
    if path.is_dir() and any(path.iterdir()):
        raise InputError(f"{flag} {path} is a directory that is not empty; write the bundle to a new or empty "
                         f"directory (its manifest lists every file in it)")


def write_directory(target: Path, write: Callable[[Path], None], flag: str = "--out",
                    what: str = "the model bundle") -> None:
    """Call ``write(staging)`` to fill a new temporary sibling directory of ``target``, then
    rename it to ``target``, which must not exist or be an empty directory (checked again at
    the rename: one that appeared meanwhile is never replaced). On any error the staging
    directory is removed and nothing is left at ``target``. Holds the target's
    :class:`OutputLock` meanwhile (reusing it where this process already holds it)."""
    target = Path(target)
    held = _HELD.get(_absolute(target))
    lock = held or OutputLock(target, flag).acquire()
    staging = None
    try:
        check_new_directory(target, flag)
        try:
            staging = Path(tempfile.mkdtemp(dir=lock.absolute.parent, prefix=f".{lock.absolute.name}{STAGING_INFIX}"))
            as_created(staging, directory=True)
            write(staging)
            _rename_directory(staging, target, flag)
            staging = None
        except OSError as exc:
            raise write_error(target, exc, flag, what) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if held is None:
            lock.release()


def _rename_directory(staging: Path, target: Path, flag: str) -> None:
    if target.exists() or target.is_symlink():
        if not target.is_dir() or target.is_symlink() or any(target.iterdir()):
            raise InputError(f"{flag} {target} appeared while this command ran; the bundle was not written there")
    try:
        os.rename(staging, target)  # replaces an empty directory, refuses any other
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise InputError(f"{flag} {target} appeared while this command ran; the bundle was not written "
                             f"there") from None
        raise


# Line and paragraph separators are valid in JSON strings, but a reader that splits its input
# with str.splitlines() would see a record broken in two: write them as escapes.
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"})


def json_line(record) -> str:
    """One JSON record on one line, whatever the text inside (UTF-8, line breaks escaped)."""
    return json.dumps(record, ensure_ascii=False).translate(_LINE_BREAKS)
