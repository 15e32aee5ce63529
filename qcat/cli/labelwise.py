"""``qcat labelwise CATEGORY --queries FILE``: the queries of a file most relevant to a category
(XReg's labelwise inference)."""

from __future__ import annotations

import sys
from pathlib import Path

from qcat.console.output import json_line
from qcat.inputs.schema import COMMENTS_NONE, Column, FileSchema

# `qcat labelwise --queries FILE`: a query per line (a line starting with "#" is a query too).
QUERY_FILE = FileSchema(kind="queries", flag="--queries", delimiter=None, header="none", comments=COMMENTS_NONE,
                        match_queries=False, columns=(Column("query", "query", True, "a query"),))


def read_query_file(path: Path) -> tuple[list[str], list[int]]:
    """Queries of a file, one per line, with their line numbers, read through the input layer
    (:data:`QUERY_FILE`); blank lines and lines that are no usable query (not valid UTF-8, empty
    after normalization, too long) are skipped and reported on stderr, each of the first five with
    its line and the input layer's reason (the byte offset of bad UTF-8, as every reader says it)."""
    from qcat.inputs import SKIP, read_table

    table = read_table(path, QUERY_FILE, on_bad=SKIP)
    skipped = table.blank_lines + len(table.skipped)
    if skipped:
        examples = "; ".join(f"line {bad.line}: {bad.why}" for bad in table.skipped[:5]) + \
            ("; ..." if len(table.skipped) > 5 else "")
        print(f"qcat: skipped {skipped} line(s) of {path}: {table.blank_lines} blank, {len(table.skipped)} unusable"
              f"{' (' + examples + ')' if examples else ''}", file=sys.stderr)
    return [row.query.text for row in table.rows], [row.line for row in table.rows]


def run_labelwise(args) -> int:
    from qcat.classifier import default_model_dir, load_model
    from qcat.errors import InputError

    if args.n < 1:
        raise InputError(f"-n must be at least 1, got {args.n}")
    if args.factor is not None and not args.factor > 0:
        raise InputError(f"--factor must be positive, got {args.factor}")
    directory = args.model or default_model_dir()
    model = load_model(directory)
    if model.backend == "hybrid" and "xreg" in model.parts:
        model = model.part("xreg")
    if model.backend != "xreg":
        raise InputError(f"{directory} is a {model.backend} model: labelwise inference needs an xreg bundle "
                         f"(or a hybrid with an xreg part)")
    category = model.taxonomy.resolve(args.category)
    if category is None or category not in model.labels:
        raise InputError(f"category {args.category!r} is not one of the {len(model.labels):,} categories of {directory}")
    queries, numbers = read_query_file(args.queries)
    factor = args.factor if args.factor is not None else float(model.config.get("factor", 4.0))
    ranked = model.labelwise(category, queries, args.n, factor)
    path = model.taxonomy.path_of(category)
    if args.json:
        print(json_line({"category": category, "path": path, "queries": [
            {"query": queries[i], "line": numbers[i], "score": round(score, 6)} for i, score in ranked]}))
        return 0
    print(f"{category}  {path}  [xreg labelwise, F={factor:g}, {len(queries):,} queries]")
    for rank, (i, score) in enumerate(ranked, start=1):
        print(f"  {rank:>2}. {score:.3f}  {queries[i]}")
    return 0
