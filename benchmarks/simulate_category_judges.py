"""Simulated judges for a category session of the demo corpus: SIMULATED grades, for demos and tests.

Each simulated judge signs nothing in: it takes queries through the same claims as the app
(:func:`qcat.judging.grading.assignment.next_query`) and submits grades through the same code
(:func:`qcat.judging.grading.judgments.submit`), so claims, judges per query and the store behave
as with people. What it grades is made up from the demo corpus's click log (every period), per
query and category:

- 3 exact: the query's most clicked category;
- 2 acceptable: a category with at least 10% of the query's clicks, or one the corpus's confusable
  map pairs with the most clicked one;
- 1 related: a category under the same parent node as a category graded 2 or more;
- 0 wrong: anything else (and every category of a query without clicks in the log).

Each judge then moves a grade one step up or down with probability ``--noise`` (seeded per judge),
so the judges disagree now and then. The figures a report gives from these grades describe this
made-up judging, not people: say "simulated" wherever they are shown.

    python benchmarks/simulate_category_judges.py --url demo-judging.db --session "demo categories" --judges 3
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np

from qcat.errors import InputError


def true_grades(corpus) -> tuple[dict[str, dict[str, int]], dict[str, str | None]]:
    """Per query, its categories' click-derived grades (exact and acceptable only), and each
    category's parent."""
    taxonomy = corpus.taxonomy()
    table = corpus.ingest("all", min_clicks=1).table
    clicks: dict[str, dict[str, float]] = defaultdict(dict)
    for q, c, n in zip(table.pair_query, table.pair_category, table.clicks):
        clicks[table.queries[q]][table.categories[c]] = float(n)
    confusable = corpus.confusable()
    out: dict[str, dict[str, int]] = {}
    for query, by_category in clicks.items():
        total = sum(by_category.values())
        top = max(by_category, key=lambda c: (by_category[c], c))
        grades = {c: 2 for c, n in by_category.items() if n >= 0.1 * total}
        if confusable is not None:
            grades.update({partner: 2 for partner in confusable.partners(top)})
        grades[top] = 3
        out[query] = grades
    return out, {c: taxonomy.parent(c) for c in taxonomy.ids}


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
    parser.add_argument("--url", required=True, help="the judging store (URL or SQLite file)")
    parser.add_argument("--session", required=True, help="a category session of the demo corpus (id or name)")
    parser.add_argument("--judges", type=int, default=3, help="simulated judges to add (default 3)")
    parser.add_argument("--noise", type=float, default=0.15, help="chance a judge moves a grade by one (default 0.15)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", default=None, help="corpus directory (default: the demo corpus)")
    args = parser.parse_args(argv)
    try:
        simulate(args.url, args.session, args.judges, args.noise, args.seed, args.corpus)
    except InputError as exc:
        print(f"simulate_category_judges: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
