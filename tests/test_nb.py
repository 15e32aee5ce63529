"""Naive Bayes on a case small enough to compute by hand."""

import math

import numpy as np
import pytest

from qcat.errors import EmptyQueryError
from qcat.taxonomy import from_paths
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import Dataset
from qcat.training.nb.trainer import build_model, count_features

TAXONOMY = from_paths(["Toys > Trains", "Toys > Dolls"])
TRAINS, DOLLS = TAXONOMY.id_of_path("Toys > Trains"), TAXONOMY.id_of_path("Toys > Dolls")
CATEGORIES = sorted([TRAINS, DOLLS])


def hand_table() -> ClickTable:
    # query            category  clicks
    # "red train"      trains    6
    # "red doll"       dolls     2
    # "red doll"       trains    1
    # "doll"           dolls     3
    queries = np.array(["doll", "red doll", "red train"], dtype=object)
    return ClickTable(
        queries=queries,
        categories=np.array(CATEGORIES, dtype=object),
        pair_query=np.array([0, 1, 1, 2], dtype=np.int32),
        pair_category=np.array([CATEGORIES.index(c) for c in (DOLLS, DOLLS, TRAINS, TRAINS)], dtype=np.int32),
        clicks=np.array([3.0, 2.0, 1.0, 6.0]),
        impressions=np.full(4, np.nan),
        query_impressions=np.array([3.0, 3.0, 6.0]),
    )


@pytest.fixture()
def model():
    table = hand_table()
    dataset = Dataset.from_table(table, TAXONOMY)
    return build_model(count_features(table), table, dataset, threshold=1, alpha=1.0, config={})


def test_feature_counts_by_hand():
    fc = count_features(hand_table())
    counts = {(fc.vocabulary[f], c): v for f, row in enumerate(fc.counts.toarray()) for c, v in enumerate(row) if v}
    d, t = CATEGORIES.index(DOLLS), CATEGORIES.index(TRAINS)
    assert counts == {
        ("doll", d): 5, ("doll", t): 1, ("red", d): 2, ("red", t): 7,
        ("red doll", d): 2, ("red doll", t): 1, ("red train", t): 6, ("train", t): 6,
    }


def test_scores_match_hand_computation(model):
    # Vocabulary |V| = 5 features; per category totals N_dolls = 5+2+2 = 9,
    # N_trains = 1+7+1+6+6 = 21. Prior from clicks: dolls 5/12, trains 7/12. alpha = 1.
    # "red toy": only "red" is known ("toy" and "red toy" are ignored).
    log_dolls = math.log(5 / 12) + math.log((2 + 1) / (9 + 5))
    log_trains = math.log(7 / 12) + math.log((7 + 1) / (21 + 5))
    p_dolls = 1 / (1 + math.exp(log_trains - log_dolls))
    predictions = model.predict(["Red Toy"], k=2)
    labels = [model.labels[i] for i in predictions.labels[0]]
    scores = dict(zip(labels, predictions.scores[0]))
    assert scores[DOLLS] == pytest.approx(p_dolls, rel=1e-5)
    assert scores[TRAINS] == pytest.approx(1 - p_dolls, rel=1e-5)
    assert predictions.sources == ("nb",)


def test_full_query_lookup_returns_click_shares(model):
    predictions = model.predict(["RED doll"], k=5)
    labels = [model.labels[i] for i in predictions.labels[0] if i >= 0]
    assert labels == [DOLLS, TRAINS]
    assert predictions.scores[0][:2] == pytest.approx([2 / 3, 1 / 3])
    assert predictions.sources == ("lookup",)


def test_unknown_tokens_give_the_prior_and_k_is_respected(model):
    predictions = model.predict(["dior gaudron"], k=1)
    assert model.labels[predictions.labels[0, 0]] == TRAINS  # larger prior
    # The posterior over every category (here the prior), whatever k is.
    assert predictions.scores[0, 0] == pytest.approx(float(np.exp(model.label_log_prior).max()), rel=1e-5)
    assert model.predict(["dior gaudron"], k=2).scores[0, 0] == predictions.scores[0, 0]
    assert "prior" in " ".join(model.explain("dior gaudron", 1))


def test_threshold_drops_noisy_rows():
    table = hand_table()
    dataset = Dataset.from_table(table, TAXONOMY)
    model = build_model(count_features(table), table, dataset, threshold=2, alpha=1.0, config={})
    # rows with 1 click ("doll"->trains, "red doll"->trains) are gone
    vocabulary = set(model.vocabulary)
    assert vocabulary == {"doll", "red", "red doll", "red train", "train"}
    doll = model.vocabulary.index("red doll")
    row = slice(model.feature_indptr[doll], model.feature_indptr[doll + 1])
    assert [model.labels[i] for i in model.feature_labels[row]] == [DOLLS]


def test_empty_query_is_an_error(model):
    with pytest.raises(EmptyQueryError, match="'!!'"):
        model.predict(["!!"], k=3)


def test_grid_scorer_gives_the_objective_of_the_built_model(bestbuy_taxonomy):
    """fit() scores its threshold x alpha grid without building models; every point must give
    the PR@1 that selection.objective gives on the model build_model makes for it, queries in
    the training lookup table included."""
    from pathlib import Path

    from qcat.training.clicklogs.clicklog import ingest
    from qcat.training.data.dataset import subset_queries
    from qcat.training.nb.trainer import _GridScorer, _prune
    from qcat.training.selection.objective import objective, outcomes

    data = Path(__file__).parent / "data"
    result = ingest(data / "bestbuy_clicks_sample.csv", bestbuy_taxonomy, min_clicks=1)
    dataset = Dataset.from_table(result.table, result.taxonomy)
    train = dataset.train
    seen = subset_queries(train, np.arange(len(train.queries)) % 7 == 0)  # answered by the lookup table
    sets = {"simulated": (dataset.validation, 0.6), "seen": (seen, 0.4)}
    fc = count_features(train)
    scorer = _GridScorer(fc, train, sets)
    for threshold in (1, 3, 20):
        pruned = _prune(fc, threshold)
        for alpha in (0.001, 0.1, 3.0):
            model = build_model(fc, train, dataset, threshold, alpha, {}, pruned=pruned)
            hits = scorer.hits_at_1(pruned, alpha)
            assert {name: float(h.mean()) for name, h in hits.items()} == objective(model, sets)[1], (threshold, alpha)
            assert {name: h.tolist() for name, h in hits.items()} == \
                {name: h.tolist() for name, h in outcomes(model, sets).items()}, (threshold, alpha)
