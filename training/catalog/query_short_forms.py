"""Short training forms of long queries (``qcat train xmlq --query-short-forms``; not in the paper).

XML-Q is served the queries longer than the hybrid's cutoff, but a two- or three-token
query that only ever trained as part of a longer one ("rocketfish mobile" inside
"rocketfish mobile charger usb") is a sequence the network never read on its own. Each
training query of more than three tokens therefore also trains as its first two and first
three tokens (:mod:`qcat.training.catalog.short_forms`' ``lead2`` and ``lead3``), labelled with the
original's categories (clicks summed over all the originals that share the form), at
sample weight :data:`FORM_WEIGHT` so the queries people typed dominate.

A form is left out when:

- it is already a training query: its own clicks say what it means;
- its text falls in the validation or test split under the dataset's split seed (the split
  is a hash of the text, so this is exactly "it is, or would be, a validation or test
  query"): the held-out splits are never touched, as ``--augment`` does with candidate queries;
- it is a text of the corpus's held-out listings (their titles and those titles' first two
  and three tokens: the ``real-title`` / ``real-2tok`` sets).
"""

from __future__ import annotations

import numpy as np

from qcat.training.catalog.short_forms import short_forms
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import split_queries

FORM_WEIGHT = 0.5  # an original query weighs 1 (or its --augment weight): twice any form
MIN_TOKENS = 4  # queries of at least this many tokens get forms
RULES = ("lead2", "lead3")


def lead_forms(texts) -> list[str]:
    """The distinct first-two and first-three-token forms of normalized texts (a text's form
    is never the text itself)."""
    forms = short_forms(list(texts), [""] * len(texts), [None] * len(texts), RULES)
    return list(dict.fromkeys(form for rule in RULES for per_text in forms[rule] for form in per_text))


def with_short_forms(train: ClickTable, weights: np.ndarray | None, split_seed: int,
                     excluded: frozenset[str] = frozenset(), weight: float = FORM_WEIGHT
                     ) -> tuple[ClickTable, np.ndarray, dict]:
    """``train`` with the short forms of its long queries appended (new queries after the
    originals, over the same categories), the sample weights (``weights`` for the originals,
    1 if None; ``weight`` for the forms) and a report of the counts."""
    originals = np.ones(len(train.queries)) if weights is None else np.asarray(weights, dtype=np.float64)
    if len(originals) != len(train.queries):
        raise ValueError(f"{len(originals)} sample weights for {len(train.queries)} training queries")
    long = np.flatnonzero(train.query_tokens_count() >= MIN_TOKENS)
    per_query = short_forms(list(train.queries[long]), [""] * len(long), [None] * len(long), RULES)
    sources: dict[str, list[int]] = {}
    for rule in RULES:
        for row, forms in zip(long.tolist(), per_query[rule]):
            for form in forms:
                sources.setdefault(form, []).append(row)
    existing = set(train.queries.tolist())
    candidates = sorted(sources)
    already = [f for f in candidates if f in existing]
    held = [f for f in candidates if f in excluded and f not in existing]
    fresh = [f for f in candidates if f not in existing and f not in excluded]
    in_train = split_queries(np.asarray(fresh, dtype=object), split_seed) == 0 if fresh else np.zeros(0, dtype=bool)
    kept = [f for f, keep in zip(fresh, in_train.tolist()) if keep]

    starts = np.searchsorted(train.pair_query, np.arange(len(train.queries) + 1))
    pair_query, pair_category, clicks = [], [], []
    for q, form in enumerate(kept, start=len(train.queries)):
        mass = np.zeros(len(train.categories))
        for row in set(sources[form]):
            pairs = slice(starts[row], starts[row + 1])
            np.add.at(mass, train.pair_category[pairs], train.clicks[pairs])
        categories = np.flatnonzero(mass > 0)
        categories = categories[np.lexsort((categories, -mass[categories]))]  # clicks descending, then category
        pair_query.extend([q] * len(categories))
        pair_category.extend(categories.tolist())
        clicks.extend(mass[categories].tolist())
    clicks = np.asarray(clicks, dtype=np.float64)
    demand = np.bincount(np.asarray(pair_query, dtype=np.int64) - len(train.queries), weights=clicks,
                         minlength=len(kept)) if kept else np.zeros(0)
    table = ClickTable(
        queries=np.concatenate([train.queries, np.asarray(kept, dtype=object)]),
        categories=train.categories,
        pair_query=np.concatenate([train.pair_query, np.asarray(pair_query, dtype=np.int32)]),
        pair_category=np.concatenate([train.pair_category, np.asarray(pair_category, dtype=np.int32)]),
        clicks=np.concatenate([train.clicks, clicks]),
        impressions=np.concatenate([train.impressions, np.full(len(clicks), np.nan)]),
        query_impressions=np.concatenate([train.query_impressions, demand]),
    )
    report = {
        "long_queries": int(len(long)),
        "forms": len(candidates),
        "already_training_queries": len(already),
        "held_out_texts": len(held),
        "outside_training_split": len(fresh) - len(kept),
        "added_queries": len(kept),
        "added_pairs": int(len(clicks)),
        "weight": weight,
    }
    return table, np.concatenate([originals, np.full(len(kept), weight)]), report


def held_out_texts(data) -> frozenset[str]:
    """The texts of the listings a corpus holds out for its real-text sets (their titles and
    the titles' first two and three tokens); none for data without such listings. ``data``:
    a corpus, a click log, or catalog data over either."""
    from qcat.training.catalog.data import held_out_listings

    _, held = held_out_listings(getattr(data, "base", data))
    if held is None:
        return frozenset()
    titles = held.title.tolist()
    return frozenset(t for t in titles + lead_forms(titles) if t)
