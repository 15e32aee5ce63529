"""Taxonomy files read through the input layer (:func:`load_taxonomy`): a TSV/CSV table, Google's
``ID - A > B`` lines or Best Buy's category JSON, the format told from the name or the first line;
every error names the file and the line or record."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from qcat.errors import InputError, TaxonomyError, shown
from qcat.inputs import COMMENTS_ANYWHERE, COMMENTS_NONE, Column, FileSchema, read_bytes, table_from_bytes
from qcat.taxonomy.tree import SEPARATOR, Taxonomy, check_tree

FORMATS = ("tsv", "csv", "google", "bestbuy")
_GOOGLE_LINE = re.compile(r"^\s*(\d+)\s+-\s+(.+?)\s*$")


def detect_format(path: Path, head: str) -> str:
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".json"):
        return "bestbuy"
    if name.endswith(".tsv"):
        return "tsv"
    if name.endswith(".csv"):
        return "csv"
    first = next((line for line in head.splitlines() if line.strip()), "")
    if first.startswith("#") or _GOOGLE_LINE.match(first):
        return "google"
    return "tsv" if "\t" in first else "csv"


TAXONOMY_TABLE = FileSchema(
    kind="taxonomy table", flag="--taxonomy", delimiter="\t", delimiters={".csv": ","}, comments=COMMENTS_NONE,
    match_queries=False,
    columns=(Column("id", "text", True, "the node's id"),
             Column("path", "text", True, "its full path, A > B > C"),
             Column("parent", "text", False, "its parent's id (empty: a root)")))
GOOGLE_LINES = FileSchema(kind="Google taxonomy", flag="--taxonomy", delimiter=None, header="none",
                          comments=COMMENTS_ANYWHERE, match_queries=False,
                          columns=(Column("line", "text", True, "ID - A > B > C"),))


def load_taxonomy(path: str | Path, fmt: str | None = None, flag: str = "--taxonomy") -> Taxonomy:
    """Load a taxonomy file through the input layer; ``fmt`` is one of :data:`FORMATS` or None to
    detect it. Errors name the file and line (or record)."""
    try:
        path, raw, sha256 = read_bytes(path, flag)
    except InputError as exc:
        raise TaxonomyError(str(exc)) from None
    where = f"{flag} {path}"
    if fmt is None:
        head = raw[:4096].decode("utf-8", "replace")
        fmt = detect_format(path, head)
    if fmt not in FORMATS:
        raise TaxonomyError(f"unknown taxonomy format {fmt!r}; expected one of {', '.join(FORMATS)}")
    try:
        if fmt == "bestbuy":
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TaxonomyError(f"{where}:{raw[: exc.start].count(chr(10).encode()) + 1}: not valid UTF-8") from None
            ids, paths, parent_ids, places = _parse_bestbuy(text, where)
        else:
            table = table_from_bytes(path, raw, sha256, _table_schema(fmt), flag, allow_empty=True)
            ids, paths, parent_ids, places = (_parse_google if fmt == "google" else _parse_table)(table)
    except TaxonomyError:
        raise
    except InputError as exc:
        raise TaxonomyError(str(exc)) from None
    if not ids:
        raise TaxonomyError(f"{where}: holds no categories")
    try:
        if parent_ids is None:
            return Taxonomy.from_path_tuples(tuple(ids), tuple(paths))
        position = {}
        for i, node_id in enumerate(ids):
            if node_id in position:
                raise TaxonomyError(f"{places[i]}: id {node_id!r} appears twice (first at {places[position[node_id]]})")
            position[node_id] = i
        parents = []
        for i, (node_id, parent_id) in enumerate(zip(ids, parent_ids)):
            if parent_id and parent_id not in position:
                raise TaxonomyError(f"{places[i]}: node {node_id!r} names parent {parent_id!r}, which is not in the file")
            parents.append(position[parent_id] if parent_id else -1)
        check_tree(ids, paths, parents, where=lambda i: f"{places[i]}: node {ids[i]!r}")
        return Taxonomy(tuple(ids), tuple(paths), tuple(parents))
    except TaxonomyError as exc:
        message = str(exc)
        raise TaxonomyError(message if message.startswith(where) else f"{where}: {message}") from None


def _split_path(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(SEPARATOR.strip()))


def _table_schema(fmt: str) -> FileSchema:
    """The schema a taxonomy of format ``fmt`` is read by (the delimiter by ``fmt``, not by the name)."""
    if fmt == "google":
        return GOOGLE_LINES
    return replace(TAXONOMY_TABLE, delimiter="\t" if fmt == "tsv" else ",", delimiters={})


def _parse_table(table):
    """A TSV/CSV taxonomy read by :data:`TAXONOMY_TABLE`: ids, paths, parent ids (None without the
    column) and each row's place."""
    ids = [str(row["id"]) for row in table.rows]
    paths = [_split_path(str(row["path"])) for row in table.rows]
    places = [table.where(row.line) for row in table.rows]
    parent_ids = [str(row["parent"] or "") for row in table.rows] if "parent" in table.header else None
    return ids, paths, parent_ids, places


def _parse_google(table):
    """Google's ``ID - A > B`` lines (``#`` lines are comments), read by :data:`GOOGLE_LINES`."""
    ids, paths = [], []
    for row in table.rows:
        match = _GOOGLE_LINE.match(str(row["line"]))
        if not match:
            raise TaxonomyError(f"{table.where(row.line)}: expected 'ID - A > B', got {shown(row['line'])}")
        ids.append(match.group(1))
        paths.append(_split_path(match.group(2)))
    return ids, paths, None, None


def _parse_bestbuy(text: str, where: str):
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaxonomyError(f"{where}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(records, list):
        raise TaxonomyError(f"{where}: expected a JSON list of categories")
    ids, paths, parent_ids, places = [], [], [], []
    for n, record in enumerate(records, start=1):
        try:
            node_id = str(record["id"]).strip()
            steps = record["path"]
            names = tuple(str(step["name"]).strip() for step in steps)
            parent_id = str(steps[-2]["id"]).strip() if len(steps) > 1 else ""
        except (KeyError, TypeError, IndexError):
            raise TaxonomyError(f"{where}: record {n}: needs 'id' and a non-empty 'path' of {{'id', 'name'}}") from None
        ids.append(node_id)
        paths.append(names)
        parent_ids.append(parent_id)
        places.append(f"{where}: record {n}")
    # Best Buy's file names some ancestors (id and name) inside other records' paths
    # without listing them as records of their own; they are nodes all the same.
    listed = set(ids)
    for n, record in enumerate(records, start=1):
        steps = record["path"]
        for depth, step in enumerate(steps[:-1]):
            step_id = str(step["id"]).strip()
            if step_id not in listed:
                listed.add(step_id)
                ids.append(step_id)
                paths.append(tuple(str(s["name"]).strip() for s in steps[: depth + 1]))
                parent_ids.append(str(steps[depth - 1]["id"]).strip() if depth else "")
                places.append(f"{where}: step {depth + 1} of record {n}'s path")
    return ids, paths, parent_ids, places
