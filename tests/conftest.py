from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
pytest_plugins = ["judging_fixtures"]  # PostgreSQL server, judging stores


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def bestbuy_taxonomy():
    from qcat.taxonomy import load_taxonomy

    return load_taxonomy(DATA / "bestbuy_categories_2016.json.gz")


@pytest.fixture(scope="session")
def bestbuy_model_dir(tmp_path_factory, bestbuy_taxonomy):
    """A small NB bundle trained on the real Best Buy click sample (with --min-clicks 1), recording
    its data as `qcat train nb --log` does."""
    from qcat.training.commands.bundles import save_bundle
    from qcat.training.data.corpus import LogCorpus
    from qcat.training.data.provenance import log_source
    from qcat.training.nb import trainer as nb_trainer

    log = LogCorpus(DATA / "bestbuy_clicks_sample.csv", DATA / "bestbuy_categories_2016.json.gz", min_clicks=1)
    dataset = log.dataset()
    model = nb_trainer.fit(dataset, nb_trainer.NBConfig(thresholds=(1,), alphas=(0.1,)))
    model.config["data"] = log_source(log)
    directory = tmp_path_factory.mktemp("bundle") / "bestbuy-nb"
    save_bundle(model, directory, dataset)
    return directory


# The costliest modules first (their order from `python -m pytest -n 2 --durations=0`, summed
# per module): pytest-xdist hands each worker whole modules (--dist loadscope, pyproject.toml)
# in collection order, so starting with the long ones keeps a worker from finishing alone.
COSTLIEST_FIRST = (
    "test_xmlq_backends.py", "test_xmlq_without_tensorflow.py", "test_evaluate.py", "test_xmlq_data_parallel.py",
    "test_xmlq.py", "test_xmlq_quantize.py", "test_ingest_engines.py", "test_judging_app.py",
    "test_judging_own_engine.py", "test_judging_defects.py",
    "test_judging_e2e.py", "test_judging_typeahead.py", "test_judging_screen.py", "test_trust_inputs.py", "test_demo_corpus.py", "test_judging_gold.py", "test_own_data.py", "test_catalog.py",
    "test_serve_soak.py", "test_packaging.py", "test_judging_cli.py", "test_golden.py", "test_provenance.py",
    "test_simulate.py", "test_serve.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(COSTLIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the others keep their order
