"""XReg and XReg-t against Omikuji (Parabel), napkinXC (PLT) and PECOS XR-Linear.

Demo corpus (default): every model trains on the same tf-idf rows of the base period's train
split (``qcat.training.xreg.features``) and is scored on the test split with the evaluation
library: P@1/3/5, PSP@5 (normalized, propensities from the train split), nDCG@5 (clicks as
gains), XMAD@5 against the normalized CTR that XReg regresses on, and XMAD@5 against click
shares (``qcat evaluate``'s convention); train time, predict ms/query (top 10, from feature
rows, the whole test split in one call or per query where the library has no batch API) and
model size on disk. Omikuji, napkinXC and PECOS learn from binary labels, as they must.

    python benchmarks/bench_xreg.py [--pecos-python /tmp/pecos-venv/bin/python] [--skip omikuji,...]

PECOS needs numpy < 2 and scipy < 1.14, which the qcat environment cannot have, so it runs in
its own virtual environment (``benchmarks/pecos_peer.py``) on the same rows, passed as .npz.

Scale (``--scale``): generated problems (``qcat.training.xreg.synthetic``); train time and peak
memory against N at L labels, and predict time per query against L; each run is a separate
process so that its peak memory is its own.

    python benchmarks/bench_xreg.py --scale --points 100000,300000,1000000 --labels 100000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent

from qcat.evaluation import metrics as M  # noqa: E402
from qcat.evaluation import regression as R  # noqa: E402
from qcat.evaluation.propensity import PropensityModel, label_counts  # noqa: E402
from qcat.measure.predict import match_to_truth  # noqa: E402
from qcat.measure.ranking import row_normalized  # noqa: E402

K = 10
COLUMNS = ("P@1", "P@3", "P@5", "PSP@5", "nDCG@5", "XMAD@5 (CTR)", "XMAD@5 (shares)", "train s", "train CPU s",
           "predict ms/q", "size MB")


def directory_size(path: Path) -> float:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 1e6


# -- the shared problem ------------------------------------------------------------------


class Problem:
    """tf-idf rows and truths of the demo corpus's train and test splits."""

    def __init__(self) -> None:
        from qcat.training.data.corpus import Corpus
        from qcat.training.data.dataset import truth_matrix
        from qcat.training.xreg.features import featurize, fit_tfidf
        from qcat.training.xreg.relevance import relevance_matrix

        self.dataset = Corpus.open().dataset("base")
        train, test = self.dataset.train, self.dataset.test
        used = np.nonzero(np.bincount(train.pair_category, minlength=len(train.categories)) > 0)[0]
        columns = np.full(len(train.categories), -1, dtype=np.int64)
        columns[used] = np.arange(len(used))
        self.label_ids = list(train.categories[used])
        self.features = fit_tfidf(train.queries)
        self.X_train = featurize(self.features, train.queries)
        self.Y_train = relevance_matrix(train, columns)
        self.X_test = featurize(self.features, test.queries)
        self.test_ids = list(test.categories)
        self.clicks = truth_matrix(test)
        self.ctr = relevance_matrix(test)
        self.inverse_propensity_train = PropensityModel().inverse(label_counts(self.Y_train), self.X_train.shape[0])

    def score(self, labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
        """Metrics of top-k ``labels`` (positions in ``label_ids``) on the test split."""
        matched = match_to_truth(labels, np.maximum(scores, 0.0), self.label_ids, self.test_ids, self.clicks)
        # Propensities per test column: from the train counts of the same category (N_l = 0 if unseen).
        position = {label: i for i, label in enumerate(self.label_ids)}
        train_counts = label_counts(self.Y_train)
        counts = np.array([train_counts[position[c]] if c in position else 0.0 for c in self.test_ids])
        counts = np.r_[counts, np.zeros(matched.truth.shape[1] - len(counts))]
        inverse = PropensityModel().inverse(counts, self.X_train.shape[0])
        as_ctr = match_to_truth(labels, np.maximum(scores, 0.0), self.label_ids, self.test_ids, self.ctr)
        as_shares = match_to_truth(labels, np.maximum(scores, 0.0), self.label_ids, self.test_ids,
                                   row_normalized(self.clicks))
        return {
            "P@1": M.precision_at_k(matched, 1), "P@3": M.precision_at_k(matched, 3), "P@5": M.precision_at_k(matched, 5),
            "PSP@5": M.psp_at_k_normalized(matched, inverse, 5), "nDCG@5": M.ndcg_at_k(matched, 5),
            "XMAD@5 (CTR)": R.xmad_at_k(as_ctr, 5), "XMAD@5 (shares)": R.xmad_at_k(as_shares, 5),
        }


# -- the models --------------------------------------------------------------------------

PREDICT_RUNS = 3


def best_of(predict, n_rows: int):
    """``predict()``'s result and its best time in ms per row over PREDICT_RUNS runs: the
    first run pays one-off costs (page faults, caches) that a serving process pays once."""
    best = float("inf")
    for _ in range(PREDICT_RUNS):
        started = time.perf_counter()
        result = predict()
        best = min(best, time.perf_counter() - started)
    return result, 1000 * best / n_rows


def run_xreg(problem: Problem, workdir: Path, threads: int = 1) -> dict[str, dict]:
    from dataclasses import asdict

    from qcat.models.xreg import XRegModel
    from qcat.training.xreg.features import from_csr
    from qcat.training.xreg.trainer import XRegConfig, fit_arrays

    config = XRegConfig(threads=threads)
    started, cpu = time.perf_counter(), time.process_time()
    trees, tail = fit_arrays(problem.X_train, problem.Y_train, config, progress=print)
    train_s, train_cpu = time.perf_counter() - started, time.process_time() - cpu
    taxonomy = problem.dataset.taxonomy.subset(problem.label_ids)
    model = XRegModel(tuple(problem.label_ids), taxonomy, problem.features, trees, tail, config=asdict(config), metrics={})
    model.save(workdir / "xreg")
    size = directory_size(workdir / "xreg")
    rows = from_csr(problem.X_test)
    results = {}
    for name, rerank in (("XReg", False), ("XReg-t", True)):
        scored = model.with_options(rerank=rerank)
        (labels, scores), predict_ms = best_of(lambda: scored.predict_rows(rows, K), rows.n)
        results[name] = problem.score(labels, scores) | {"train s": train_s, "train CPU s": train_cpu,
                                                         "predict ms/q": predict_ms, "size MB": size}
        print(name, json.dumps(results[name]))
    return results


def xc_format(path: Path, X: sp.csr_matrix, Y: sp.csr_matrix) -> None:
    """The Extreme Classification Repository's text format (what Omikuji reads)."""
    with open(path, "w") as out:
        out.write(f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}\n")
        for i in range(X.shape[0]):
            labels = ",".join(map(str, Y.indices[Y.indptr[i]:Y.indptr[i + 1]]))
            features = " ".join(f"{j}:{v:.6f}" for j, v in zip(X.indices[X.indptr[i]:X.indptr[i + 1]],
                                                                X.data[X.indptr[i]:X.indptr[i + 1]]))
            out.write(f"{labels} {features}\n")


def run_omikuji(problem: Problem, workdir: Path, threads: int = 1) -> dict:
    import omikuji

    data = workdir / "omikuji_train.txt"
    xc_format(data, problem.X_train, problem.Y_train)
    started, cpu = time.perf_counter(), time.process_time()
    model = omikuji.Model.train_on_data(str(data), omikuji.Model.default_hyper_param(), n_threads=threads)
    train_s, train_cpu = time.perf_counter() - started, time.process_time() - cpu
    model.save(str(workdir / "omikuji"))
    X = problem.X_test
    labels = np.full((X.shape[0], K), -1, dtype=np.int64)
    scores = np.zeros((X.shape[0], K))
    pairs = [list(zip(X.indices[X.indptr[i]:X.indptr[i + 1]].tolist(), X.data[X.indptr[i]:X.indptr[i + 1]].tolist()))
             for i in range(X.shape[0])]
    predicted, predict_ms = best_of(lambda: [model.predict(f, beam_size=10, top_k=K) for f in pairs], X.shape[0])
    for i, row in enumerate(predicted):
        for j, (label, score) in enumerate(row):
            labels[i, j], scores[i, j] = label, score
    return problem.score(labels, scores) | {"train s": train_s, "train CPU s": train_cpu, "predict ms/q": predict_ms,
                                            "size MB": directory_size(workdir / "omikuji")}


def run_napkinxc(problem: Problem, workdir: Path) -> dict:
    from napkinxc.models import PLT

    Y = [problem.Y_train.indices[problem.Y_train.indptr[i]:problem.Y_train.indptr[i + 1]].tolist()
         for i in range(problem.Y_train.shape[0])]
    model = PLT(str(workdir / "napkinxc"), threads=1, seed=0)
    started, cpu = time.perf_counter(), time.process_time()
    model.fit(problem.X_train, Y)
    train_s, train_cpu = time.perf_counter() - started, time.process_time() - cpu
    predicted, predict_ms = best_of(lambda: model.predict_proba(problem.X_test, top_k=K), problem.X_test.shape[0])
    labels = np.full((len(predicted), K), -1, dtype=np.int64)
    scores = np.zeros((len(predicted), K))
    for i, row in enumerate(predicted):
        for j, (label, score) in enumerate(row[:K]):
            labels[i, j], scores[i, j] = label, score
    return problem.score(labels, scores) | {"train s": train_s, "train CPU s": train_cpu, "predict ms/q": predict_ms,
                                            "size MB": directory_size(workdir / "napkinxc")}


def run_pecos(problem: Problem, workdir: Path, python: str) -> dict:
    binary = problem.Y_train.copy()
    binary.data[:] = 1.0
    sp.save_npz(workdir / "X_train.npz", problem.X_train.astype(np.float32))
    sp.save_npz(workdir / "Y_train.npz", binary.astype(np.float32))
    sp.save_npz(workdir / "X_test.npz", problem.X_test.astype(np.float32))
    subprocess.run([python, str(ROOT / "benchmarks" / "pecos_peer.py"), str(workdir)], check=True)
    out = json.loads((workdir / "pecos_result.json").read_text())
    with np.load(workdir / "pecos_predictions.npz", allow_pickle=False) as npz:
        labels, scores = npz["labels"], npz["scores"]
    return problem.score(labels, scores) | {k: out[k] for k in ("train s", "predict ms/q", "size MB")}


def print_table(results: dict[str, dict]) -> None:
    header = "| model | " + " | ".join(COLUMNS) + " |"
    print(header)
    print("|" + "---|" * (len(COLUMNS) + 1))
    for name, row in results.items():
        cells = ["–" if c not in row else f"{row[c]:.3f}" if c not in ("train s", "train CPU s", "size MB", "predict ms/q")
                 else f"{row[c]:.{1 if c != 'predict ms/q' else 3}f}" for c in COLUMNS]
        print(f"| {name} | " + " | ".join(cells) + " |")


def demo(args: argparse.Namespace) -> None:
    skip = set(filter(None, args.skip.split(",")))
    problem = Problem()
    print(f"train {problem.X_train.shape[0]:,} x {problem.X_train.shape[1]:,} features, {problem.Y_train.shape[1]} labels; "
          f"test {problem.X_test.shape[0]:,}")
    results: dict[str, dict] = {}
    workdir = Path(tempfile.mkdtemp(prefix="bench_xreg_"))
    try:
        if "xreg" not in skip:
            results |= run_xreg(problem, workdir, args.threads)
        peers = {"Omikuji (Parabel)": lambda: run_omikuji(problem, workdir, args.omikuji_threads),
                 "napkinXC (PLT)": lambda: run_napkinxc(problem, workdir),
                 "PECOS XR-Linear": lambda: run_pecos(problem, workdir, args.pecos_python)}
        for name, run in peers.items():
            if name.split()[0].lower() in skip:
                continue
            try:
                results[name] = run()
                print(name, json.dumps(results[name]))
            except (ImportError, OSError, subprocess.CalledProcessError) as exc:
                print(f"{name}: not run ({type(exc).__name__}: {exc})")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(results)
    omikuji_row = results.get("Omikuji (Parabel)")
    if "XReg" in results and omikuji_row:
        print(f"XReg / Omikuji train time: {results['XReg']['train s'] / omikuji_row['train s']:.2f}x wall, "
              f"{results['XReg']['train CPU s'] / omikuji_row['train CPU s']:.2f}x CPU (XReg threads {args.threads}, "
              f"Omikuji {args.omikuji_threads}); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


# -- scale ---------------------------------------------------------------------------------


def scale_one(n_points: int, n_labels: int, n_features: int, test_points: int, trees: int) -> dict:
    """Generate, train and predict once; returns times and this process's peak memory."""
    from qcat.models.xreg import TfidfFeatures, XRegModel
    from qcat.training.xreg.features import from_csr
    from qcat.training.xreg.synthetic import generate
    from qcat.training.xreg.trainer import XRegConfig, fit_arrays

    started = time.perf_counter()
    X, Y = generate(n_points + test_points, n_labels, n_features, seed=0)
    generated = time.perf_counter() - started
    config = XRegConfig(trees=trees)
    started = time.perf_counter()
    trees_, tail = fit_arrays(X[:n_points], Y[:n_points], config, progress=lambda m: print("   ", m, flush=True))
    train_s = time.perf_counter() - started
    features = TfidfFeatures(tuple(), np.ones(n_features, np.float32))  # rows are given, never text
    model = XRegModel(labels=tuple(map(str, range(n_labels))), taxonomy=None, features=features, trees=trees_,
                      tail=tail, config={"beam": config.beam}, metrics={})
    rows = from_csr(X[n_points:])
    started = time.perf_counter()
    for start in range(0, rows.n, 4096):
        model.predict_rows(rows.take(np.arange(start, min(start + 4096, rows.n))), K)
    predict_ms = 1000 * (time.perf_counter() - started) / rows.n
    return {"points": n_points, "labels": n_labels, "features": n_features, "trees": trees,
            "generate s": round(generated, 1), "train s": round(train_s, 1), "predict ms/q": round(predict_ms, 3),
            "peak GiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),  # Linux: KiB
            "weights": int(sum(len(t.entry_weight) for t in trees_)), "model MB": round(model.size_bytes() / 1e6, 1)}


def plot_scale(results: list[dict], labels: int, predict_points: int, path: str) -> None:
    """Train time against N (at ``labels`` labels) and predict time against L (at
    ``predict_points`` points), as an SVG."""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    done = [r for r in results if "train s" in r]
    by_n = sorted((r["points"], r["train s"]) for r in done if r["labels"] == labels)
    by_l = sorted((r["labels"], r["predict ms/q"]) for r in done if r["points"] == predict_points)
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.plot(*zip(*by_n), marker="o")
    left.set(xscale="log", xlabel="training points N", ylabel="train s (3 trees, 1 thread)",
             title=f"train time vs N (L = {labels:,})")
    right.plot(*zip(*by_l), marker="o")
    right.set(xscale="log", xlabel="labels L", ylabel="predict ms / query", title=f"predict time vs L (N = {predict_points:,})")
    for axis in (left, right):
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)


def scale(args: argparse.Namespace) -> None:
    if args.from_json:
        results = [r for f in args.from_json.split(",") for r in json.loads(Path(f).read_text())]
        plot_scale(results, args.labels, args.predict_points, args.plot)
        return
    runs = [(int(n), int(args.labels)) for n in args.points.split(",")]
    runs += [(int(args.predict_points), int(l)) for l in args.predict_labels.split(",") if l]
    results = []
    for n_points, n_labels in runs:
        command = [sys.executable, __file__, "--scale-one", str(n_points), str(n_labels), "--features",
                   str(args.features), "--trees", str(args.trees)]
        print("$", " ".join(command[1:]), flush=True)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"  did not finish within {args.timeout} s")
            results.append({"points": n_points, "labels": n_labels, "timeout s": args.timeout})
            continue
        print(done.stdout, done.stderr[-2000:], flush=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if lines:
            results.append(json.loads(lines[-1]))
    print("| points N | labels L | trees | train s | peak GiB | predict ms/q | weights | model MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['points']:,} | {r['labels']:,} | {r.get('trees', '')} | {r.get('train s', 'timeout')} | "
              f"{r.get('peak GiB', '')} | {r.get('predict ms/q', '')} | {r.get('weights', '')} | {r.get('model MB', '')} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    if args.plot:
        plot_scale(results, args.labels, args.predict_points, args.plot)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip", default="", help="comma-separated: xreg, omikuji, napkinxc, pecos")
    parser.add_argument("--pecos-python", default="/tmp/pecos-venv/bin/python",
                        help="a Python with libpecos (numpy < 2), see docs/benchmarks.md")
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    parser.add_argument("--threads", type=int, default=1,
                        help="XReg's training threads (default 1)")
    parser.add_argument("--omikuji-threads", type=int, default=1,
                        help="Omikuji's training threads (default 1; napkinXC and PECOS always train on one)")
    parser.add_argument("--scale", action="store_true", help="the scale run on generated data")
    parser.add_argument("--points", default="100000,300000,1000000", help="scale: training points N (train time vs N)")
    parser.add_argument("--labels", type=int, default=100_000, help="scale: labels L of the train-time runs")
    parser.add_argument("--predict-labels", default="1000,10000", help="scale: more L values (predict time vs L)")
    parser.add_argument("--predict-points", type=int, default=100_000, help="scale: N of the predict-time runs")
    parser.add_argument("--features", type=int, default=200_000, help="scale: feature dimension D")
    parser.add_argument("--trees", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=1800, help="scale: seconds per run")
    parser.add_argument("--plot", default=None, help="scale: write the two curves to this SVG")
    parser.add_argument("--from-json", default=None, help="scale: plot these comma-separated result files, run nothing")
    parser.add_argument("--scale-one", nargs=2, type=int, metavar=("N", "L"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scale_one:
        print(json.dumps(scale_one(*args.scale_one, args.features, 10_000, args.trees)))
    elif args.scale:
        scale(args)
    else:
        demo(args)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
