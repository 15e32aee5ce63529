"""Word vectors from qcat's own text: skip-gram with negative sampling (word2vec's SGNS).

Mikolov et al. 2013 as the word2vec C tool does it: each kept token predicts the tokens
within a window drawn uniformly from 1..``window`` on each side; each (token, context) pair
is one logistic step on the pair and ``negative`` noise tokens drawn from the unigram
distribution raised to 0.75; a token of corpus frequency f is kept with probability
``(sqrt(f / sample) + 1) * sample / f`` (frequent-word subsampling); the learning rate falls
linearly from ``alpha`` to ``alpha / 10^4`` over all epochs.

The inner loop is numba and single-threaded, and every random draw (initial vectors, window
sizes, subsampling, noise tokens, each epoch's sentence order) comes from word2vec's linear
congruential generator seeded from ``seed``: a rerun gives the same vectors, bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
from numba import njit

from qcat.console.progress import announce_compilation, task

UNIGRAM_POWER = 0.75
TABLE_SIZE = 1 << 20  # noise-token table; word2vec uses 1e8 for vocabularies a thousand times larger


@dataclass(frozen=True)
class SkipGramConfig:
    dim: int = 64
    window: int = 5
    negative: int = 5
    sample: float = 1e-3
    alpha: float = 0.025
    epochs: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("dim", "window", "negative", "epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"skip-gram {name} must be at least 1, got {getattr(self, name)}")
        if self.sample <= 0 or self.alpha <= 0:
            raise ValueError(f"skip-gram sample and alpha must be positive, got {self.sample} and {self.alpha}")

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SkipGramVectors:
    vectors: np.ndarray  # (vocabulary, dim) float32; rows of unseen tokens are zero
    seen: np.ndarray  # (vocabulary,) bool: the token occurs in the text
    report: dict  # sentences, tokens, seconds


def corpus_ids(sentences: Sequence[Sequence[str]], vocabulary: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The sentences as one int32 array of vocabulary ids (tokens outside the vocabulary
    dropped, as word2vec drops its rare words) and int64 sentence starts (one more than
    sentences; empty sentences left out)."""
    index = {token: i for i, token in enumerate(vocabulary)}
    ids: list[int] = []
    starts = [0]
    for sentence in sentences:
        kept = [index[t] for t in sentence if t in index]
        if len(kept) > 1:  # a lone token has no context to predict
            ids.extend(kept)
            starts.append(len(ids))
    return np.asarray(ids, dtype=np.int32), np.asarray(starts, dtype=np.int64)


def noise_table(counts: np.ndarray, size: int = TABLE_SIZE) -> np.ndarray:
    """Token ids laid out in proportion to ``count ** 0.75``: a uniform draw from the table is
    a draw from the noise distribution."""
    weights = counts.astype(np.float64) ** UNIGRAM_POWER
    edges = np.cumsum(weights) / weights.sum()
    return np.searchsorted(edges, (np.arange(size) + 0.5) / size).astype(np.int32)


def keep_probabilities(counts: np.ndarray, sample: float) -> np.ndarray:
    """word2vec's chance of keeping each occurrence of a token (1 for rare tokens)."""
    frequency = counts / max(counts.sum(), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = (np.sqrt(frequency / sample) + 1) * sample / frequency
    return np.where(counts > 0, np.minimum(keep, 1.0), 0.0)


def train_skipgram(sentences: Sequence[Sequence[str]], vocabulary: Sequence[str],
                   config: SkipGramConfig = SkipGramConfig()) -> SkipGramVectors:
    """Vectors for ``vocabulary`` from ``sentences`` (lists of normalized tokens)."""
    started = time.perf_counter()
    ids, starts = corpus_ids(sentences, vocabulary)
    counts = np.bincount(ids, minlength=len(vocabulary)).astype(np.int64)
    seen = counts > 0
    vectors = np.zeros((len(vocabulary), config.dim), dtype=np.float32)
    if ids.size:
        announce_compilation("the skip-gram kernel", _train)
        state = np.array([(config.seed * 2654435761 + 1) % (1 << 64)], dtype=np.uint64)
        syn0 = _initial_vectors(len(vocabulary), config.dim, state)
        syn1 = np.zeros_like(syn0)
        order = np.arange(len(starts) - 1, dtype=np.int64)
        table = noise_table(np.maximum(counts, 0))
        keep = keep_probabilities(counts, config.sample).astype(np.float32)
        total = np.int64(ids.size) * config.epochs
        done = np.zeros(1, dtype=np.int64)
        with task("training skip-gram word vectors", total=config.epochs) as advance:
            for _ in range(config.epochs):
                _train(ids, starts, order, syn0, syn1, table, keep, config.window, config.negative,
                       np.float32(config.alpha), total, done, state)
                advance()
        vectors[seen] = syn0[seen]
    report = {"sentences": int(len(starts) - 1), "tokens": int(ids.size), "vocabulary_seen": int(seen.sum()),
              "seconds": round(time.perf_counter() - started, 2)}
    return SkipGramVectors(vectors, seen, report)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


@njit(cache=True)
def _next(state) -> np.uint64:
    state[0] = state[0] * np.uint64(25214903917) + np.uint64(11)
    return state[0]


@njit(cache=True)
def _uniform(state) -> float:
    """A draw in [0, 1) from the generator's upper bits."""
    return (_next(state) >> np.uint64(11)) / 9007199254740992.0


@njit(cache=True)
def _initial_vectors(rows, dim, state):
    """word2vec's start: uniform in (-0.5 / dim, 0.5 / dim)."""
    out = np.empty((rows, dim), dtype=np.float32)
    for i in range(rows):
        for j in range(dim):
            out[i, j] = (_uniform(state) - 0.5) / dim
    return out


@njit(cache=True)
def _train(ids, starts, order, syn0, syn1, table, keep, window, negative, alpha, total, done, state):
    """One epoch over the sentences in a fresh random order (``order`` is shuffled in place)."""
    dim = syn0.shape[1]
    n_sentences = order.shape[0]
    for i in range(n_sentences - 1, 0, -1):  # Fisher-Yates
        j = np.int64(_next(state) % np.uint64(i + 1))
        order[i], order[j] = order[j], order[i]
    gradient = np.empty(dim, dtype=np.float32)
    kept = np.empty(ids.shape[0], dtype=np.int32)
    minimum = alpha * np.float32(1e-4)
    for s in range(n_sentences):
        sentence = order[s]
        begin, end = starts[sentence], starts[sentence + 1]
        n = 0
        for p in range(begin, end):
            if keep[ids[p]] >= 1.0 or _uniform(state) < keep[ids[p]]:
                kept[n] = ids[p]
                n += 1
        lr = np.float32(alpha * (1.0 - done[0] / (total + 1.0)))
        if lr < minimum:
            lr = minimum
        done[0] += end - begin
        for p in range(n):
            reach = 1 + np.int64(_next(state) % np.uint64(window))
            for q in range(max(0, p - reach), min(n, p + reach + 1)):
                if q == p:
                    continue
                context = kept[q]  # its vector is moved; the centre token is predicted (word2vec's order)
                for d in range(dim):
                    gradient[d] = 0.0
                for k in range(negative + 1):
                    if k == 0:
                        target, label = kept[p], 1.0
                    else:
                        target = table[np.int64(_next(state) >> np.uint64(16)) % table.shape[0]]
                        if target == kept[p]:
                            continue
                        label = 0.0
                    dot = np.float32(0.0)
                    for d in range(dim):
                        dot += syn0[context, d] * syn1[target, d]
                    if dot > 6.0:
                        step = (label - 1.0) * lr
                    elif dot < -6.0:
                        step = label * lr
                    else:
                        step = (label - 1.0 / (1.0 + np.exp(-dot))) * lr
                    for d in range(dim):
                        gradient[d] += step * syn1[target, d]
                        syn1[target, d] += step * syn0[context, d]
                for d in range(dim):
                    syn0[context, d] += gradient[d]
