"""qcat's own exception types.

Every error a user can cause (a bad file, a bad row, an empty query, an unknown or
tampered model directory) raises one of these with a message that names the file,
row or value. The CLI prints the message on one line and exits non-zero.
"""


class QcatError(Exception):
    """Base class of every error a user can cause."""


class InputError(QcatError):
    """A file, row or value supplied by the user cannot be used."""


class EmptyQueryError(InputError):
    """A query is empty after normalization."""


class TaxonomyError(InputError):
    """A taxonomy file is malformed or inconsistent."""


class BundleError(QcatError):
    """A model bundle is missing, unreadable, tampered with or of an unknown format."""


SHOWN_CHARS = 80  # the most of any input an error or report echoes


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """Any input, as an error or a report echoes it: quoted, printable and short. Control
    characters (ESC, NUL, CR, a line break), undecodable bytes and lone surrogates are written as
    escapes, and text beyond ``limit`` characters is cut with its total length said, so no input
    can spill raw bytes or megabytes onto a terminal (sizes that matter are said by the caller). Every error and report that quotes a
    user's input goes through this one function."""
    if isinstance(value, bytes):
        value = value[: limit * 4].decode("utf-8", "backslashreplace") + ("" if len(value) <= limit * 4 else "…")
    if not isinstance(value, str):  # a number, None, a JSON list...: as Python writes it
        text = repr(value)
        return text[:limit] + "…" if len(text) > limit else text
    text, n = value, min(len(value), limit)
    quoted = repr(text[:n])  # repr escapes control and non-printable characters, lone surrogates
    while len(quoted) > limit + 2:  # escapes take room: fewer characters, never a longer echo
        n -= 1
        quoted = repr(text[:n])
    return quoted + "…" if n < len(text) else quoted


def printable_message(message: str, limit: int = 4000) -> str:
    """An error message as the CLI prints it: a control character, lone surrogate or other
    unprintable character that reached it unescaped (input echoed without :func:`shown`) is
    escaped, line breaks kept, and the whole cut at ``limit`` characters. The safety net under
    :func:`shown`, never a replacement for it."""
    out = "".join(ch if ch.isprintable() or ch == "\n" else repr(ch)[1:-1] for ch in message[:limit])
    return out + "…" if len(message) > limit else out
