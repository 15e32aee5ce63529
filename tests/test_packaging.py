"""The distributions: the core wheel carries no third-party data, and the core installed alone
(no extras) classifies and serves, and every other command names the extra it needs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ABSENT_FROM_CORE = ("streamlit", "tensorflow", "duckdb", "pyspark", "matplotlib", "scipy", "keras", "sqlalchemy",
                    "lightgbm")
DATA_SUFFIXES = (".csv", ".gz", ".parquet", ".npz", ".tsv", ".onnx", ".jsonl")
EXTRA_COMMANDS = {  # a command outside the core -> the extra its error must name
    ("data", "simulate", "--out", "x"): "data",
    ("train", "nb", "--out", "x"): "train",
    ("evaluate", "x"): "eval",
    ("golden", "evaluate"): "eval",
    ("db", "current"): "judge",
    ("judge", "report", "x"): "judge",
}


def clean_env() -> dict:
    """The environment without what points Python at this checkout or a model."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "QCAT_MODEL")}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """The core and the demo wheels, built from this checkout."""
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "-w", str(out), str(ROOT), str(ROOT / "demo")], check=True, capture_output=True)
    return {"core": next(out.glob("qcat-*.whl")), "demo": next(out.glob("qcat_demo-*.whl"))}


@pytest.mark.slow  # the wheels fixture builds both wheels
def test_the_core_wheel_carries_no_data_and_says_apache(wheels):
    with zipfile.ZipFile(wheels["core"]) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert not [n for n in names if n.endswith(DATA_SUFFIXES) or "catalog" in n.lower() and not n.endswith(".py")]
    assert not [n for n in names if n.startswith(("qcat_demo/", "tests/"))]
    assert "License-Expression: Apache-2.0" in metadata
    assert sum(zipfile.ZipFile(wheels["core"]).getinfo(n).file_size for n in names) < 3_000_000


@pytest.mark.slow
def test_the_demo_wheel_carries_the_model_and_corpus_under_their_own_terms(wheels):
    with zipfile.ZipFile(wheels["demo"]) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(next(n for n in names if n.endswith("/METADATA"))).decode()
        notice = wheel.read(next(n for n in names if n.endswith("licenses/NOTICE.md"))).decode()
    assert {"qcat_demo/model/manifest.json", "qcat_demo/corpus/catalog.csv.gz", "qcat_demo/corpus/clicklog.parquet"} <= names
    assert "License-Expression: LicenseRef-qcat-demo-data" in metadata and "Apache" not in metadata.split("\n\n")[0]
    assert "non-commercial" in notice and "Instacart" in notice


@pytest.mark.slow
def test_the_core_wheel_installs_one_top_level_name_qcat(wheels):
    """Issue 33: training, evaluation, judging and the migrations install under qcat, never beside it."""
    with zipfile.ZipFile(wheels["core"]) as wheel:
        names = wheel.namelist()
        top_level = wheel.read(next(n for n in names if n.endswith(".dist-info/top_level.txt"))).decode().split() \
            if any(n.endswith("top_level.txt") for n in names) else ["qcat"]
    assert {n.split("/")[0] for n in names} == {"qcat", next(n.split("/")[0] for n in names if ".dist-info/" in n)}
    assert top_level == ["qcat"]
    assert {"qcat/training/api.py", "qcat/training/clicklogs/clicklog.py", "qcat/evaluation/golden/cli.py",
            "qcat/judging/pages/app.py", "qcat/judging/pages/panel.js", "qcat/judging/pages/panel.css",
            "qcat/migrations/env.py", "qcat/migrations/script.py.mako", "qcat/measure/metrics.py"} <= set(names)
    entry_points = wheel_text(wheels["core"], "entry_points.txt")
    assert "[qcat.golden_sources]\njudging-store = qcat.judging.reporting.export:golden_from_store" in entry_points


def wheel_text(wheel_path: Path, name: str) -> str:
    with zipfile.ZipFile(wheel_path) as wheel:
        return wheel.read(next(n for n in wheel.namelist() if n.endswith(f".dist-info/{name}"))).decode()


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory, wheels) -> Path:
    """A fresh virtual environment with the core and the demo installed, no extras."""
    venv = tmp_path_factory.mktemp("core") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=clean_env())
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                                str(wheels["core"]), str(wheels["demo"])], capture_output=True, text=True, env=clean_env())
    if installed.returncode != 0 or not (venv / "bin" / "qcat").exists():
        pytest.fail(f"pip install of the core wheel failed:\n{installed.stderr[-3000:]}")
    return venv


def run_in(venv: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True,
                          cwd=venv, env=clean_env(), timeout=300, **kwargs)


@pytest.mark.slow  # core_venv: a virtual environment with both wheels installed
def test_the_core_alone_classifies_like_the_checkout(core_venv):
    installed = run_in(core_venv, "qcat", "classify", "dior gaudron", "--json")
    here = subprocess.run([sys.executable, "-m", "qcat.cli", "classify", "dior gaudron", "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    assert installed.returncode == 0, installed.stderr
    assert json.loads(installed.stdout) == json.loads(here.stdout)
    assert run_in(core_venv, "qcat", "--version").stdout.strip() == "qcat 0.1.0"


@pytest.mark.slow
def test_the_readme_counts_the_packages_the_core_and_demo_install(core_venv):
    """Issue 34, item 14: the README said 21, counting the pip and setuptools every new virtual
    environment has."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = int(re.search(r"the core and the demo come to (\d+)\s+packages", readme).group(1))
    listed = json.loads(run_in(core_venv, "pip", "list", "--format=json", "--disable-pip-version-check").stdout)
    installed = [p["name"] for p in listed if p["name"].lower() not in ("pip", "setuptools", "wheel")]
    assert stated == len(installed), installed


@pytest.mark.slow
def test_the_core_alone_imports_qcat_training_and_nothing_at_the_top_level(core_venv):
    """``import qcat.training`` needs only the core; its subpackages name the extra they need; the
    old top-level names are gone."""
    probe = ("import qcat, qcat.training; print(qcat.training.train_nb.__name__)\n"
             "for name in ('training', 'evaluation', 'measure', 'migrations', 'judging_app'):\n"
             "    try:\n        __import__(name)\n        print('IMPORTED', name)\n"
             "    except ModuleNotFoundError:\n        pass\n"
             "try:\n    import qcat.training.clicklogs\nexcept ImportError as exc:\n    print(exc)\n")
    result = run_in(core_venv, "python", "-c", probe)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "train_nb" and "IMPORTED" not in result.stdout
    assert lines[-1] == ("qcat.training.clicklogs needs the 'data' extra (module 'scipy' is missing): "
                         'pip install "qcat[data]"')


@pytest.mark.slow
def test_the_core_alone_lacks_the_heavy_packages(core_venv):
    probe = "import importlib.util, json; print(json.dumps([m for m in %r if importlib.util.find_spec(m)]))" \
        % (ABSENT_FROM_CORE,)
    result = run_in(core_venv, "python", "-c", probe)
    assert result.returncode == 0 and json.loads(result.stdout) == []


@pytest.mark.slow
@pytest.mark.parametrize("command", list(EXTRA_COMMANDS), ids=" ".join)
def test_a_command_outside_the_core_names_its_extra(core_venv, command):
    result = run_in(core_venv, "qcat", *command)
    extra = EXTRA_COMMANDS[command]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    line, = result.stderr.strip().splitlines()
    assert re.fullmatch(rf"qcat: error: qcat {command[0]} needs the '{extra}' extra \(module '\w+' is missing\): "
                        rf'pip install "qcat\[{extra}\]"', line), line


@pytest.mark.slow
def test_the_core_alone_serves(core_venv):
    env = clean_env()
    log = core_venv / "serve.log"
    with open(log, "w") as handle:
        server = subprocess.Popen([str(core_venv / "bin" / "qcat"), "serve", "--port", "0"], cwd=core_venv,
                                  stdout=handle, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while not (match := re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read_text())):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        url = f"http://127.0.0.1:{match.group(1)}"
        with urllib.request.urlopen(f"{url}/v1/classify?q=lego+star+wars&k=1", timeout=30) as response:
            answer = json.load(response)
        with urllib.request.urlopen(f"{url}/v1/model", timeout=30) as response:
            model = json.load(response)
        assert answer["results"][0]["categories"][0]["path"].startswith("Toys")
        assert model["served_by"] == "qcat 0.1.0" and model["qcat_version"]
    finally:
        server.terminate()
        assert server.wait(60) == 0


def test_the_cli_knows_the_extras_pyproject_declares():
    """qcat.cli's list of the modules each extra brings matches pyproject.toml's extras."""
    import tomllib

    from qcat.console.extras import DISTRIBUTIONS, EXTRA_INCLUDES, EXTRA_MODULES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, modules in EXTRA_MODULES.items():
        names = [re.split(r"[\[<>=,; ]", requirement, maxsplit=1)[0] for requirement in extras[extra]]
        assert {DISTRIBUTIONS.get(module, module) for module in modules} == {name for name in names
                                                                              if name != "qcat"}, extra
        included = {inner for requirement in extras[extra] if requirement.startswith("qcat[")
                    for inner in requirement[5:-1].split(",")}
        assert included <= {extra, *EXTRA_INCLUDES.get(extra, ())} and set(EXTRA_INCLUDES.get(extra, ())) <= \
            included | {name for inner in included for name in EXTRA_INCLUDES.get(inner, ())}, extra


@pytest.mark.slow  # three Python processes
@pytest.mark.parametrize("command", [["classify", "lego"], ["serve", "--port", "0"], ["data", "simulate", "--out", "x.parquet"]],
                         ids=" ".join)
def test_without_the_demo_a_command_needing_it_says_how_to_get_it(command, tmp_path):
    code = ("import sys; sys.modules['qcat_demo'] = None; from qcat.cli import main; "
            f"sys.exit(main({command!r}))")
    env = {k: v for k, v in os.environ.items() if k != "QCAT_MODEL"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("qcat: error: ") and "is not installed" in line and "pip install ./demo" in line, line
