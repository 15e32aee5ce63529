"""The one query normalizer used by the simulator, every trainer, every reader and serving.

It folds text the way search engines match it, so that what a person reads as one query is one:

1. HTML entities are decoded (``&amp;`` → ``&``, ``&#233;`` → ``é``; only the ``&...;`` form, so
   ``at&t`` stays as typed);
2. the marks that shoppers never type (``™ ® © ℠``: NFKC would turn "Rocketfish™" into
   ``rocketfishtm``) are dropped, then NFKC and lower case;
3. Latin letters lose their accents (``café`` → ``cafe``, ``weiß`` → ``weiss``, ``ø`` → ``o``), as
   Lucene's ASCII folding does; marks on other scripts belong to their letter and stay
   (``हिन्दी``);
4. an apostrophe inside a word is dropped (``men's`` → ``mens``, ``o'neill`` → ``oneill``; ``’``
   counts as one), a hyphen splits words (``yoga-mat`` → ``yoga mat``, ``usb-c`` → ``usb c``);
5. characters that are not letters, digits (or marks) or the in-word characters ``& .`` become
   spaces; an in-word character survives only between two letters/digits: ``at&t`` and ``1.5``
   stay whole, ``rock & roll`` loses its ``&``;
6. white space collapses and the text splits on it.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata

# The normalizer's version, recorded in every bundle: a bundle trained under another one saw its
# queries in another form. 1: before folding (issue 53), which bundles of that time do not record.
NORMALIZER = 2
IN_WORD = "&."
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# Trade marks and copyright signs: part of real titles, never of what shoppers type.
_UNTYPED_MARKS = re.compile("[\u2122\u00ae\u00a9\u2120]")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'"})
# Latin letters that Unicode does not decompose into a base letter and an accent.
_LATIN_LETTERS = str.maketrans({"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ð": "d", "ł": "l",
                                "þ": "th", "ı": "i", "ħ": "h", "ŀ": "l", "ŧ": "t"})
_WORD_APOSTROPHE = re.compile(r"(?<=[^\W_])'(?=[^\W_])")
_ASCII_DROP = re.compile(r"[^a-z0-9&.]+")
_STRAY_IN_WORD = re.compile(r"(?<![^\W_])[&.]|[&.](?![^\W_])")


def _keep(ch: str) -> bool:
    return ch.isalnum() or ch in IN_WORD or unicodedata.category(ch)[0] == "M"


def tokenize(query: str) -> list[str]:
    """Normalize ``query`` and return its tokens (possibly none)."""
    return list(_tokens(query))


# Serving tokenizes a query several times (validation, routing, each model part, calibration):
# remember the recent ones.
@functools.lru_cache(maxsize=1 << 15)
def _tokens(query: str) -> tuple[str, ...]:
    if query.isascii() and "&" not in query:
        return _ascii_tokens(query.lower())
    return _any_tokens(query)


def _any_tokens(query: str) -> tuple[str, ...]:
    """Steps 1-6 for any text."""
    if "&" in query:
        query = _ENTITY.sub(lambda entity: html.unescape(entity.group()), query)
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", _UNTYPED_MARKS.sub(" ", query)).lower())
    if not text.isascii():
        text = _fold_latin(text.translate(_APOSTROPHES))
    if "'" in text:
        text = _WORD_APOSTROPHE.sub("", text)
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


def _ascii_tokens(text: str) -> tuple[str, ...]:
    """Steps 4-6 for lower-case ASCII without an entity, most of a log's queries: NFKC and folding
    change no ASCII character, and a stray ``&``/``.`` has a space or an end beside it on the whole
    string just as in its token, so one substitution does what the general path does token by token
    (tests/test_normalize.py checks the two paths agree on every demo query)."""
    if "'" in text:
        text = _WORD_APOSTROPHE.sub("", text)
    return tuple(_STRAY_IN_WORD.sub(" ", _ASCII_DROP.sub(" ", text)).split())


def _fold_latin(text: str) -> str:
    """Drop the accents of Latin letters; other scripts' marks stay with their letter."""
    decomposed = unicodedata.normalize("NFD", text.translate(_LATIN_LETTERS))
    kept, base_is_latin = [], False
    for ch in decomposed:
        if unicodedata.combining(ch) or unicodedata.category(ch) == "Mn":
            if base_is_latin:
                continue
        else:
            base_is_latin = "a" <= ch <= "z"
        kept.append(ch)
    return unicodedata.normalize("NFKC", "".join(kept))


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
