"""The rankings behind ``--select``: per head/torso/tail segment, the pool's candidates in the order
they are taken, and the budget each segment gets (the rules are in the package's docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from qcat.errors import InputError
from qcat.judging.grading.sessions import SEGMENTS, split_evenly

SELECTIONS = ("random", "uncertain", "disagree")
BATCH = 4096  # queries a model predicts at once


@dataclass(frozen=True)
class Ranking:
    """Per segment name, the candidates' indices in the order they are taken, and each segment's
    share of the budget."""

    order: dict[str, np.ndarray]
    wanted: dict[str, int]

    def chosen(self) -> np.ndarray:
        """The first ``wanted`` of each segment's order, head, torso then tail."""
        parts = [self.order[name][:self.wanted[name]] for name in SEGMENTS if name in self.order]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def top_predictions(model, texts: Sequence[str], k: int, batch: int = BATCH) -> tuple[np.ndarray, np.ndarray]:
    """The model's top ``k`` (label positions, -1 where it answers fewer; scores as the model gives
    them, calibrated where its bundle has a calibration) for every text, predicted ``batch`` at a time."""
    labels, scores = [np.zeros((0, k), dtype=np.int64)], [np.zeros((0, k), dtype=np.float64)]
    for start in range(0, len(texts), batch):
        predictions = model.predict([str(t) for t in texts[start:start + batch]], k)
        found_labels, found_scores = np.asarray(predictions.labels), np.asarray(predictions.scores, dtype=np.float64)
        width = found_labels.shape[1] if found_labels.ndim == 2 else 0
        padded_labels = np.full((len(found_labels), k), -1, dtype=np.int64)
        padded_scores = np.zeros((len(found_labels), k), dtype=np.float64)
        padded_labels[:, :min(k, width)] = found_labels[:, :k]
        padded_scores[:, :min(k, width)] = found_scores[:, :k]
        labels.append(padded_labels)
        scores.append(padded_scores)
    return np.concatenate(labels), np.concatenate(scores)


def margins(model, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(margin, top1, answered)`` per text: top-1 minus top-2 score (minus 0 where the model
    answers one category), the top-1 score, and whether the model answers any category."""
    labels, scores = top_predictions(model, texts, 2)
    answered = labels[:, 0] >= 0
    top1 = np.where(answered, scores[:, 0], 0.0)
    top2 = np.where(labels[:, 1] >= 0, scores[:, 1], 0.0)
    return top1 - top2, top1, answered


def top_categories(model, texts: Sequence[str]) -> np.ndarray:
    """Each text's top-1 category id (None where the model answers none), as an object array."""
    labels, _ = top_predictions(model, texts, 1)
    names = np.asarray(list(model.labels) + [None], dtype=object)  # -1 picks the None at the end
    return names[labels[:, 0]]


def segment_indices(segments) -> np.ndarray:
    """Segments given as names (head, torso, tail) or as 0/1/2, as 0/1/2."""
    values = np.asarray(segments)
    if values.dtype.kind in "iu":
        codes = values.astype(np.int64)
    else:
        lookup = {name: i for i, name in enumerate(SEGMENTS)}
        unknown = sorted({str(v) for v in values.tolist()} - set(lookup))
        if unknown:
            raise InputError(f"segment {unknown[0]!r} is not one of {', '.join(SEGMENTS)}")
        codes = np.array([lookup[str(v)] for v in values.tolist()], dtype=np.int64)
    if codes.size and (codes.min() < 0 or codes.max() >= len(SEGMENTS)):
        raise InputError(f"a segment index lies outside 0..{len(SEGMENTS) - 1}")
    return codes


def budget(n: int, candidates: dict[str, int]) -> dict[str, int]:
    """``n`` split evenly over the segments with candidates (0 for the others), head first."""
    present = [name for name in SEGMENTS if candidates.get(name, 0) > 0]
    shares = dict(zip(present, split_evenly(n, len(present)))) if present else {}
    return {name: shares.get(name, 0) for name in SEGMENTS}


def rank(kind: str, texts: Sequence[str], impressions, segments, models: Sequence, n: int, seed: int = 0,
         exclude: np.ndarray | None = None) -> Ranking:
    """Every candidate of each segment in the order ``kind`` takes them, and each segment's share
    of the budget ``n``. Only the queries not ``exclude``-d are scored."""
    if kind not in SELECTIONS:
        raise InputError(f"--select {kind!r}: expected one of {', '.join(SELECTIONS)}")
    if n < 1:
        raise InputError(f"--select {kind} needs a budget of at least 1 query, got {n}")
    texts = np.asarray(texts, dtype=object)
    codes = segment_indices(segments)
    counts = np.asarray(impressions, dtype=np.float64)
    if not len(texts) == len(codes) == len(counts):
        raise InputError(f"texts, impressions and segments differ in length ({len(texts)}, {len(counts)}, "
                         f"{len(codes)})")
    pool = np.ones(len(texts), dtype=bool) if exclude is None else ~np.asarray(exclude, dtype=bool)
    rng = np.random.default_rng(seed)
    order: dict[str, np.ndarray] = {}
    if kind == "random":  # the draw create-session has always made: a permutation per segment, in order
        for s, name in enumerate(SEGMENTS):
            members = np.nonzero((codes == s) & pool)[0]
            order[name] = members[rng.permutation(len(members))]
        return Ranking(order, budget(n, {k: len(v) for k, v in order.items()}))
    tiebreak = rng.random(len(texts))
    scored = np.nonzero(pool)[0]
    if kind == "uncertain":
        margin, top1, answered = (np.zeros(len(texts)) for _ in range(3))
        margin[scored], top1[scored], answered[scored] = margins(models[0], texts[scored])
        keys = (margin, top1)
        candidate = pool & answered.astype(bool)
    else:
        if len(models) < 2:
            raise InputError("--select disagree compares two models' top categories: give --model twice")
        differ = np.zeros(len(texts), dtype=bool)
        first, second = (top_categories(model, texts[scored]) for model in models[:2])
        differ[scored] = first != second  # None vs a category differs; None vs None does not
        keys = (-counts,)
        candidate = pool & differ
    for s, name in enumerate(SEGMENTS):
        members = np.nonzero((codes == s) & candidate)[0]
        # np.lexsort sorts by the last key first: the rule's keys, then the seeded draw
        order[name] = members[np.lexsort((tiebreak[members], *(key[members] for key in reversed(keys))))]
    return Ranking(order, budget(n, {k: len(v) for k, v in order.items()}))


def select_queries(texts: Sequence[str], impressions, segments, models: Sequence, kind: str, n: int, seed: int = 0,
                   exclude: np.ndarray | None = None) -> np.ndarray:
    """The indices of the queries ``kind`` chooses from the pool, a budget of ``n`` split over its
    segments (see the package's docstring for the rules and the arguments)."""
    return rank(kind, texts, impressions, segments, models, n, seed, exclude).chosen()


RULES = {
    "random": "a seeded random sample, a third per head/torso/tail segment",
    "uncertain": "smallest margin between the first model's top-1 and top-2 scores, then the lower top-1",
    "disagree": "the two models' top-1 categories differ, most impressions first",
}


def check_selection(select: str | None, n_queries: int | None, n_models: int) -> None:
    """Refuse a ``--select`` that cannot be made: ``disagree`` with one model, a ranking without a
    budget."""
    if select == "disagree" and n_models < 2:
        raise InputError("--select disagree takes the queries where two models' top categories differ: give --model "
                         "twice")
    if select in ("uncertain", "disagree") and n_queries is None:
        raise InputError(f"--select {select} ranks the whole pool: give the budget, how many queries to take, with "
                         "--queries N (a third per segment)")


def selection_record(select: str | None, n_queries: int | None, seed: int, pool: int, left_out: dict[str, int],
                     model_dirs: Sequence, models: Sequence) -> dict:
    """How a session's sample was made, for its settings and report: the kind (``random`` when
    ``--select`` was not given), the budget, seed, pool size, the queries left out by reason, the
    rule, and for ``uncertain`` the model scored and whether its scores are calibrated."""
    from qcat.models.calibration import calibrated_sources

    kind = select or "random"
    record = {"kind": kind, "given": select is not None, "budget": n_queries, "seed": seed, "pool": pool,
              "left_out": dict(left_out), "rule": RULES[kind]}
    if kind == "uncertain":
        record.update(model=str(model_dirs[0]), scores="calibrated" if calibrated_sources(models[0]) else "raw")
    if kind == "disagree":
        record.update(models=[str(d) for d in model_dirs[:2]])
    return record
