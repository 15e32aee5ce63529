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
    """A small NB bundle trained on the real Best Buy click sample."""
    from training import nb_trainer
    from training.clicklog import ingest
    from training.dataset import Dataset

    table = ingest(DATA / "bestbuy_clicks_sample.csv", bestbuy_taxonomy, min_clicks=1).table
    model = nb_trainer.fit(Dataset.from_table(table, bestbuy_taxonomy), nb_trainer.NBConfig(thresholds=(1,), alphas=(0.1,)))
    directory = tmp_path_factory.mktemp("bundle") / "bestbuy-nb"
    model.save(directory)
    return directory
