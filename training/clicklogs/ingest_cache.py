"""A cache of ingested click logs, for the commands that read the same log one after another.

``qcat train nb``, ``qcat train hybrid`` and ``qcat evaluate`` each ingest their corpus's log
(the demo's base period: 2 million rows, about 8 CPU-seconds). With ``QCAT_INGEST_CACHE`` set
to a directory, :func:`cached_ingest` keeps each result there and the next command with the same
input reads it back in a fraction of a second. The key is everything the result depends on: the
log's bytes (sha256), the taxonomy's content hash, the period, the click threshold, the
internal-node rule, the normalizer's version and qcat's version; a log edited in place gets a new
entry. An entry holds no code: the table's arrays (``table.npz``, read with ``allow_pickle=False``),
the report as JSON, the ids under which Other leaves were added, and the sha256 of both files,
checked on reading; an entry that fails the check, or cannot be read, is ingested again and
written anew. Entries are written to a temporary directory and renamed, so commands running side
by side never read half an entry, and a command that finds another ingesting the same input waits
for its entry rather than ingesting it too. Nothing is ever removed: delete the directory to reclaim it.

Only :class:`qcat.training.data.corpus.Corpus` and ``LogCorpus`` read through the cache (training and
evaluation); ``qcat data ingest`` always reads the log, since its report is what a user asks it for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

from qcat.bundles.bundle import sha256_file
from qcat.console.progress import task
from qcat.errors import TaxonomyError
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import NORMALIZER
from qcat.training.clicklogs.clicklog import IngestReport, IngestResult, detect_format, ingest
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.version import __version__

ENVIRONMENT = "QCAT_INGEST_CACHE"
FORMAT = 1  # of an entry; a change of layout makes a new key
_ARRAYS = ("pair_query", "pair_category", "clicks", "impressions", "query_impressions")


def cache_directory() -> Path | None:
    """The directory ``QCAT_INGEST_CACHE`` names, or None when it is unset or empty."""
    value = os.environ.get(ENVIRONMENT, "").strip()
    return Path(value).expanduser() if value else None


def cached_ingest(path: str | Path, taxonomy: Taxonomy, *, min_clicks: float, date_from: str | None = None,
                  date_to: str | None = None, internal_nodes: str = "other") -> IngestResult:
    """:func:`qcat.training.clicklogs.clicklog.ingest` of a local file, from the cache when one is set
    and holds this input (module docstring)."""
    def ingested() -> IngestResult:
        return ingest(path, taxonomy, min_clicks=min_clicks, date_from=date_from, date_to=date_to,
                      internal_nodes=internal_nodes)

    directory = cache_directory()
    if directory is None or "://" in str(path) or not Path(path).is_file():
        return ingested()
    entry = directory / _key(Path(path), taxonomy, min_clicks, date_from, date_to, internal_nodes)
    with _one_at_a_time(entry):  # a second command asking for the same entry waits for it, not ingests it too
        with task(f"reading {path} from {ENVIRONMENT}"):  # drawn on a terminal only, as ingestion's own
            kept = _read(entry, str(path), taxonomy)
        if kept is None:
            kept = ingested()
            _write(entry, kept, taxonomy)
        return kept


@contextlib.contextmanager
def _one_at_a_time(entry: Path):
    """An exclusive lock on ``entry``'s lock file (where the platform has ``fcntl``)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: two commands may both ingest; the rename keeps the entry whole
        yield
        return
    with open(entry.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _key(path: Path, taxonomy: Taxonomy, min_clicks: float, date_from, date_to, internal_nodes: str) -> str:
    inputs = {"format": FORMAT, "qcat": __version__, "normalizer": NORMALIZER, "log": sha256_file(path),
              "log_format": detect_format(path), "taxonomy": taxonomy.content_hash, "min_clicks": float(min_clicks),
              "date_from": None if date_from is None else str(date_from),
              "date_to": None if date_to is None else str(date_to), "internal_nodes": internal_nodes}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode("utf-8")).hexdigest()[:32]


def _write(entry: Path, result: IngestResult, taxonomy: Taxonomy) -> None:
    table, added = result.table, result.taxonomy.ids[len(taxonomy.ids):]
    if any("\n" in category for category in table.categories.tolist()):  # a quoted taxonomy id may hold one
        return
    staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=entry.parent))
    try:
        np.savez(staging / "table.npz", queries=_joined(table.queries), categories=_joined(table.categories),
                 **{name: getattr(table, name) for name in _ARRAYS})
        report = {**asdict(result.report), "skipped": dict(result.report.skipped)}
        (staging / "report.json").write_text(json.dumps({
            "report": report, "other_leaves_under": [result.taxonomy.ids[result.taxonomy.parents[
                result.taxonomy.index(node)]] for node in added],
            "taxonomy": result.taxonomy.content_hash}), encoding="utf-8")
        (staging / "sha256.json").write_text(json.dumps(
            {name: sha256_file(staging / name) for name in ("table.npz", "report.json")}), encoding="utf-8")
        try:
            staging.rename(entry)
        except OSError:  # another command wrote the same entry first
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _read(entry: Path, path: str, taxonomy: Taxonomy) -> IngestResult | None:
    """The entry's result, or None when there is none or it fails its hashes (then it is removed)."""
    try:
        hashes = json.loads((entry / "sha256.json").read_text(encoding="utf-8"))
        if any(sha256_file(entry / name) != digest for name, digest in hashes.items()) or len(hashes) != 2:
            raise ValueError("hash mismatch")
        stored = json.loads((entry / "report.json").read_text(encoding="utf-8"))
        with np.load(entry / "table.npz", allow_pickle=False) as arrays:
            table = ClickTable(queries=_split(arrays["queries"]), categories=_split(arrays["categories"]),
                               **{name: arrays[name] for name in _ARRAYS})
        result_taxonomy, _ = taxonomy.with_other_leaves(stored["other_leaves_under"])
        if result_taxonomy.content_hash != stored["taxonomy"]:
            raise ValueError("taxonomy mismatch")
        report = _report(stored["report"], path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, TaxonomyError):
        shutil.rmtree(entry, ignore_errors=True)
        return None
    return IngestResult(table=table, report=report, taxonomy=result_taxonomy)


def _report(stored: dict, path: str) -> IngestReport:
    names = {f.name for f in fields(IngestReport)}
    if set(stored) != names:
        raise ValueError("report fields differ")
    values = {**stored, "path": path, "skipped": Counter(stored["skipped"]),
              "examples": {reason: [tuple(e) for e in listed] for reason, listed in stored["examples"].items()},
              "pairs_over_examples": [tuple(e) for e in stored["pairs_over_examples"]],
              "impression_conflict_examples": [tuple(e) for e in stored["impression_conflict_examples"]],
              "internal": {node: tuple(v) for node, v in stored["internal"].items()}}
    return IngestReport(**values)


def _joined(strings: np.ndarray) -> np.ndarray:
    """Strings as one UTF-8 array of ``\\n``-separated text: normalized queries and taxonomy ids hold
    no newline, and an object array could only be stored by pickling it."""
    return np.frombuffer("\n".join(strings.tolist()).encode("utf-8"), dtype=np.uint8)


def _split(data: np.ndarray) -> np.ndarray:
    text = data.tobytes().decode("utf-8")
    return np.asarray(text.split("\n") if text else [], dtype=object)
