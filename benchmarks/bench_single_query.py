"""One query at a time, in one process: what a search engine pays per query for the shipped model.

On the real-text test queries (1,000 whole held-out titles and 1,000 first-two-token cuts,
``real-title`` and ``real-2tok``), each model classifies one query per call, top 5, three
passes with the tokenizer's cache emptied before each (so normalization is paid every time):

- the shipped demo model (hybrid: NB + XReg blend) through the compiled single-query path
  (``Classifier.compile()``, as ``qcat serve`` loads it) and through the batch path with one
  query (what every single-query call paid before the compiled path);
- the same with ``precision=0.9`` (its node answer too: the top leaves summed up the tree, where
  the bundle has a node calibration);
- its own NB part (``--backend nb``), both ways, and its XReg part (``--backend xreg``) through the
  compiled path;
- any ``--xmlq DIR`` bundle (repeatable: e.g. the float, fp16 and int8 exports of one network)
  through its compiled path (``predict_one``: one onnxruntime call on a one-thread session);
- Omikuji (Parabel trees, the peer of benchmarks/bench_real_text.py, trained here on the demo
  training split) through its Python ``predict`` of one query, from the query text (tf-idf
  features included); ``--skip-omikuji`` leaves it out.

It prints p50 / p99 per query in ms over the three passes together and of the best pass (the pass
with the lowest p50: what the machine gives when nothing else disturbs it), and the ratios the
online target is stated in.

``--overrides N`` instead times the shipped model with N judged overrides (``qcat train ...
--judged FILE --overrides``; written with ``OverriddenModel.save``, the path ``save_bundle`` takes)
against the same model without them, the two in turn query by query: every other real-text query is
overridden (one or two categories), the rest of the N are other queries; p50 / p99 over all
queries and over the overridden and the other half apart.

``--batch-sizes`` instead times batches: µs per query through each model's batch path
(``predict``) and one by one through its compiled path (``predict_one``), for batches of 8, 100
and 1,000 of the same queries, for the demo model, its NB and XReg parts, and any ``--xmlq DIR``
bundle (what ``faster_one_by_one`` is set from).

    python benchmarks/bench_single_query.py [--skip-omikuji] [--xmlq DIR ...]
    python benchmarks/bench_single_query.py --batch-sizes [--xmlq DIR ...]
    python benchmarks/bench_single_query.py --overrides 10000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

PASSES = 3
BATCH_SIZES = (8, 100, 1000)
PER_SET = 1000
K = 5


def real_text_queries() -> list[str]:
    from qcat.training.data.corpus import Corpus

    corpus = Corpus.open()
    return [q for name in ("real-title", "real-2tok") for q in list(corpus.query_set(name, "test").queries)[:PER_SET]]


def per_query_ms(classify_one, queries: list[str]) -> np.ndarray:
    """Milliseconds of each call, ``(PASSES, queries)`` (the tokenizer's cache emptied before each pass)."""
    from qcat.text.normalize import _tokens

    for query in queries[:50]:  # first calls: page faults, lazily built indexes
        classify_one(query)
    times = []
    for _ in range(PASSES):
        _tokens.cache_clear()
        for query in queries:
            started = time.perf_counter()
            classify_one(query)
            times.append(time.perf_counter() - started)
    return 1000 * np.array(times).reshape(PASSES, len(queries))


def best_pass(times: np.ndarray) -> np.ndarray:
    return times[int(np.argmin(np.percentile(times, 50, axis=1)))]


def batch_sizes(models: dict, queries: list[str]) -> None:
    """µs per query, batch path against one by one, at each batch size (best of 3 runs)."""
    print("\n| model | batch size | batch path µs/query | one by one µs/query |\n|---|---:|---:|---:|")
    for name, model in models.items():
        model.predict_one(queries[0], K)
        for size in BATCH_SIZES:
            def batched():
                for start in range(0, len(queries), size):
                    model.predict(queries[start:start + size], K)

            def one_by_one():
                for query in queries:
                    model.predict_one(query, K)

            times = [best_of_3(run) / len(queries) * 1e6 for run in (batched, one_by_one)]
            print(f"| {name} | {size:,} | {times[0]:.0f} | {times[1]:.0f} |")


def best_of_3(run) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def with_overrides(queries: list[str], n: int) -> None:
    """The shipped model with and without ``n`` judged overrides, compiled, timed in turn query by query."""
    from qcat.bundles.demo import demo_model_dir
    from qcat.classifier import Classifier, load_model
    from qcat.models.overrides import OverriddenModel
    from qcat.text.normalize import _tokens, normalize

    demo = load_model(demo_model_dir())
    rng = np.random.default_rng(0)
    judged = [normalize(q) for q in queries[::2]]
    others = [f"judged query {i}" for i in range(max(0, n - len(set(judged))))]
    overrides = {}
    for query in judged + others:
        picks = rng.choice(len(demo.labels), size=int(rng.integers(1, 3)), replace=False)
        overrides[query] = [demo.labels[i] for i in picks]
    with tempfile.TemporaryDirectory(prefix="qcat-overrides-") as workdir:
        OverriddenModel(demo, overrides).save(Path(workdir) / "model")
        started = time.perf_counter()
        overridden = Classifier.load(Path(workdir) / "model").compile()
        print(f"bundle with {len(overrides):,} overrides loaded and compiled in {time.perf_counter() - started:.2f} s")
    plain = Classifier.load().compile()
    assert overridden.classify([queries[0]], K)[0].source == "judged"
    assert overridden.classify([queries[1]], K)[0].to_json() == plain.classify([queries[1]], K)[0].to_json()
    rows = {"shipped model, no overrides": plain,
            f"shipped model with {len(overrides):,} overrides": overridden}
    for classifier in rows.values():
        for query in queries[:50]:
            classifier.classify([query], K)
    times = {name: np.zeros((PASSES, len(queries))) for name in rows}
    pairs = list(rows.items())
    for run in range(PASSES):  # query by query, the two in turn (either first), so drift hits both alike
        for i, query in enumerate(queries):
            for name, classifier in (pairs if (i + run) % 2 else pairs[::-1]):
                _tokens.cache_clear()  # each call normalizes its query: the other's call left it cached
                started = time.perf_counter()
                classifier.classify([query], K)
                times[name][run, i] = time.perf_counter() - started
    hit = np.array([normalize(q) in overrides for q in queries])
    print(f"\n{hit.sum():,} of the {len(queries):,} queries are overridden; compiled single-query path, top {K}, "
          f"{PASSES} passes, the two in turn query by query; best pass: the pass with the lowest p50\n\n| model | p50 ms | p99 ms | "
          f"overridden p50 / p99 ms | others p50 / p99 ms | best pass p50 / p99 ms |\n|---|---:|---:|---:|---:|---:|")
    for name, ms in times.items():
        ms = ms * 1000
        best = best_pass(ms)
        print(f"| {name} | {np.percentile(ms, 50):.3f} | {np.percentile(ms, 99):.3f} | "
              f"{np.percentile(ms[:, hit], 50):.3f} / {np.percentile(ms[:, hit], 99):.3f} | "
              f"{np.percentile(ms[:, ~hit], 50):.3f} / {np.percentile(ms[:, ~hit], 99):.3f} | "
              f"{np.percentile(best, 50):.3f} / {np.percentile(best, 99):.3f} |")
    plain_ms, overridden_ms = (ms * 1000 for ms in times.values())
    difference = overridden_ms - plain_ms  # the same query, the same pass, one call after the other
    print(f"\nwith overrides minus without, the same query's calls side by side, median (25th-75th percentile) µs: "
          f"not overridden {1000 * np.median(difference[:, ~hit]):+.1f} "
          f"({1000 * np.percentile(difference[:, ~hit], 25):+.1f} to {1000 * np.percentile(difference[:, ~hit], 75):+.1f}), "
          f"overridden {1000 * np.median(difference[:, hit]):+.1f} "
          f"({1000 * np.percentile(difference[:, hit], 25):+.1f} to {1000 * np.percentile(difference[:, hit], 75):+.1f})")


def omikuji_peer():
    from bench_real_text import OmikujiPeer

    from qcat.training.data.corpus import Corpus

    dataset = Corpus.open().dataset("base")
    with tempfile.TemporaryDirectory(prefix="qcat-omikuji-") as workdir:
        started = time.perf_counter()
        with progress_bars_silenced():
            peer = OmikujiPeer.train(dataset.train, Path(workdir))
        print(f"Omikuji trained in {time.perf_counter() - started:.0f} s")
    return peer


@contextlib.contextmanager
def progress_bars_silenced():
    """Omikuji (Rust) draws its progress bars on file descriptor 2: send them to /dev/null."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-omikuji", action="store_true", help="leave the Omikuji peer out")
    parser.add_argument("--batch-sizes", action="store_true", help="instead: batch path against one by one")
    parser.add_argument("--overrides", type=int, default=None, metavar="N",
                        help="instead: the shipped model with N judged overrides against without")
    parser.add_argument("--xmlq", type=Path, action="append", default=[], metavar="DIR",
                        help="an XML-Q bundle to time too (repeatable)")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR",
                        help="any bundle to time too, e.g. a hybrid with XML-Q (repeatable)")
    args = parser.parse_args()
    from bench_real_text import parse_models

    others = parse_models(args.model)

    from qcat.classifier import Classifier

    queries = real_text_queries()
    if args.overrides is not None:
        print(f"bench_single_query --overrides {args.overrides}: {len(queries):,} real-text queries x {PASSES} passes; "
              f"{os.cpu_count()} CPUs, load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
        with_overrides(queries, args.overrides)
        print(f"load average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    if args.batch_sizes:
        demo = Classifier.load().compile().model
        models = {"demo hybrid": demo, "its NB part": demo.nb, "its XReg part": demo.part("xreg")}
        for directory in args.xmlq:
            models[f"XML-Q {directory}"] = Classifier.load(directory).compile().model
        print(f"bench_single_query --batch-sizes: {len(queries):,} real-text queries, top {K}, best of 3; "
              f"load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
        batch_sizes(models, queries)
        return
    print(f"bench_single_query: {len(queries):,} real-text queries x {PASSES} passes, top {K}; "
          f"{os.cpu_count()} CPUs, load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    started = time.perf_counter()
    hybrid = Classifier.load().compile()
    print(f"shipped model loaded and compiled in {time.perf_counter() - started:.2f} s "
          f"(numba's on-disk cache holds the kernels after the first run)")
    nb = Classifier.load(backend="nb").compile()
    xreg = Classifier.load(backend="xreg").compile()
    rows = {
        "shipped model (hybrid), compiled single-query path": lambda q: hybrid.classify([q], K),
        "shipped model (hybrid), batch path with one query": lambda q: hybrid.model.predict([q], K),
        "its NB part, compiled single-query path": lambda q: nb.classify([q], K),
        "its NB part, batch path with one query": lambda q: nb.model.predict([q], K),
        "its XReg part, compiled single-query path": lambda q: xreg.classify([q], K),
    }
    if hybrid.nodes is not None:  # the node answer too (qcat classify --precision 0.9, issue 52)
        rows["shipped model (hybrid), compiled single-query path, precision 0.9"] = \
            lambda q: hybrid.classify([q], K, precision=0.9)
    for directory in args.xmlq:
        xmlq = Classifier.load(directory).compile()
        rows[f"XML-Q {directory}, compiled single-query path"] = lambda q, xmlq=xmlq: xmlq.classify([q], K)
    for name, directory in others.items():
        other = Classifier.load(directory).compile()
        rows[f"{name}, compiled single-query path"] = lambda q, other=other: other.classify([q], K)
    if not args.skip_omikuji:
        peer = omikuji_peer()
        rows["Omikuji (Parabel), predict of one query"] = lambda q: peer.predict([q], K)
    results = {name: per_query_ms(classify_one, queries) for name, classify_one in rows.items()}
    print("\n| model, path | p50 ms | p99 ms | best pass p50 ms | best pass p99 ms |\n|---|---:|---:|---:|---:|")
    for name, times in results.items():
        best = best_pass(times)
        print(f"| {name} | {np.percentile(times, 50):.3f} | {np.percentile(times, 99):.3f} | "
              f"{np.percentile(best, 50):.3f} | {np.percentile(best, 99):.3f} |")
    p50 = {name: float(np.percentile(times, 50)) for name, times in results.items()}
    shipped = p50["shipped model (hybrid), compiled single-query path"]
    print(f"\nshipped model p50 / its NB part's p50: {shipped / p50['its NB part, compiled single-query path']:.2f}x "
          f"(both compiled), {shipped / p50['its NB part, batch path with one query']:.2f}x (NB's batch path)")
    print(f"shipped model, compiled vs batch path: {p50['shipped model (hybrid), batch path with one query'] / shipped:.1f}x faster")
    if "Omikuji (Parabel), predict of one query" in p50:
        print(f"shipped model p50 / Omikuji's: {shipped / p50['Omikuji (Parabel), predict of one query']:.2f}x")


if __name__ == "__main__":
    main()
