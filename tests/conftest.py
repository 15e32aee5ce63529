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
    from training import nb_trainer
    from training.cli import save_bundle
    from training.corpus import LogCorpus
    from training.provenance import log_source

    log = LogCorpus(DATA / "bestbuy_clicks_sample.csv", DATA / "bestbuy_categories_2016.json.gz", min_clicks=1)
    dataset = log.dataset()
    model = nb_trainer.fit(dataset, nb_trainer.NBConfig(thresholds=(1,), alphas=(0.1,)))
    model.config["data"] = log_source(log)
    directory = tmp_path_factory.mktemp("bundle") / "bestbuy-nb"
    save_bundle(model, directory, dataset)
    return directory
