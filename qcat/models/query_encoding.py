"""XML-Q's input: a query as 10 token ids (eBay §3.3.1), shared by training and serving.

The normalized tokens are truncated to 9, an end marker follows them, and padding goes in
front, so the recurrent layers read the query last. Ids: 0 padding, 1 end marker, 2 an
unknown token, then the vocabulary in its file order.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from qcat.text.normalize import tokenize

SEQUENCE_LENGTH = 10
PAD, END, UNKNOWN = 0, 1, 2
RESERVED = 3  # ids below this are not words


def token_index(vocabulary: Sequence[str]) -> dict[str, int]:
    """Word -> id for a vocabulary listed in id order from ``RESERVED`` on."""
    return {word: RESERVED + i for i, word in enumerate(vocabulary)}


def encode_tokens(tokens: Sequence[str], index: dict[str, int]) -> list[int]:
    ids = [index.get(token, UNKNOWN) for token in tokens[: SEQUENCE_LENGTH - 1]] + [END]
    return [PAD] * (SEQUENCE_LENGTH - len(ids)) + ids


def encode(queries: Sequence[str], index: dict[str, int]) -> np.ndarray:
    """``(n, 10)`` int32 ids of raw queries (normalized here)."""
    out = np.zeros((len(queries), SEQUENCE_LENGTH), dtype=np.int32)
    for row, query in enumerate(queries):
        out[row] = encode_tokens(tokenize(query), index)
    return out
