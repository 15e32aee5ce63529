"""Skip-gram vectors, the skip-gram embedding init and the short forms of long queries (XML-Q
options beyond the paper)."""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import replace

import numpy as np
import pytest

from qcat.training.catalog.query_short_forms import with_short_forms
from qcat.training.data.dataset import split_queries
from qcat.training.data.real_text import table_from_pairs
from qcat.training.xmlq.skipgram import SkipGramConfig, cosine, keep_probabilities, noise_table, train_skipgram

VOCABULARY = ["cat", "dog", "car", "truck", "pet", "fur", "food", "engine", "wheel", "road", "the", "zebra"]


def synthetic_sentences(n: int = 3000, seed: int = 1) -> list[list[str]]:
    """Animals among pet words, vehicles among road words, "the" everywhere; "zebra" never."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(n):
        word, context = rng.choice([("cat", "pet fur food"), ("dog", "pet fur food"),
                                    ("car", "engine wheel road"), ("truck", "engine wheel road")])
        words = rng.sample(context.split(), 2) + [word, "the"]
        rng.shuffle(words)
        sentences.append(words)
    return sentences


# In an 11-word text every word is "frequent": word2vec's subsampling would drop ~90% of the
# tokens. sample=1 keeps them all (subsampling has its own test).
CONFIG = SkipGramConfig(dim=16, epochs=5, seed=0, sample=1.0)


@pytest.fixture(scope="module")
def vectors():
    return train_skipgram(synthetic_sentences(), VOCABULARY, CONFIG)


@pytest.mark.slow
def test_tokens_sharing_contexts_end_up_closer(vectors) -> None:
    v = {token: vectors.vectors[i] for i, token in enumerate(VOCABULARY)}
    assert cosine(v["cat"], v["dog"]) > cosine(v["cat"], v["car"]) + 0.5
    assert cosine(v["car"], v["truck"]) > cosine(v["truck"], v["dog"]) + 0.5
    assert vectors.report["sentences"] == 3000 and vectors.report["tokens"] == 12_000


def test_seeded_runs_repeat_and_seeds_differ(vectors) -> None:
    again = train_skipgram(synthetic_sentences(), VOCABULARY, CONFIG)
    np.testing.assert_array_equal(again.vectors, vectors.vectors)
    other = train_skipgram(synthetic_sentences(), VOCABULARY, replace(CONFIG, seed=1))
    assert not np.allclose(other.vectors[vectors.seen], vectors.vectors[vectors.seen])


def test_subsampling_and_noise_follow_word2vec() -> None:
    counts = np.array([1000, 10, 0])  # frequencies 0.990, 0.0099, 0
    keep = keep_probabilities(counts, sample=1e-3)
    f = 1000 / 1010
    assert keep[0] == pytest.approx((np.sqrt(f / 1e-3) + 1) * 1e-3 / f)  # about 0.033
    assert keep[1] == pytest.approx(min(1.0, (np.sqrt(0.0099 / 1e-3) + 1) * 1e-3 / 0.0099), rel=1e-3)
    assert keep[2] == 0
    table = noise_table(np.array([16, 1, 0]), size=10_000)  # 16^0.75 = 8 : 1 : 0
    assert np.bincount(table, minlength=3).tolist() == pytest.approx([8 / 9 * 10_000, 1 / 9 * 10_000, 0], abs=1)


def test_unseen_tokens_keep_the_networks_random_rows(vectors) -> None:
    pytest.importorskip("keras")
    from qcat.training.xmlq.embedding_init import skipgram_embeddings
    from qcat.training.xmlq.model import PRESETS, build_xmlq

    assert vectors.seen.tolist() == [token != "zebra" for token in VOCABULARY]
    assert not vectors.vectors[VOCABULARY.index("zebra")].any()
    queries = [" ".join(s) for s in synthetic_sentences(400)]
    (ids, rows), record = skipgram_embeddings(VOCABULARY, queries, None, dim=64, epochs=1, seed=0)
    assert record["init"] == "skipgram" and record["text"]["catalog_titles"] is None
    assert 3 + VOCABULARY.index("zebra") not in ids.tolist() and len(ids) == len(VOCABULARY) - 1
    assert rows.std() == pytest.approx(0.05 / np.sqrt(3), rel=1e-3)  # the random init's scale
    size = 3 + len(VOCABULARY)
    plain = build_xmlq(size, 5, PRESETS["small"]).get_layer("embedding").get_weights()[0]
    started = build_xmlq(size, 5, PRESETS["small"], initial_embeddings=(ids, rows)).get_layer("embedding")
    matrix = started.get_weights()[0]
    np.testing.assert_array_equal(matrix[ids], rows)
    untouched = np.setdiff1d(np.arange(size), ids)  # padding, end, unknown and "zebra"
    np.testing.assert_array_equal(matrix[untouched], plain[untouched])
    assert started.trainable


@pytest.mark.slow
def test_skipgram_text_leaves_out_the_held_out_listings() -> None:
    from qcat.text.normalize import normalize
    from qcat.training.data.corpus import Corpus
    from qcat.training.xmlq.embedding_init import simulator_titles

    corpus = Corpus.open()
    catalog = corpus.catalog()
    held = corpus.holdout_split(catalog) != 0
    titles = {" ".join(tokens) for tokens in simulator_titles(corpus)}
    held_titles = {normalize(t) for t in catalog.title[held]}
    assert held.any() and titles and len(titles) < len(catalog)
    assert not titles & held_titles


def short_form_table():
    rows = [("lego star wars set", "A", 3), ("lego star wars set", "B", 1), ("lego star wars ship", "A", 2),
            ("lego city police car", "C", 4), ("sony tv stand", "D", 1), ("lego star wars", "A", 5),
            ("canon eos rebel t3", "E", 2)]
    return table_from_pairs(*(list(column) for column in zip(*rows)))


def test_short_forms_hand_computed() -> None:
    # The split is a hash of the text: "lego city" is a test-split text, the others train.
    assert split_queries(np.array(["lego city", "lego star", "lego city police", "canon eos rebel"], dtype=object),
                         0).tolist() == [2, 0, 0, 0]
    train = short_form_table()
    weights = np.array([1.0, 1.0, 50.0, 1.0, 1.0, 1.0])  # one --augment weight, kept
    assert train.queries.tolist() == ["canon eos rebel t3", "lego city police car", "lego star wars",
                                      "lego star wars set", "lego star wars ship", "sony tv stand"]
    table, out_weights, report = with_short_forms(train, weights, split_seed=0, excluded=frozenset({"canon eos"}))
    added = table.queries[len(train.queries):].tolist()
    # "lego star wars" is a training query, "lego city" a test-split text, "canon eos" held out;
    # "sony tv stand" has 3 tokens: no forms.
    assert added == ["canon eos rebel", "lego city police", "lego star"]
    pairs = {(table.queries[q], table.categories[c]): clicks
             for q, c, clicks in zip(table.pair_query, table.pair_category, table.clicks) if q >= len(train.queries)}
    assert pairs == {("canon eos rebel", "E"): 2, ("lego city police", "C"): 4, ("lego star", "A"): 5,
                     ("lego star", "B"): 1}
    assert out_weights.tolist() == weights.tolist() + [0.5, 0.5, 0.5]
    assert report == {"long_queries": 4, "forms": 6, "already_training_queries": 1, "held_out_texts": 1,
                      "outside_training_split": 1, "added_queries": 3, "added_pairs": 4, "weight": 0.5}
    # The originals are untouched and every form comes once, after them, pairs grouped by query.
    assert table.queries[:len(train.queries)].tolist() == train.queries.tolist()
    assert len(set(table.queries.tolist())) == len(table.queries)
    assert np.all(np.diff(table.pair_query) >= 0)
    np.testing.assert_array_equal(table.pair_category[:len(train)], train.pair_category)


@pytest.mark.slow
def test_short_forms_never_touch_validation_or_test(demo_ingested) -> None:
    from qcat.training.catalog.query_short_forms import held_out_texts
    from qcat.training.data.corpus import Corpus

    corpus = Corpus.open()
    dataset = demo_ingested["dataset"]  # corpus.dataset("base"), once a session (tests/conftest.py)
    held = held_out_texts(corpus)
    table, weights, report = with_short_forms(dataset.train, None, dataset.seed, held)
    added = set(table.queries[len(dataset.train.queries):].tolist())
    assert report["added_queries"] == len(added) > 1000
    assert not added & set(dataset.validation.queries.tolist()) and not added & set(dataset.test.queries.tolist())
    assert not added & held and report["held_out_texts"] > 0
    assert set(weights[len(dataset.train.queries):].tolist()) == {0.5}


@pytest.mark.slow
def test_cli_trains_with_both_options_records_them_and_refuses_a_changed_resume(tmp_path, data_dir, capsys) -> None:
    pytest.importorskip("keras")
    from qcat.cli import main

    data = ["--log", data_dir / "bestbuy_clicks_sample.csv", "--taxonomy", data_dir / "bestbuy_categories_2016.json.gz",
            "--min-clicks", "1", "--epochs", "1", "--batch-size", "64"]
    out = tmp_path / "xmlq"

    def train(*flags) -> tuple[int, str, str]:  # in this process: Keras is imported once for both runs
        capsys.readouterr()
        code = main(["train", "xmlq", *map(str, data), *flags, "--out", str(out)])
        return (code, *capsys.readouterr())

    code, stdout, stderr = train("--init-embeddings", "skipgram", "--query-short-forms")
    assert code == 0, stderr[-3000:]
    assert "training queries only" in stdout and "query short forms:" in stdout
    manifest = json.loads((out / "manifest.json").read_text())
    init = manifest["metrics"]["embedding_init"]
    assert init["init"] == "skipgram" and init["text"]["catalog_titles"] is None
    assert init["skipgram"]["tokens"] > 0 and init["skipgram"]["seconds"] >= 0 and init["rows_initialised"] > 0
    assert manifest["config"]["init_embeddings"] == "skipgram" and manifest["config"]["query_short_forms"] is True
    added = manifest["config"]["data"]["query_short_forms"]["added_queries"]
    assert added > 0
    # The forms are recorded as seen (an evaluation on them is flagged), with every non-test query.
    from qcat.training.commands.bundles import seen_queries
    from qcat.training.data.corpus import LogCorpus
    from qcat.training.data.provenance import read_seen_fingerprints

    log = LogCorpus(data_dir / "bestbuy_clicks_sample.csv", data_dir / "bestbuy_categories_2016.json.gz", min_clicks=1)
    assert len(read_seen_fingerprints(out)) == len(seen_queries(log.dataset())) + added
    shutil.rmtree(out)  # as if interrupted: the checkpoint is there, the bundle not yet written
    assert os.path.isdir(f"{out}.checkpoints")
    code, _, stderr = train("--init-embeddings", "random", "--query-short-forms", "--resume")
    assert code == 2, stderr[-3000:]
    assert "init_embeddings 'skipgram' (now 'random')" in stderr
    code, _, stderr = train("--init-embeddings", "skipgram", "--resume")
    assert code == 2 and "query_short_forms True (now False)" in stderr
    assert not out.exists()
