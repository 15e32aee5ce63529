"""The compiled single-query path answers exactly as the batch path (to 1e-6), for every backend
and the hybrid; XML-Q's is checked in test_xmlq.py, on the XML-Q hybrid trained there."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from single_query_check import assert_same_answers

from qcat.classifier import Classifier
from qcat.errors import EmptyQueryError
from qcat.models import xreg


@pytest.fixture(scope="module")
def demo() -> Classifier:
    return Classifier.load().compile()


@pytest.fixture(scope="module")
def words(demo) -> list[str]:
    """Words the demo model knows (NB unigrams), a few it does not, and odd text."""
    known = [f for f in demo.model.nb.vocabulary if " " not in f]
    sample = np.random.default_rng(0).choice(len(known), 400, replace=False)
    return [known[i] for i in sample] + ["zzqx", "dior", "gaudron", "Rocketfish™", "9-10yrs", "ÉCLAIR", "at&t"]


def queries_of(words: list[str]):
    return st.lists(st.lists(st.sampled_from(words), min_size=1, max_size=12).map(" ".join), min_size=1, max_size=8)


def demo_models(demo):
    hybrid = demo.model
    return {"hybrid": hybrid, "nb": hybrid.nb, "xreg": hybrid.part("xreg"),
            "hybrid routed to nb": hybrid.with_options(route_to="nb"),
            "hybrid routed to xreg": hybrid.with_options(route_to="xreg"),
            "hybrid, paper routing": replace(hybrid, blend=0.0, cutoff=2),
            "hybrid uncalibrated": hybrid.uncalibrated()}


@pytest.mark.parametrize("name", ["hybrid", "nb", "xreg", "hybrid routed to nb", "hybrid routed to xreg",
                                  "hybrid, paper routing", "hybrid uncalibrated"])
def test_single_query_path_equals_the_batch_path(demo, words, name) -> None:
    model = demo_models(demo)[name]

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(queries=queries_of(words), k=st.sampled_from([1, 3, 5, 20, 25, 40]))
    def check(queries, k):
        assert_same_answers(model, queries, k)

    check()


@pytest.mark.slow
def test_real_text_queries_answer_alike(demo) -> None:
    from qcat.training.data.corpus import Corpus

    corpus = Corpus.open()
    queries = [q for name in ("real-title", "real-2tok") for q in list(corpus.query_set(name, "test").queries)[:150]]
    queries += ["dior gaudron", "king poster bed", "nook", "lego star wars"]
    for k in (1, 5, 30):
        assert_same_answers(demo.model, queries, k)


def test_xreg_variants_answer_alike(demo, words, monkeypatch) -> None:
    """XReg-t (re-ranked), one tree (no stacking), and large trees (searching each group's keys
    instead of scoring every group at once)."""
    queries = [" ".join(words[i:i + n]) for i, n in zip(range(0, 300, 7), [1, 2, 3, 5, 8, 12] * 10)]
    base = demo.model.part("xreg")
    assert_same_answers(base.with_options(rerank=True), queries, 5)
    assert_same_answers(replace(base, trees=base.trees[:1]), queries, 5)
    monkeypatch.setattr(xreg, "SINGLE_QUERY_TABLE", 0)
    searched = base.with_options(beam=4)
    assert searched._single_query_trees[0][2][-1] is False  # the group-by-group search
    assert_same_answers(searched, queries, 10)


def test_nb_on_a_real_click_log_answers_alike(bestbuy_model_dir) -> None:
    """Lookup-table hits and misses of a model trained on real (Best Buy) clicks."""
    model = Classifier.load(bestbuy_model_dir).model
    queries = list(model.lookup_queries[:60]) + ["ipod nano case", "nook", "zzqx", "apple tv 4k remote"]
    for k in (1, 5, 50):
        assert_same_answers(model, queries, k)


def test_an_empty_query_fails_alike(demo) -> None:
    for query in ("", "   ", "™ ®"):
        with pytest.raises(EmptyQueryError):
            demo.model.predict([query], 5)
        with pytest.raises(EmptyQueryError):
            demo.model.predict_one(query, 5)


@pytest.mark.slow
def test_a_compiled_classifier_answers_single_queries_as_batches(demo) -> None:
    queries = ["dior gaudron", "king poster bed", "tv", "samsung galaxy s21 case"]
    batch = Classifier.load().classify(queries, 5)
    assert demo.compiled and not Classifier.load().compiled
    # Batches go query by query where that is faster: XReg and so the demo hybrid, not NB.
    assert demo.model.faster_one_by_one and demo.model.part("xreg").faster_one_by_one and not demo.model.nb.faster_one_by_one
    for query, expected in zip(queries, batch):
        (one,) = demo.classify([query], 5)
        assert (one.source, [c.id for c in one.categories]) == (expected.source, [c.id for c in expected.categories])
        assert [c.score for c in one.categories] == pytest.approx([c.score for c in expected.categories], abs=1e-6)
