"""``qcat data build-demo``: the demo corpus and the shipped demo model, from the catalog, in one
reproducible command (about 3 minutes on 2 cores)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from training.cli import print_objective, print_selection_row, save_bundle
from training.corpus import DEMO_DIR, META_FILE, Corpus

HOLDOUT_FRACTION = 0.1  # share of the demo catalog's listings kept from the simulator (real-title sets)
REAL_QUERIES_FILE = "real_queries.csv"
DEMO_XREG_PRUNE = 1.0  # the demo's XReg drops |w| < 1: a 5 MB bundle, as accurate on real text (docs/benchmarks.md)


def build_demo(args: argparse.Namespace) -> int:
    """Catalog -> taxonomy -> simulated log (10% of the listings held out) -> corpus.json -> the
    demo model (NB + XReg hybrid chosen on the validation objective), reproducibly."""
    import shutil
    from datetime import date

    from training.catalog import load_catalog
    from training.logstats import format_stats, table1_stats
    from training.real_text import holdout_split
    from training.simulate import SimulationConfig, catalog_brand_queries, simulate_clicklog, write_intents, write_log

    started = time.perf_counter()
    corpus_dir = args.corpus_out or DEMO_DIR
    model_dir = args.model_out or Path(__file__).resolve().parent.parent / "qcat" / "demo_model"
    if getattr(args, "model_only", False):
        return write_demo_model(Corpus.open(corpus_dir), model_dir, started)
    source = args.catalog or DEMO_DIR / "catalog.csv.gz"
    catalog = load_catalog(source)
    corpus_dir.mkdir(parents=True, exist_ok=True)
    if source.resolve() != (corpus_dir / "catalog.csv.gz").resolve():
        shutil.copyfile(source, corpus_dir / "catalog.csv.gz")
    taxonomy = catalog.taxonomy()  # every listing's category, held out or not
    taxonomy.save_tsv(corpus_dir / "taxonomy.tsv")
    if (DEMO_DIR / REAL_QUERIES_FILE).resolve() != (corpus_dir / REAL_QUERIES_FILE).resolve():
        shutil.copyfile(DEMO_DIR / REAL_QUERIES_FILE, corpus_dir / REAL_QUERIES_FILE)
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
    }
    (corpus_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    corpus = Corpus.open(corpus_dir)
    whole_year = corpus.ingest("all", taxonomy).table
    print("whole-year log statistics (eBay Table 1):")
    print(format_stats(table1_stats(whole_year, brands=catalog_brand_queries(catalog))))
    return write_demo_model(corpus, model_dir, started)


def write_demo_model(corpus, model_dir: Path, started: float) -> int:
    import shutil

    model, dataset = build_demo_model(corpus)
    if model_dir.exists():
        shutil.rmtree(model_dir)
    save_bundle(model, model_dir, dataset)
    print(f"demo model: {json.dumps(model.metrics['selection']['chosen'])}, test {json.dumps(model.metrics['test'])} "
          f"-> {model_dir}")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


def build_demo_model(corpus):
    """The shipped model: NB and XReg trained on the base period, and the hybrid of the two
    that wins the validation objective (:mod:`training.selection`), every part calibrated;
    returned with the dataset it was trained on."""
    from qcat.hybrid import CUTOFFS
    from training import nb_trainer
    from training.calibrate import fit_calibration
    from training.provenance import corpus_source
    from training.selection import select_hybrid, validation_sets
    from training.table_metrics import evaluate_pr
    from training.xreg.trainer import XRegConfig
    from training.xreg.trainer import fit as fit_xreg

    dataset = corpus.dataset("base")
    sets = validation_sets(dataset, corpus)
    data = corpus_source(corpus, "base")
    print_objective(sets)
    nb = nb_trainer.fit(dataset, sets=sets)
    nb.config["data"] = data
    print(f"NB: threshold {nb.config['threshold']:g}, alpha {nb.config['alpha']:g}")
    xreg = fit_xreg(dataset, XRegConfig(prune=DEMO_XREG_PRUNE), progress=lambda message: print("  XReg " + message))
    xreg.config["data"] = data
    xreg.calibration = fit_calibration(xreg, sets)
    hybrid = select_hybrid(nb, {"xreg": xreg}, sets, nb.taxonomy.merge(xreg.taxonomy), CUTOFFS,
                           config={"data": data}, progress=print_selection_row(sets))
    for part in (hybrid.nb, hybrid.long):
        part.metrics["test"] = evaluate_pr(part, dataset.test)
    hybrid.metrics["test"] = evaluate_pr(hybrid, dataset.test)
    return hybrid, dataset
