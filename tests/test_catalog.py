"""The catalog as a training source (issue 23): ingestion errors, short forms, the leak test on
the demo corpus, cold start end to end, and ``--min-score``."""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from qcat.errors import InputError
from qcat.taxonomy import from_paths
from qcat.text.normalize import normalize
from qcat.training.catalog.ingest import ingest_catalog
from qcat.training.catalog.short_forms import RULES, category_pairs, parse_rules, short_forms
from qcat.training.catalog.source import CatalogSettings, merge_pairs

PATHS = ["Phones > Smartphones", "Phones > Cases", "Toys > Trains", "Toys > Dolls", "Toys"]


def qcat(*args):
    return subprocess.run([sys.executable, "-m", "qcat.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})


@pytest.fixture
def taxonomy():
    return from_paths(PATHS)


# -- ingestion --------------------------------------------------------------------------


def test_catalog_rows_that_cannot_be_used_are_counted_with_their_rows(tmp_path, taxonomy):
    path = tmp_path / "listings.csv"
    path.write_bytes(
        b"listing_id,title,category_path,brand,popularity\n"
        b"1,Samsung Galaxy S3 16GB Blue,Phones > Smartphones,Samsung,5\n"    # line 2: used
        b"2,Hornby Flying Scotsman train set,Toys > Trains,Hornby,\n"         # line 3: used
        b"3,!!!,Toys > Dolls,,1\n"                                            # line 4: empty title
        b"4,Barbie doll,Toys > Robots,Mattel,1\n"                             # line 5: unknown category
        b"1,Samsung Galaxy S3 again,Phones > Smartphones,Samsung,1\n"         # line 6: duplicate id
        b"5,Phone case,Phones > Cases,,lots\n"                                # line 7: bad popularity
        b"6,too,many,fields,here,1\n"                                         # line 8: malformed
        b"7,Caf\xe9 doll,Toys > Dolls,,1\n"                                    # line 9: not UTF-8
        b",No id doll,Toys > Dolls,,1\n"                                      # line 10: empty id
        b"8,Wooden toy box,Toys,,2\n"                                         # line 11: internal node -> Other
    )
    listings, report, extended = ingest_catalog(path, taxonomy)
    assert report.rows_read == 10 and report.rows_used == 3
    assert dict(report.skipped) == {"empty_title": 1, "unknown_category": 1, "duplicate_listing_id": 1,
                                    "bad_popularity": 1, "malformed_row": 1, "bad_encoding": 1, "empty_listing_id": 1}
    assert report.examples["unknown_category"] == [(5, "Toys > Robots")]
    assert report.examples["duplicate_listing_id"] == [(6, "1")]
    assert report.examples["bad_encoding"][0][0] == 9
    assert listings.listing_id.tolist() == ["1", "2", "8"]
    assert listings.title[0] == "samsung galaxy s3 16gb blue" and listings.brand[1] == "hornby"
    other = listings.category[2]
    assert extended.path_of(other) == "Toys > Other" and extended.is_leaf(other)  # the log's leaf rule
    text = report.format()
    assert "10 rows read, 3 listings used, 7 skipped" in text and "row 5: 'Toys > Robots'" in text
    assert "1 rows name 1 internal (non-leaf) categories, counted for an Other leaf" in text
    with pytest.raises(InputError, match="internal .non-leaf. categories"):
        ingest_catalog(path, taxonomy, internal_nodes="refuse")


def test_catalog_formats_and_header_errors(tmp_path, taxonomy):
    rows = [{"listing_id": "a", "title": "Lego train", "category": "Toys > Trains"},
            {"listing_id": "b", "title": "iPhone case", "category": "Phones > Cases", "popularity": -3}]
    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress("\n".join(json.dumps(r) for r in rows).encode() + b"\n{bad\n"))
    listings, report, _ = ingest_catalog(tmp_path / "c.jsonl.gz", taxonomy)
    assert listings.title.tolist() == ["lego train", "iphone case"] and listings.popularity[1] == -3
    assert dict(report.skipped) == {"malformed_row": 1} and report.examples["malformed_row"][0][0] == 3
    (tmp_path / "c.tsv").write_text("listing_id\ttitle\n1\tx\n")
    with pytest.raises(InputError, match="missing column.*category or category_path"):
        ingest_catalog(tmp_path / "c.tsv", taxonomy)
    (tmp_path / "c.txt").write_text("x")
    with pytest.raises(InputError, match="cannot tell the catalog format"):
        ingest_catalog(tmp_path / "c.txt", taxonomy)
    (tmp_path / "bad.csv").write_text("listing_id,title,category\n1,!!,Toys > Trains\n")
    with pytest.raises(InputError, match="no usable listing"):
        ingest_catalog(tmp_path / "bad.csv", taxonomy)


# -- short forms and pairs --------------------------------------------------------------


def test_short_form_rules():
    titles = ["samsung galaxy s3 16gb pebble blue", "samsung galaxy note phone", "apple iphone case blue",
              "otterbox phone case black", "spigen phone case clear", "belkin phone case red"]
    categories = ["phones", "phones", "cases", "cases", "cases", "cases"]
    brands = ["samsung", "samsung", "apple", "otterbox", "", "unknown"]
    forms = short_forms(titles, brands, categories)
    assert forms["lead2"][0] == ["samsung galaxy"] and forms["lead3"][0] == ["samsung galaxy s3"]
    assert forms["nobrand"][0] == ["galaxy pebble blue"]  # no brand, no model numbers (s3, 16gb)
    assert forms["brandnoun"][0] == ["samsung blue"] and forms["brandnoun"][4] == [] and forms["brandnoun"][5] == []
    assert forms["catgram"][3] == ["phone case"]  # in 3 of the 4 case listings, in no phone listing
    assert forms["catgram"][0] == []  # "samsung galaxy" is in only 2 phone listings
    assert all(t not in f for rule in forms.values() for t, f in zip(titles, rule))  # never the title itself
    assert category_pairs(titles, categories)["cases"] == {"phone case": 3}
    assert parse_rules("catgram, lead2") == ("lead2", "catgram") and parse_rules("all") == RULES
    with pytest.raises(InputError, match="unknown short-form rule"):
        parse_rules("lead2,firstword")
    with pytest.raises(InputError, match="--title-weight"):
        CatalogSettings(title_weight=0)


def test_catalog_pairs_add_to_log_pairs_as_clicks():
    from qcat.training.data.real_text import table_from_pairs

    log = table_from_pairs(["iphone", "iphone", "lego"], ["c1", "c2", "c3"], [8, 2, 5])
    table = merge_pairs(log, np.asarray(["iphone", "lego train"], dtype=object), np.asarray(["c2", "c3"], dtype=object),
                        np.asarray([3.0, 1.0]))
    pairs = {(table.queries[q], table.categories[c]): k for q, c, k in zip(table.pair_query, table.pair_category,
                                                                          table.clicks)}
    assert pairs == {("iphone", "c1"): 8, ("iphone", "c2"): 5, ("lego", "c3"): 5, ("lego train", "c3"): 1}
    demand = dict(zip(table.queries, table.query_impressions))
    assert demand == {"iphone": 13, "lego": 5, "lego train": 10}  # a catalog-only query counts 10 searches
    assert table.pair_query.tolist() == sorted(table.pair_query.tolist())


# -- the leak test ----------------------------------------------------------------------


def _held_out_texts(corpus, training_titles, training_categories):
    """Computed here, independently of qcat.training.catalog.data: every held-out listing's title
    and every short form of it by every rule (catgram with the training listings' frequent
    pairs and, to be safe, with all listings')."""
    catalog = corpus.catalog()
    held = corpus.holdout_split(catalog) != 0
    taxonomy = corpus.taxonomy()
    titles = [normalize(t) for t in catalog.title[held]]
    brands = [normalize(b) for b in catalog.brand[held]]
    categories = [taxonomy.id_of_path(p) for p in catalog.category_path[held]]
    texts = set(titles)
    for frequent in (category_pairs(training_titles, training_categories),
                     category_pairs(list(training_titles) + titles, list(training_categories) + categories)):
        for rule_forms in short_forms(titles, brands, categories, RULES, frequent).values():
            texts.update(f for forms in rule_forms for f in forms)
    return set(catalog.listing_id[held].tolist()), texts - {""}


@pytest.mark.slow
@pytest.mark.parametrize("catalog_only", [False, True])
def test_no_held_out_title_or_short_form_of_one_reaches_training(catalog_only, demo_base_shared):
    from qcat.bundles.demo import demo_corpus_dir
    from qcat.training.catalog.data import CatalogData
    from qcat.training.catalog.source import CatalogPairs
    from qcat.training.data.corpus import Corpus

    corpus = Corpus.open()
    data = CatalogData(demo_corpus_dir() / "catalog.csv.gz", corpus, catalog_only=catalog_only, period="base")
    source, _ = data.prepare()
    held_ids, held_texts = _held_out_texts(corpus, source.listings.title, source.listings.category)
    assert len(held_ids) == 3083 and not held_ids & set(source.listings.listing_id.tolist())
    settings = CatalogSettings(title_weight=3, short_weight=1, rules=RULES)
    queries, _, _, counts = source.pairs(settings)
    assert counts["pairs_used"] > 50_000 and not held_texts & set(queries.tolist())
    dataset, _ = data.dataset(settings)
    train = set(dataset.train.queries.tolist())
    from_log = set() if catalog_only else set(data.base_dataset().train.queries.tolist())
    assert not (train - from_log) & held_texts  # nothing the catalog adds to training is held-out text
    if catalog_only:  # the catalog's own validation and test titles hold none either
        assert not set(dataset.table.queries.tolist()) & held_texts
    # The test can fail: without the exclusion, held-out text does reach the catalog's pairs.
    unguarded = CatalogPairs.build(source.listings).pairs(settings)[0]
    assert len(held_texts & set(unguarded.tolist())) > 1000


# -- cold start end to end, and --min-score ---------------------------------------------


def _toy_catalog(path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    vocab = {"Phones > Smartphones": (["samsung", "apple", "nokia"], ["phone", "smartphone", "unlocked", "galaxy"]),
             "Phones > Cases": (["otterbox", "spigen", "belkin"], ["case", "cover", "bumper", "clear"]),
             "Toys > Trains": (["hornby", "bachmann", "brio"], ["train", "railway", "locomotive", "track"]),
             "Toys > Dolls": (["barbie", "sindy", "disney"], ["doll", "dress", "princess", "fashion"])}
    lines = ["listing_id,title,category_path,brand"]
    for i in range(n):
        category = list(vocab)[i % 4]
        brands, words = vocab[category]
        brand = brands[rng.integers(3)]
        title = " ".join([brand] + list(rng.choice(words, size=3, replace=True)) + [f"m{rng.integers(1000)}"])
        lines.append(f"l{i},{title},{category},{brand}")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_cold_start_end_to_end_nb_xreg_hybrid_and_min_score(tmp_path):
    from_paths(PATHS).save_tsv(tmp_path / "taxonomy.tsv")
    _toy_catalog(tmp_path / "listings.csv")
    common = ["--catalog", tmp_path / "listings.csv", "--taxonomy", tmp_path / "taxonomy.tsv"]
    nb = qcat("train", "nb", *common, "--out", tmp_path / "nb")
    assert nb.returncode == 0, nb.stderr
    assert "400 rows read, 400 listings used, 0 skipped" in nb.stdout and "chose catalog title weight" in nb.stdout
    xreg = qcat("train", "xreg", *common, "--title-weight", "3", "--short-weight", "1", "--short-forms", "lead2,nobrand",
                "--out", tmp_path / "xreg")
    assert xreg.returncode == 0, xreg.stderr
    hybrid = qcat("train", "hybrid", "--nb", tmp_path / "nb", "--xreg", tmp_path / "xreg", "--out", tmp_path / "hybrid")
    assert hybrid.returncode == 0, hybrid.stderr
    manifest = json.loads((tmp_path / "xreg" / "manifest.json").read_text())
    record = manifest["config"]["data"]["catalog_training"]
    assert record["catalog_only"] is True and record["ingest"]["rows_used"] == 400
    assert record["settings"] == {"title_weight": 3.0, "short_weight": 1.0, "rules": ["lead2", "nobrand"]}
    assert len(record["catalog_sha256"]) == 64 and len(record["selection"]) == 1
    nb_record = json.loads((tmp_path / "nb" / "manifest.json").read_text())["config"]["data"]["catalog_training"]
    assert len(nb_record["selection"]) >= 5  # 3 title weights, 2 short weights, then rules dropped
    # The cold-start model answers from the catalog alone.
    result = qcat("classify", "hornby locomotive", "otterbox bumper", "--model", tmp_path / "hybrid", "--json", "-k", "3")
    assert result.returncode == 0, result.stderr
    top = [json.loads(line)["categories"][0]["path"] for line in result.stdout.splitlines()]
    assert top == ["Toys > Trains", "Phones > Cases"]
    # --min-score keeps only categories scoring at least P.
    for p in ("0", "0.5", "0.9"):
        kept = qcat("classify", "hornby locomotive", "doll", "--model", tmp_path / "hybrid", "--json", "--min-score", p)
        assert kept.returncode == 0, kept.stderr
        for line in kept.stdout.splitlines():
            assert all(c["score"] >= float(p) for c in json.loads(line)["categories"])
    everything = qcat("classify", "doll", "--model", tmp_path / "hybrid", "--json", "-k", "4", "--min-score", "0")
    assert len(json.loads(everything.stdout)["categories"]) == 4
    nothing = qcat("classify", "doll", "--model", tmp_path / "hybrid", "--min-score", "1")
    assert nothing.returncode == 0 and "(no category scores at least 1)" in nothing.stdout


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan", "x"])
def test_min_score_flag_is_validated(value):
    result = qcat("classify", "usb", "--min-score", value)
    assert result.returncode == 2 and "--min-score" in result.stderr and "Traceback" not in result.stderr


def test_classifier_min_score():
    from qcat.classifier import Classifier

    classifier = Classifier.load()
    full = classifier.classify(["hornby train set", "usb"], 5)
    kept = classifier.classify(["hornby train set", "usb"], 5, min_score=0.5)
    for a, b in zip(full, kept):
        assert b.categories == tuple(c for c in a.categories if c.score >= 0.5)
    assert kept[0].categories and len(kept[0].categories) < len(full[0].categories)
    each = classifier.classify_each(["hornby train set", "   "], 5, min_score=0.5)
    assert each[0].categories == kept[0].categories and each[1].error
    with pytest.raises(InputError, match="min_score"):
        classifier.classify(["usb"], 5, min_score=2)


@pytest.mark.slow
def test_catalog_flags_need_catalog(tmp_path):
    result = qcat("train", "nb", "--short-weight", "1", "--out", tmp_path / "x")
    assert result.returncode != 0 and "--short-weight is for --catalog FILE" in result.stderr
    result = qcat("train", "nb", "--catalog", tmp_path / "missing.csv", "--out", tmp_path / "x")
    assert result.returncode != 0 and "--catalog" in result.stderr and "no such file" in result.stderr


def test_build_demo_ships_the_best_objective_that_fits_the_size_limit(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from qcat.training.commands import build_demo

    class Candidate:
        def __init__(self, objective, size):
            self.metrics = {"selection": {"chosen": {"cutoff": 1}, "table": [{"cutoff": 1, "objective": objective}]},
                            "test": {}}
            self.size = size

        def save(self, directory):
            (directory / "blob").write_bytes(b"x" * self.size)

    dataset = SimpleNamespace(table=SimpleNamespace(queries=np.asarray(["a"], dtype=object)),
                              split=np.zeros(1, dtype=np.int8))
    corpus = SimpleNamespace(directory=tmp_path / "corpus")
    corpus.directory.mkdir()
    (corpus.directory / "log").write_bytes(b"x" * 1000)
    monkeypatch.setattr(build_demo, "SHIPPED_LIMIT", 20_000)
    for catalog_size, ships in ((3000, 3000), (30_000, 1000)):
        monkeypatch.setattr(build_demo, "build_demo_models", lambda corpus, catalog: {
            "log": (Candidate(0.60, 1000), dataset, [], None), "log + catalog": (Candidate(0.61, catalog_size), dataset, [], None)})
        build_demo.write_demo_model(corpus, tmp_path / "model", 0.0)
        assert (tmp_path / "model" / "blob").stat().st_size == ships
        assert ("ships log + catalog" if ships == 3000 else "ships log (the others exceed 25 MiB)") in capsys.readouterr().out
    monkeypatch.setattr(build_demo, "build_demo_models", lambda corpus, catalog: {
        "log": (Candidate(0.60, 30_000), dataset, [], None)})
    with pytest.raises(SystemExit, match="no demo model candidate"):
        build_demo.write_demo_model(corpus, tmp_path / "model", 0.0)


@pytest.mark.slow
def test_xmlq_trains_on_a_catalog_alone(tmp_path):
    pytest.importorskip("tensorflow")
    from_paths(PATHS).save_tsv(tmp_path / "taxonomy.tsv")
    _toy_catalog(tmp_path / "listings.csv")
    result = qcat("train", "xmlq", "--catalog", tmp_path / "listings.csv", "--taxonomy", tmp_path / "taxonomy.tsv",
                  "--title-weight", "3", "--short-weight", "1", "--short-forms", "lead2", "--epochs", "1",
                  "--out", tmp_path / "xmlq")
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "xmlq" / "manifest.json").read_text())["config"]["data"]["catalog_training"]
    assert record["settings"] == {"title_weight": 3.0, "short_weight": 1.0, "rules": ["lead2"]}
    augment = qcat("train", "xmlq", "--catalog", tmp_path / "listings.csv", "--taxonomy", tmp_path / "taxonomy.tsv",
                   "--augment", "rare", "--out", tmp_path / "x2")
    assert augment.returncode == 2 and "does not combine with --catalog" in augment.stderr
