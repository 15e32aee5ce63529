"""``qcat data build-demo``: the demo corpus and the shipped demo model, from the catalog, in one
reproducible command (about 3 minutes on 2 cores)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from qcat.bundles.demo import demo_corpus_dir, demo_model_dir
from qcat.text.normalize import NORMALIZER
from qcat.training.commands.bundles import save_bundle
from qcat.training.commands.data_flags import print_objective
from qcat.training.commands.train import print_selection_row
from qcat.training.data.corpus import META_FILE, Corpus

HOLDOUT_FRACTION = 0.1  # share of the demo catalog's listings kept from the simulator (real-title sets)
REAL_QUERIES_FILE = "real_queries.csv"
DEMO_XREG_PRUNE = 1.0  # the demo's XReg drops |w| < 1: a 5 MB bundle, as accurate on real text (docs/benchmarks.md)


def build_demo(args: argparse.Namespace) -> int:
    """Catalog -> taxonomy -> simulated log (10% of the listings held out) -> corpus.json -> the
    demo model (NB + XReg hybrid chosen on the validation objective), reproducibly."""
    import shutil
    from datetime import date

    from qcat.training.clicklogs.logstats import format_stats, table1_stats
    from qcat.training.data.listings import load_catalog
    from qcat.training.data.real_text import holdout_split
    from qcat.training.simulator.simulate import (
        SimulationConfig,
        catalog_brand_queries,
        simulate_clicklog,
        write_intents,
        write_log,
    )

    started = time.perf_counter()
    corpus_dir = args.corpus_out or demo_corpus_dir()
    model_dir = args.model_out or demo_model_dir()
    if getattr(args, "model_only", False):
        return write_demo_model(Corpus.open(corpus_dir), model_dir, started, getattr(args, "catalog_source", "choose"))
    source = args.catalog or demo_corpus_dir() / "catalog.csv.gz"
    catalog = load_catalog(source)
    corpus_dir.mkdir(parents=True, exist_ok=True)
    if source.resolve() != (corpus_dir / "catalog.csv.gz").resolve():
        shutil.copyfile(source, corpus_dir / "catalog.csv.gz")
    taxonomy = catalog.taxonomy()  # every listing's category, held out or not
    taxonomy.save_tsv(corpus_dir / "taxonomy.tsv")
    if (demo_corpus_dir() / REAL_QUERIES_FILE).resolve() != (corpus_dir / REAL_QUERIES_FILE).resolve():
        shutil.copyfile(demo_corpus_dir() / REAL_QUERIES_FILE, corpus_dir / REAL_QUERIES_FILE)
    holdout = {"fraction": HOLDOUT_FRACTION, "seed": args.seed}
    simulated = holdout_split(catalog, holdout["fraction"], holdout["seed"]) == 0
    print(f"holding {int((~simulated).sum()):,} of {len(catalog):,} listings out of the simulator (real-text sets)")
    config = SimulationConfig(seed=args.seed)
    log = simulate_clicklog(catalog.subset(simulated), taxonomy, config)
    write_log(log, corpus_dir / "clicklog.parquet")
    write_intents(log.intent, corpus_dir / "intents.parquet")
    print(f"simulated {len(log):,} log rows ({time.perf_counter() - started:.1f} s)")
    start = date.fromisoformat(config.start_date)
    middle = date(start.year + (start.month + 5) // 12, (start.month + 5) % 12 + 1, start.day)
    end = start.replace(year=start.year + 1)
    meta = {
        "catalog": "catalog.csv.gz",
        "taxonomy": "taxonomy.tsv",
        "log": "clicklog.parquet",
        "intents": "intents.parquet",
        "real_queries": REAL_QUERIES_FILE,
        "holdout": holdout,
        "periods": {"candidate": [start.isoformat(), middle.isoformat()], "base": [middle.isoformat(), end.isoformat()]},
        "min_clicks": 3,
        "split_seed": args.seed,
        "split_fractions": [0.8, 0.1, 0.1],
        "simulation": {k: v for k, v in vars(config).items()},
        "normalizer": NORMALIZER,  # the query normalizer the simulator tokenized the titles with
    }
    (corpus_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    corpus = Corpus.open(corpus_dir)
    whole_year = corpus.ingest("all", taxonomy).table
    print("whole-year log statistics (eBay Table 1):")
    print(format_stats(table1_stats(whole_year, brands=catalog_brand_queries(catalog))))
    return write_demo_model(corpus, model_dir, started, getattr(args, "catalog_source", "choose"))


def write_demo_model(corpus, model_dir: Path, started: float, catalog: str = "choose") -> int:
    """Build the demo model's candidates (:func:`build_demo_models`) and ship, of those that keep
    the corpus and the model within :data:`SHIPPED_LIMIT`, the one with the higher validation
    objective (a tie keeps the log-only model)."""
    import shutil
    import tempfile

    candidates = build_demo_models(corpus, catalog)
    corpus_bytes = _bytes(corpus.directory)
    with tempfile.TemporaryDirectory(prefix="qcat-demo-", dir=model_dir.parent) as scratch:
        fits, lines = {}, []
        for name, (model, dataset, also_seen, nodes) in candidates.items():
            directory = Path(scratch) / name.replace(" ", "_").replace("+", "and")
            save_bundle(model, directory, dataset, also_seen, nodes=nodes)
            total = corpus_bytes + _bytes(directory)
            objective = hybrid_objective(model.metrics)
            lines.append(f"{name}: validation objective {objective:.4f}, corpus + model {total / 2**20:.1f} MiB")
            if total < SHIPPED_LIMIT:
                fits[name] = (objective, name == "log", directory, model)
        if not fits:
            raise SystemExit("no demo model candidate keeps the corpus and model under 25 MiB:\n" + "\n".join(lines))
        best = max(fits, key=lambda name: fits[name][:2])
        print("demo model candidates: " + "; ".join(lines) + f" -> ships {best}"
              + ("" if len(fits) == len(candidates) else " (the others exceed 25 MiB)"))
        if model_dir.exists():
            shutil.rmtree(model_dir)
        shutil.move(str(fits[best][2]), str(model_dir))
    model = fits[best][3]
    print(f"demo model: {json.dumps(model.metrics['selection']['chosen'])}, test {json.dumps(model.metrics['test'])} "
          f"-> {model_dir}")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


SHIPPED_LIMIT = 25 * 2**20  # bytes: the demo corpus and model together (tests/test_demo_corpus.py)


def _bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file())


def build_demo_models(corpus, catalog: str = "choose") -> dict:
    """The demo model's candidates, name -> (hybrid, dataset, also-seen fingerprints)
    (:func:`build_hybrid`): NB and XReg trained on the base period, and the hybrid of the two
    that wins the validation objective (:mod:`qcat.training.selection.objective`), every part calibrated.
    ``catalog``: ``log`` (the simulated log alone), ``both`` (the log plus the corpus's own
    catalog, :mod:`qcat.training.catalog.data`, held-out listings excluded) or ``choose`` (both
    candidates; :func:`write_demo_model` ships one)."""
    from qcat.training.catalog.data import CatalogData

    if catalog not in CATALOG_CHOICES:
        raise ValueError(f"catalog must be one of {CATALOG_CHOICES}, got {catalog!r}")
    built = {}
    if catalog in ("choose", "log"):
        built["log"] = build_hybrid(corpus)
    if catalog in ("choose", "both"):
        built["log + catalog"] = build_hybrid(corpus, CatalogData(corpus.path("catalog"), corpus, period="base"))
    return built


CATALOG_CHOICES = ("choose", "log", "both")


def hybrid_objective(metrics: dict) -> float:
    """The validation objective of a hybrid's chosen row, from its ``metrics``
    (:func:`qcat.training.selection.objective.select_hybrid`)."""
    chosen = metrics["selection"]["chosen"]
    return next(row["objective"] for row in metrics["selection"]["table"]
                if all(row[key] == value for key, value in chosen.items()))


def _part_settings(fixed: dict | None, part: str) -> dict:
    """The catalog settings fixed for one part: ``fixed[part]`` where given per part, else ``fixed``."""
    fixed = fixed or {}
    return dict(fixed[part]) if part in fixed else {k: v for k, v in fixed.items() if k not in ("nb", "xreg")}


def build_hybrid(corpus, catalog=None, fixed: dict | None = None, log=print, judged=None,
                 judged_weight: float | None = None, routing: tuple[int, float] | None = None):
    """NB and XReg (|w| >= :data:`DEMO_XREG_PRUNE`) on the corpus's base period, or with ``catalog``
    (a :class:`qcat.training.catalog.data.CatalogData`: catalog settings chosen per part on the objective
    except those ``fixed``, given for both parts or per part as ``{"nb": ..., "xreg": ...}``), and
    the hybrid of the two chosen on the objective. Returns the hybrid, the NB part's dataset and
    the fingerprints of the XReg part's seen queries (and of the judged queries, with ``judged``), and
    the hybrid's node calibration (:func:`qcat.training.commands.bundles.fit_nodes`, on the same sets).

    ``judged``: graded gold files (a list of paths) or a :class:`qcat.training.data.judged.Judged`,
    as ``qcat train ... --judged``: their queries leave the validation sets (the hybrid's selection
    too) and the test split, both parts train on their exact and acceptable pairs, XReg drops the
    pairs graded wrong; ``judged_weight`` the clicks of an exact pair, or None to choose it per part
    (:mod:`qcat.training.commands.judged`). Each part's ``data.judged`` records the files and weight.
    ``routing``: ``(cutoff, blend)`` to keep instead of choosing the hybrid's routing (a benchmark
    that holds the shipped routing while the parts learn)."""
    from qcat.models.hybrid import CUTOFFS
    from qcat.training.commands.bundles import fit_nodes, seen_queries
    from qcat.training.commands.judged import JudgedRun, fit_judged, read_and_exclude
    from qcat.training.data.judged import Judged, without_judged
    from qcat.training.data.provenance import catalog_source, corpus_source, fingerprints
    from qcat.training.nb import trainer as nb_trainer
    from qcat.training.selection.calibrate import fit_calibration
    from qcat.training.selection.objective import BLENDS, forget, remember, select_hybrid, validation_sets
    from qcat.training.selection.table_metrics import evaluate_pr
    from qcat.training.xreg.trainer import XRegConfig
    from qcat.training.xreg.trainer import fit as fit_xreg

    dataset = corpus.dataset("base")
    sets = validation_sets(dataset if catalog is None else catalog.dataset()[0], catalog or corpus)
    data = corpus_source(corpus, "base")
    if isinstance(judged, Judged):
        sets = without_judged(sets, judged)[0]
    elif judged is not None:
        paths = [judged] if isinstance(judged, (str, Path)) else judged
        judged, sets, _ = read_and_exclude([Path(p) for p in paths], dataset.taxonomy, sets, log)
    print_objective(sets)

    def nb_fit(train, sets):
        return nb_trainer.fit(train, sets=sets)

    def xreg_fit(train, sets):
        return fit_xreg(train, XRegConfig(prune=DEMO_XREG_PRUNE), progress=lambda message: log("  XReg " + message))

    if catalog is not None:
        data = data | catalog_source(catalog.catalog, corpus, catalog.catalog_only)
    nb, nb_data, nb_record, nb_judged = fit_judged(nb_fit, dataset, sets, judged, judged_weight, False, "NB", catalog,
                                                   _part_settings(fixed, "nb"), log)
    xreg, xreg_data, xreg_record, xreg_judged = fit_judged(xreg_fit, dataset, sets, judged, judged_weight, True,
                                                           "XReg", catalog, _part_settings(fixed, "xreg"), log)
    parts_data = {"nb": data, "xreg": data}
    for part, record, judged_record in (("nb", nb_record, nb_judged), ("xreg", xreg_record, xreg_judged)):
        parts_data[part] = data | ({"catalog_training": record} if record is not None else {}) | (
            {"judged": judged_record} if judged_record else {})
    nb.config["data"], xreg.config["data"] = parts_data["nb"], parts_data["xreg"]
    log(f"NB: threshold {nb.config['threshold']:g}, alpha {nb.config['alpha']:g}")
    xreg.calibration = fit_calibration(xreg, sets)
    if judged is not None:
        data = data | {"judged": {"files": [f.as_dict() for f in judged.files], "queries": len(judged.grades)}}
    cutoffs, blends = ((routing[0],), (routing[1],)) if routing else (CUTOFFS, BLENDS)
    hybrid = select_hybrid(remember(nb), {"xreg": remember(xreg)}, sets, nb.taxonomy.merge(xreg.taxonomy), cutoffs, blends,
                           config={"data": data}, progress=print_selection_row(sets))
    test = nb_data.test
    for part in (hybrid.nb, *hybrid.longs):
        part.metrics["test"] = evaluate_pr(part, test)
    hybrid.metrics["test"] = evaluate_pr(hybrid, test)
    nodes = fit_nodes(hybrid, sets, log)  # before forget: the parts answer the validation sets from memory
    hybrid = forget(hybrid)
    return hybrid, nb_data, [fingerprints(seen_queries(xreg_data))] + JudgedRun(judged).also_seen(), nodes
