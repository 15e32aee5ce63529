"""The re-ranker's candidates and their features, one query at a time.

A query's candidates are the union of the top K categories of every answer the re-ranker
reads (its first stage, each part of it) and of the categories its catalog neighbours vote
for. Each (query, candidate) gets the row of :func:`feature_names`; training
(``qcat.training.rerank.trainer``) and serving (:mod:`qcat.rerank`) build rows with this one function, so
they never disagree. A missing score is 0 with its ``missing`` flag set and rank K + 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from qcat.taxonomy import Taxonomy

PER_ANSWER = ("score", "rank", "missing")
NEIGHBOUR = ("nbr_share", "nbr_score_share", "nbr_best", "nbr_first_rank", "nbr_missing")
QUERY = ("q_tokens", "q_seen", "q_known_share", "q_top_neighbour", "q_first_top", "q_first_margin")
CANDIDATE = ("path_overlap", "leaf_overlap", "prior", "depth", "siblings_in_top", "siblings_nbr_share",
             "n_answers")
SIBLING_TOP = 10  # the first stage's top that "siblings_in_top" counts in


def feature_names(answers: Sequence[str]) -> tuple[str, ...]:
    """The columns of a feature row, for the answers read (first stage first, then parts)."""
    return tuple(f"{name}_{what}" for name in answers for what in PER_ANSWER) + NEIGHBOUR + QUERY + CANDIDATE


@dataclass(frozen=True)
class LabelFacts:
    """What the features know of each of the model's labels, by label position."""

    prior: np.ndarray  # float64: the label's share of the training clicks
    depth: np.ndarray  # float64: the number of names in its path
    parent: np.ndarray  # int64: an id per parent node (labels with the same parent share it)
    path_tokens: tuple[frozenset[str], ...]  # normalized tokens of every name on its path
    leaf_tokens: tuple[frozenset[str], ...]  # of its own (last) name only

    @classmethod
    def of(cls, labels: Sequence[str], taxonomy: Taxonomy, prior: np.ndarray) -> "LabelFacts":
        from qcat.text.normalize import tokenize

        paths = [taxonomy.paths[taxonomy.index(label)] for label in labels]
        parents = {}
        parent = np.array([parents.setdefault(tuple(path[:-1]), len(parents)) for path in paths], dtype=np.int64)
        return cls(np.asarray(prior, dtype=np.float64), np.array([len(p) for p in paths], dtype=np.float64), parent,
                   tuple(frozenset(t for name in path for t in tokenize(name)) for path in paths),
                   tuple(frozenset(tokenize(path[-1])) for path in paths))


@dataclass(frozen=True)
class QueryFacts:
    """What the features know of the query itself."""

    tokens: tuple[str, ...]
    seen: bool  # the query is a training query (its full text)
    known_share: float  # share of its tokens in the training vocabulary


def candidate_features(query: QueryFacts, answers: Sequence[tuple[np.ndarray, np.ndarray]],
                       neighbours: dict[int, tuple[float, float, float, int]], top_neighbour: float,
                       facts: LabelFacts, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The candidates of one query (label positions, ascending) and their feature rows.

    ``answers``: each answer's (labels, scores), best first, ``-1`` padding; each contributes
    its top ``depth``. ``neighbours``: :func:`qcat.rerank.neighbours.vote`; ``top_neighbour``: the best
    neighbour's BM25 score (0 without one).
    """
    tops = [(labels[:depth], scores[:depth]) for labels, scores in answers]
    pooled = [labels[labels >= 0] for labels, _ in tops] + [np.fromiter(neighbours, dtype=np.int64, count=len(neighbours))]
    candidates = np.unique(np.concatenate(pooled).astype(np.int64))
    m = len(candidates)
    columns = []
    present_count = np.zeros(m)
    for labels, scores in tops:
        valid = labels >= 0
        position = np.searchsorted(candidates, labels[valid])
        score = np.zeros(m)
        rank = np.full(m, depth + 1.0)
        score[position] = scores[valid]
        rank[position] = np.flatnonzero(valid) + 1.0
        missing = np.ones(m)
        missing[position] = 0.0
        present_count += 1.0 - missing
        columns += [score, rank, missing]
    votes = np.array([neighbours.get(int(c), (0.0, 0.0, 0.0, 0)) for c in candidates.tolist()],
                     dtype=np.float64).reshape(m, 4)
    nbr_missing = (votes[:, 3] == 0).astype(np.float64)
    votes[:, 3] = np.where(nbr_missing > 0, depth + 1.0, votes[:, 3])
    columns += [votes[:, 0], votes[:, 1], votes[:, 2], votes[:, 3], nbr_missing]
    n_tokens = float(len(query.tokens))
    first_labels, first_scores = tops[0]
    first_top = float(first_scores[0]) if len(first_labels) and first_labels[0] >= 0 else 0.0
    columns += [np.full(m, n_tokens), np.full(m, float(query.seen)), np.full(m, query.known_share),
                np.full(m, top_neighbour), np.full(m, first_top), columns[0] - first_top]
    tokens = set(query.tokens)
    share = 1.0 / max(n_tokens, 1.0)
    columns.append(np.array([len(tokens & facts.path_tokens[c]) * share for c in candidates.tolist()]))
    columns.append(np.array([len(tokens & facts.leaf_tokens[c]) * share for c in candidates.tolist()]))
    columns += [facts.prior[candidates], facts.depth[candidates]]
    parent = facts.parent[candidates]
    top_first = first_labels[:SIBLING_TOP]
    top_parents = facts.parent[top_first[top_first >= 0]]
    same = parent[:, None] == parent[None, :]
    columns.append((parent[:, None] == top_parents[None, :]).sum(axis=1).astype(np.float64))
    columns.append(same.astype(np.float64) @ votes[:, 0])
    columns.append(present_count + (1.0 - nbr_missing))
    return candidates, np.column_stack(columns)
