import fcntl
import gc
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

# Where PYTHONDONTWRITEBYTECODE is set (this project's machines set it), every pytest worker and
# every `qcat` command a test starts would compile the test modules (with pytest's assertion
# rewriting) and qcat's own modules again: some 6 CPU-s a worker. The test run caches them.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


# A test worker holds what every module before imported (TensorFlow, JAX, Streamlit: millions of
# objects), and each of Python's full collections, which allocation-heavy code such as Streamlit's
# AppTest sets off dozens of times a test, walked all of it: test_judging_app.py took 71 CPU-s
# after TensorFlow and JAX were imported and 17 without them. What is alive once the tests are
# collected is moved out of the collector's way (gc.freeze). After a module that ran for over
# 10 s (one that trains, serves or imports a framework), what became garbage is collected and the
# rest frozen again; after a quicker one nothing is done: a full collection costs up to a second,
# which the fast loop's hundred small modules would pay for little.
FREEZE_AFTER_S = 10.0
_module_began: dict[str, float] = {}


def pytest_collection_finish(session) -> None:
    gc.collect()
    gc.freeze()


def pytest_runtest_setup(item) -> None:
    _module_began.setdefault(item.module.__name__, time.perf_counter())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if nextitem is None or nextitem.module is not item.module:
        began = _module_began.pop(item.module.__name__, None)  # None: every test of it was skipped
        if began is not None and time.perf_counter() - began > FREEZE_AFTER_S:
            gc.unfreeze()
            gc.collect()
            gc.freeze()


DATA = Path(__file__).parent / "data"
pytest_plugins = ["judging_fixtures", "cpu_time"]  # PostgreSQL server, judging stores; --cpu-times FILE


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


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory, worker_id) -> Path:
    """The folder every pytest-xdist worker of this session sees (the session's own without xdist)."""
    root = tmp_path_factory.getbasetemp()
    return root if worker_id == "master" else root.parent


@pytest.fixture(scope="session")
def built_once(shared_root):
    """``built_once(name, build)``: the directory ``build(directory)`` filled, built by the first
    pytest-xdist worker to ask for it and read by the others (a file lock makes them wait), so
    that modules on different workers share one costly run (a trained network, a job's output).
    Readers must not change it: copy what a test changes."""

    def get(name: str, build) -> Path:
        directory = shared_root / f"built-once-{name}"
        with open(shared_root / f"built-once-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (directory / ".built").exists():
                shutil.rmtree(directory, ignore_errors=True)  # a build that failed: try again
                directory.mkdir()
                build(directory)
                (directory / ".built").touch()
        return directory

    return get


@pytest.fixture(scope="session", autouse=True)
def ingest_cache(shared_root) -> Path:
    """One QCAT_INGEST_CACHE for the session's workers and every command they start: the demo's
    base period (8 CPU-s of DuckDB) is ingested once, not by each `qcat train` and `qcat evaluate`
    a test runs. What it gives back is the log ingested again (tests/test_ingest_cache.py)."""
    os.environ["QCAT_INGEST_CACHE"] = str(shared_root / "ingest-cache")
    return shared_root / "ingest-cache"


@pytest.fixture(scope="session", autouse=True)
def spark_jvm_for_tiny_inputs() -> None:
    """Every Spark driver the tests start (the in-process session of tests/test_ingest_engines.py,
    the `--engine spark` commands) JIT-compiles with C1 alone: their inputs are a few dozen rows, and
    C2's compilations were most of the JVM's CPU (the module: 140 -> 85 CPU-s of the whole machine,
    81 -> 65 s; /proc/stat read around `python -m pytest tests/test_ingest_engines.py -n0`). Set
    through spark-submit's own variable, which, unlike JAVA_TOOL_OPTIONS, the JVM does not echo."""
    os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def demo_ingested(built_once) -> dict:
    """The demo corpus as its readers see it, ingested once a session (about 10 s of DuckDB a
    period, which six modules each paid again): ``{"base": corpus.ingest("base"), "candidate":
    corpus.ingest("candidate"), "dataset": corpus.dataset("base")}``, pickled by the first
    pytest-xdist worker to ask and read by the others. Shared by every test of a worker: never
    change what it holds (tests/test_demo_corpus.py, test_evaluate.py, test_augment.py,
    test_skipgram.py, test_xmlq.py)."""
    import pickle

    from qcat.training.data.corpus import Corpus

    def build(directory: Path) -> None:
        corpus = Corpus.open()
        built = {"base": corpus.ingest("base"), "candidate": corpus.ingest("candidate"),
                 "dataset": corpus.dataset("base")}
        (directory / "ingested.pickle").write_bytes(pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL))

    return pickle.loads((built_once("demo-ingested", build) / "ingested.pickle").read_bytes())


@pytest.fixture
def demo_base_shared(demo_ingested, monkeypatch) -> None:
    """``Corpus.dataset("base")`` of the demo corpus answers with the suite's copy (``demo_ingested``)
    for this test, so that the code under test (a catalog's data, ``qcat evaluate``) does not
    ingest the period again; every other corpus and period is read as usual."""
    from qcat.training.data.corpus import Corpus

    demo, read = Corpus.open().directory, Corpus.dataset
    monkeypatch.setattr(Corpus, "dataset", lambda self, period="base": demo_ingested["dataset"]
                        if (self.directory, period) == (demo, "base") else read(self, period))


TESTS = Path(__file__).parent
XMLQ_CLI_FLAGS = ("--log", DATA / "bestbuy_clicks_sample.csv", "--taxonomy", DATA / "bestbuy_categories_2016.json.gz",
                  "--min-clicks", "1", "--batch-size", "32", "--min-token-count", "1")


@pytest.fixture(scope="session")
def xmlq_cli_run(built_once) -> Path:
    """``qcat train xmlq --epochs 1`` on the Best Buy sample (XMLQ_CLI_FLAGS), once a session: its
    bundle ``xmlq/``, checkpoint ``xmlq.checkpoints/`` and output (``stdout.txt``); copy it to
    change it (tests/test_xmlq_quantize.py, tests/test_xmlq_backends.py)."""
    from test_cli import qcat

    def build(directory: Path) -> None:
        result = qcat("train", "xmlq", *XMLQ_CLI_FLAGS, "--epochs", "1", "--out", directory / "xmlq")
        assert result.returncode == 0, result.stderr[-3000:]
        (directory / "stdout.txt").write_text(result.stdout)

    return built_once("xmlq-cli", build)


def xmlq_tiny_data():
    """The Best Buy click sample as the XML-Q tests train on it (``--min-clicks 1``): ``(config,
    dataset, prepared)``, 2 epochs in batches of 32."""
    from qcat.taxonomy import load_taxonomy
    from qcat.training.clicklogs.clicklog import ingest
    from qcat.training.data.dataset import Dataset
    from qcat.training.xmlq.train import XMLQConfig, prepare

    result = ingest(DATA / "bestbuy_clicks_sample.csv", load_taxonomy(DATA / "bestbuy_categories_2016.json.gz"),
                    min_clicks=1)
    dataset = Dataset.from_table(result.table, result.taxonomy)
    config = XMLQConfig(epochs=2, batch_size=32, min_token_count=1)
    return config, dataset, prepare(dataset, config)


@pytest.fixture(scope="session")
def xmlq_two_epochs(built_once) -> Path:
    """``xmlq_tiny_data`` trained for its 2 epochs under this process's Keras backend with a
    checkpoint, once a session: the checkpoint directory. Copy it and ``train(..., resume=True)``
    the copy for the network and its summary (nothing is left to train: the weights and history
    are the run's). tests/test_xmlq.py's ``tiny`` and tests/test_xmlq_backends.py's uninterrupted
    run, which each trained it before (about 10 CPU-s)."""
    def build(directory: Path) -> None:
        from qcat.training.xmlq.train import train

        config, _, prepared = xmlq_tiny_data()
        train(prepared, config, checkpoint=directory / "checkpoint", log=lambda message: None, verbose=0)

    return built_once("xmlq-two-epochs", build) / "checkpoint"


@pytest.fixture(scope="session")
def xmlq_jax_cache(shared_root) -> dict[str, str]:
    """The environment that gives a JAX process this session's persistent compilation cache, one
    folder for every pytest-xdist worker: the XML-Q tests' JAX processes (the ``jax_run`` job, the
    exports under JAX, the commands of tests/test_xmlq_without_tensorflow.py) build the same small
    network, and jax2onnx compiles about 150 small functions as it starts (about 14 CPU-s a
    process): each is compiled once a session, then read back. Size-capped, so that JAX locks
    the folder while it reads or writes an entry (processes on other workers share it). XLA
    compiles without its backend optimizations: the tests' networks train a few dozen steps, so
    optimizing costs more than it saves (the ``jax_run`` job: 85 -> 63 CPU-s); what they assert
    (determinism, resume, export equality) is of the programs, not of how fast they run."""
    return {"JAX_COMPILATION_CACHE_DIR": str(shared_root / "xmlq-jax-cache"), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0", "JAX_COMPILATION_CACHE_MAX_SIZE": str(4 << 30),
            "XLA_FLAGS": "--xla_backend_optimization_level=0"}


@pytest.fixture(scope="module")
def xmlq_jax_cache_env(xmlq_jax_cache):
    """``xmlq_jax_cache`` in the environment while a module's tests run: the JAX processes they
    start (exports, seeding, ``qcat train xmlq`` under JAX) read and write the session's cache."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in xmlq_jax_cache.items():
            patch.setenv(key, value)
        yield


@pytest.fixture(scope="session")
def jax_run(built_once, xmlq_jax_cache) -> Path:
    """tests/xmlq_backend_job.py's output under JAX on two simulated CPU devices, once a session
    (tests/test_xmlq_backends.py and, in its ``data-parallel/``, tests/test_xmlq_data_parallel.py)."""
    import os
    import subprocess
    import sys

    def build(out: Path) -> None:
        path = os.pathsep.join(p for p in (str(TESTS.parent), os.environ.get("PYTHONPATH", "")) if p)
        # The job trains the same network 6 times: JAX's compilation cache (min time 0) compiles it once,
        # and the session's other JAX processes read what it compiled (xmlq_jax_cache).
        env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "3",
               "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": "", **xmlq_jax_cache,
               "XLA_FLAGS": f"{xmlq_jax_cache['XLA_FLAGS']} --xla_force_host_platform_device_count=2"}
        result = subprocess.run([sys.executable, str(TESTS / "xmlq_backend_job.py"), str(out)], cwd=TESTS.parent,
                                env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-4000:]

    return built_once("xmlq-jax", build)


# The costliest modules first: pytest-xdist hands each worker whole modules (--dist loadscope,
# pyproject.toml) in collection order, so starting with the long ones keeps a worker from finishing
# alone. tests/costliest_first.txt lists them by measured test time (`python -m pytest --cpu-times
# FILE`, then `python tests/cpu_time.py FILE --order > tests/costliest_first.txt`); a module it does
# not name yet (a new one) goes first, its cost unknown. test_xmlq_data_parallel.py is left to the
# end: it reads the JAX job test_xmlq_backends.py starts (``jax_run``), and would only wait for it.
COSTLIEST_FIRST = [line.strip() for line in (TESTS / "costliest_first.txt").read_text().splitlines() if line.strip()]
LAST = ("test_xmlq_data_parallel.py",)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(COSTLIEST_FIRST)}
    rank |= {name: len(rank) + i for i, name in enumerate(LAST)}
    items.sort(key=lambda item: rank.get(item.path.name, -1))  # stable: a module's tests keep their order
