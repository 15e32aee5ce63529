"""Simulated judges for a category session of the demo corpus: SIMULATED grades, for demos and tests.

Two steps, each a subcommand:

- ``traffic``: a traffic file for ``qcat judge create-session --kind categories --traffic``: a
  seeded sample of a real-text set of the demo corpus (``real-title``: whole product titles of
  listings held out of training; ``real-2tok``: their first two tokens), one query a line, from its
  ``--split``: ``test`` (the default) or ``validation`` (the held-out listings the models are tuned
  on, never tested on, less any title the test split has too: the pool a learning-curve benchmark
  chooses queries to judge from, keeping the test titles apart);
- ``judge``: simulated judges grade every query of a category session. Each takes queries through
  the same claims as the app (:func:`qcat.judging.grading.assignment.next_query`) and submits
  through the same code (:func:`qcat.judging.grading.judgments.submit`), so claims, judges per
  query and the store behave as with people.

What a simulated judge grades is made up from the corpus, per query and category:

- 3 exact: the category of the held-out listing the query was made from (real-text sets, validation
  and test), else
  the query's most clicked category in the click log (every period);
- 2 acceptable: a category the corpus's confusable map pairs with an exact one, or with at least
  10% of the query's clicks;
- 1 related: a category under the same parent node as a category graded 2 or more;
- 0 wrong: anything else (and every category of a query the corpus knows nothing of).

Each judge then moves a grade one step up or down with probability ``--noise`` (seeded per judge),
so the judges disagree now and then. The figures a report gives from these grades describe this
made-up judging, not people: say "simulated" wherever they are shown.

    python benchmarks/simulate_category_judges.py traffic --set real-title --queries 50 --out traffic.txt
    python benchmarks/simulate_category_judges.py judge --url demo-judging.db --session "demo categories" --judges 3
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np

from qcat.errors import InputError


SETS = ("real-title", "real-2tok")
SPLITS = ("validation", "test")  # the held-out listings' splits (qcat.training.data.real_text.HOLDOUT_SPLITS)


def true_grades(corpus) -> tuple[dict[str, dict[str, int]], dict[str, str | None]]:
    """Per query, its exact and acceptable categories as the corpus tells them, and each
    category's parent."""
    taxonomy = corpus.taxonomy()
    confusable = corpus.confusable()
    out: dict[str, dict[str, int]] = {}

    def grades_from(table) -> dict[str, dict[str, int]]:
        clicks: dict[str, dict[str, float]] = defaultdict(dict)
        for q, c, n in zip(table.pair_query, table.pair_category, table.clicks):
            clicks[table.queries[q]][table.categories[c]] = clicks[table.queries[q]].get(table.categories[c], 0) + float(n)
        graded = {}
        for query, by_category in clicks.items():
            total = sum(by_category.values())
            top = max(by_category, key=lambda c: (by_category[c], c))
            grades = {c: 2 for c, n in by_category.items() if n >= 0.1 * total}
            if confusable is not None:
                grades.update({partner: 2 for partner in confusable.partners(top)})
            grades[top] = 3
            graded[query] = grades
        return graded

    out.update(grades_from(corpus.ingest("all", min_clicks=1).table))
    # A title's own listing says more than the log: it comes last, and wins (the test sets last of all).
    for split in SPLITS:
        for name in SETS:
            out.update(grades_from(corpus.query_set(name, split, taxonomy)))
    return out, {c: taxonomy.parent(c) for c in taxonomy.ids}


def write_traffic(name: str, n: int, path, seed: int = 0, corpus_dir=None, split: str = "test") -> int:
    """``n`` queries of the corpus's real-text set ``name`` (its ``split``: test or validation),
    seeded, one a line. The validation split leaves out the titles the test split has too (the same
    title on listings of both: 4 of real-title's 1,551 in the demo corpus), so a pool drawn from it
    never holds a test query."""
    from qcat.training.data.corpus import Corpus

    corpus = Corpus.open(corpus_dir)
    queries = set(corpus.query_set(name, split).queries.tolist())
    if split != "test":
        queries -= set(corpus.query_set(name, "test").queries.tolist())
    queries = sorted(queries)
    chosen = np.random.default_rng(seed).choice(len(queries), size=min(n, len(queries)), replace=False)
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(f"{queries[i]}\n" for i in sorted(chosen))
    return len(chosen)


def grade(category: str, truth: dict[str, int], parent: dict[str, str | None]) -> int:
    if category in truth:
        return truth[category]
    return 1 if any(parent.get(category) == parent.get(c) for c, g in truth.items() if g >= 2) else 0


def simulate(url: str, session_key: str, judges: int, noise: float, seed: int, corpus_dir=None,
             say=lambda text: print(text, file=sys.stderr)) -> dict[str, int]:
    from qcat.judging.grading import assignment, judgments
    from qcat.judging.grading.judges import add_judge
    from qcat.judging.grading.sessions import find_session
    from qcat.judging.store.connection import open_store
    from qcat.training.data.corpus import Corpus

    store = open_store(url)
    with store.sessions() as session:
        record = find_session(session, session_key)
        session_id, kind = record.id, record.kind
    if kind != "categories":
        raise InputError(f"session {session_key!r} grades search results: this simulates category judges only")
    truth, parent = true_grades(Corpus.open(corpus_dir))
    submitted = {}
    for j in range(judges):
        judge, _ = add_judge(store, f"simulated judge {session_id}-{j + 1}")
        rng = np.random.default_rng([seed, j])
        count = 0
        while (shown := assignment.next_query(store, judge.id, session_id)) is not None:
            given = {}
            for item in shown.left:
                g = grade(item.listing_id, truth.get(shown.text, {}), parent)
                if rng.random() < noise:
                    g = int(np.clip(g + rng.choice((-1, 1)), 0, 3))
                given[(item.listing_id, "left")] = g
            judgments.submit(store, judge.id, shown.query_id, given, resubmit=False)
            count += 1
        submitted[judge.name] = count
        say(f"{judge.name}: graded {count:,} queries (SIMULATED)")
    store.dispose()
    return submitted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    traffic = steps.add_parser("traffic", help="a traffic file sampled from a real-text set of the corpus")
    traffic.add_argument("--set", choices=SETS, default="real-title")
    traffic.add_argument("--split", choices=SPLITS, default="test",
                         help="the held-out listings' split to sample: test (default) or validation (a pool to choose "
                              "queries to judge from, the test titles kept apart)")
    traffic.add_argument("--queries", type=int, default=50)
    traffic.add_argument("--out", required=True, help="the traffic file to write (one query a line)")
    judge = steps.add_parser("judge", help="simulated judges grade every query of a category session")
    judge.add_argument("--url", required=True, help="the judging store (URL or SQLite file)")
    judge.add_argument("--session", required=True, help="a category session of the demo corpus (id or name)")
    judge.add_argument("--judges", type=int, default=3, help="simulated judges to add (default 3)")
    judge.add_argument("--noise", type=float, default=0.15, help="chance a judge moves a grade by one (default 0.15)")
    for step in (traffic, judge):
        step.add_argument("--seed", type=int, default=0)
        step.add_argument("--corpus", default=None, help="corpus directory (default: the demo corpus)")
    args = parser.parse_args(argv)
    try:
        if args.step == "traffic":
            n = write_traffic(args.set, args.queries, args.out, args.seed, args.corpus, args.split)
            print(f"wrote {n:,} {args.set} {args.split} queries to {args.out}", file=sys.stderr)
        else:
            simulate(args.url, args.session, args.judges, args.noise, args.seed, args.corpus)
    except InputError as exc:
        print(f"simulate_category_judges: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
