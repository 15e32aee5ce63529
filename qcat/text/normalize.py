"""The one query normalizer used by the simulator, every trainer and serving.

Drop the marks that shoppers never type (``™ ® © ℠``: NFKC would turn "Rocketfish™" into
``rocketfishtm``), NFKC, lower case, drop characters that are not letters, digits (or combining marks,
which belong to the letter before them) or the in-word characters ``' & - .``,
collapse white space and split on it. An in-word character survives only between
two letters/digits: ``at&t`` and ``9-10yrs`` stay whole, ``rock & roll`` loses its
``&`` and ``1.5'`` loses its quote.
"""

from __future__ import annotations

import functools
import re
import unicodedata

IN_WORD = "'&-."
_ASCII_DROP = re.compile(r"[^a-z0-9'&.\-]+")
# Trade marks and copyright signs: part of real titles, never of what shoppers type.
_UNTYPED_MARKS = re.compile("[\u2122\u00ae\u00a9\u2120]")
_STRAY_IN_WORD = re.compile(r"(?<![^\W_])['&.\-]|['&.\-](?![^\W_])")


def _keep(ch: str) -> bool:
    return ch.isalnum() or ch in IN_WORD or unicodedata.category(ch)[0] == "M"


def tokenize(query: str) -> list[str]:
    """Normalize ``query`` and return its tokens (possibly none)."""
    return list(_tokens(query))


# Serving tokenizes a query several times (validation, routing, each model part, calibration):
# remember the recent ones.
@functools.lru_cache(maxsize=1 << 15)
def _tokens(query: str) -> tuple[str, ...]:
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", _UNTYPED_MARKS.sub(" ", query)).lower())
    if text.isascii():
        text = _ASCII_DROP.sub(" ", text)
    else:
        text = "".join(ch if _keep(ch) else " " for ch in text)
    # Marks count as word characters for the in-word test, so strip stray
    # punctuation token by token rather than with one regex over the string.
    tokens = []
    for token in text.split():
        token = _strip_stray(token)
        tokens.extend(token.split())
    return tuple(tokens)


def _strip_stray(token: str) -> str:
    if token.isascii():
        return _STRAY_IN_WORD.sub(" ", token)
    chars = list(token)
    for i, ch in enumerate(chars):
        if ch in IN_WORD:
            before = i > 0 and chars[i - 1] not in IN_WORD and chars[i - 1] != " "
            after = i + 1 < len(chars) and token[i + 1] not in IN_WORD
            if not (before and after):
                chars[i] = " "
    return "".join(chars)


def normalize(query: str) -> str:
    """Normalize ``query`` to its canonical form: tokens joined by single spaces."""
    return " ".join(_tokens(query))  # not tokenize's list copy: the overrides' lookup pays this per query
