"""XML-Q's input: a query as 10 token ids (eBay §3.3.1), shared by training and serving.

The normalized tokens are truncated to 9, an end marker follows them, and padding goes in
front, so the recurrent layers read the query last. Ids: 0 padding, 1 end marker, 2 an
unknown token, then the vocabulary in its file order. A bundle may use another length
(``sequence_length`` in its config, e.g. 20 ids: up to 19 tokens); 10 is the paper's and the
default, so bundles without the key read as before.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from qcat.normalize import tokenize

SEQUENCE_LENGTH = 10
PAD, END, UNKNOWN = 0, 1, 2
RESERVED = 3  # ids below this are not words


def token_index(vocabulary: Sequence[str]) -> dict[str, int]:
    """Word -> id for a vocabulary listed in id order from ``RESERVED`` on."""
    return {word: RESERVED + i for i, word in enumerate(vocabulary)}


def check_length(length: int) -> int:
    if not isinstance(length, int) or length < 2:
        raise ValueError(f"the sequence length must be an integer of at least 2 (a token and the end marker), got {length!r}")
    return length


def fallback_ids(token: str, index: dict[str, int]) -> list[int]:
    """Ids of a token, and for one not in the vocabulary (``oov_fallback``) what it may be
    read as: without a possessive ``'s``, its hyphen-separated parts when one of them is
    known (unknown parts stay unknown), without a plural ``s``; else ``[UNKNOWN]``."""
    if token in index:
        return [index[token]]
    if token.endswith("'s") and token[:-2] in index:
        return [index[token[:-2]]]
    parts = [part for part in token.split("-") if part]
    if len(parts) > 1 and any(part in index for part in parts):
        return [index.get(part, UNKNOWN) for part in parts]
    if token.endswith("s") and token[:-1] in index:
        return [index[token[:-1]]]
    return [UNKNOWN]


def encode_tokens(tokens: Sequence[str], index: dict[str, int], length: int = SEQUENCE_LENGTH,
                  oov_fallback: bool = False) -> list[int]:
    if oov_fallback:
        ids = [i for token in tokens for i in fallback_ids(token, index)][: length - 1] + [END]
    else:
        ids = [index.get(token, UNKNOWN) for token in tokens[: length - 1]] + [END]
    return [PAD] * (length - len(ids)) + ids


def encode(queries: Sequence[str], index: dict[str, int], length: int = SEQUENCE_LENGTH,
           oov_fallback: bool = False) -> np.ndarray:
    """``(n, length)`` int32 ids of raw queries (normalized here); ``length`` counts the end
    marker, so a query keeps its first ``length - 1`` tokens (after ``oov_fallback``, see
    :func:`fallback_ids`)."""
    out = np.zeros((len(queries), check_length(length)), dtype=np.int32)
    for row, query in enumerate(queries):
        out[row] = encode_tokens(tokenize(query), index, length, oov_fallback)
    return out
