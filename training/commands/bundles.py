"""What every ``qcat train`` command does with its ``--out``: refused before any work unless new or
empty, written atomically with the record of the queries the model saw; SIGTERM handled like Ctrl-C."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from qcat.console.output import check_new_directory
from qcat.errors import InputError
from qcat.training.commands.data_flags import real_text_line


@contextmanager
def terminate_cleanly():
    """SIGTERM (``kill``, a scheduler's timeout) ends the command like Ctrl-C does: through the
    ``finally`` blocks that remove a half-written bundle and release --out."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_bundle_out(path: Path) -> None:
    """Refuse, before any work, an ``--out`` the bundle cannot be written to. It must be new or
    an empty directory: a manifest lists every file of its directory, so stray files would be
    listed (and hashed) as part of the model."""
    check_new_directory(path)
    if not path.exists() and path.parent.exists() and not path.parent.is_dir():
        raise InputError(f"--out {path}: {path.parent} is not a directory")


def save_bundle(model, out: Path, dataset, also_seen=(), overrides: dict[str, list[str]] | None = None,
                nodes=None) -> None:
    """Write ``model``'s bundle to ``out`` (new or an empty directory) with the record of the queries it saw (those of
    ``dataset`` it trained or was tuned on, plus the fingerprints ``also_seen`` of its parts). ``overrides``
    (normalized query -> its judged-exact categories, best first; ``qcat train ... --overrides``) are written
    as the bundle's ``overrides.tsv`` (:mod:`qcat.models.overrides`), served first by ``qcat classify``/``serve``;
    a query not in normalized form or a category that is not one of the model's is refused before any write.
    ``nodes``: the model's node calibration (:func:`fit_nodes`), written as ``nodes.json``."""
    from qcat.console.output import write_directory
    from qcat.models.calibration.nodes import save_node_calibration
    from qcat.models.overrides import check_overrides, save_overrides
    from qcat.training.data.provenance import write_seen_queries

    queries = seen_queries(dataset)
    if overrides is not None:
        overrides = check_overrides(overrides, model.labels)

    def write(directory: Path) -> None:
        # A hybrid's parts, evaluated on their own too, read the hybrid's record (one copy).
        write_seen_queries(directory, queries, also_seen)
        if overrides is not None:  # before the model's manifest, which lists and hashes every file
            save_overrides(directory, overrides, model.labels)
        save_node_calibration(nodes, directory)
        model.save(directory)

    # Written into a temporary sibling and renamed to ``out`` when complete: a failed write
    # (a full disk) or an interrupted run leaves nothing at ``out``.
    write_directory(Path(out), write)


def fit_nodes(model, sets, log=print):
    """The node calibration a bundle ships (``--precision``), fitted on ``sets``, said in one line."""
    from qcat.models.calibration.nodes import describe_nodes
    from qcat.training.selection.nodes import fit_node_calibration

    nodes = fit_node_calibration(model, sets)
    log(describe_nodes(nodes))
    return nodes


def seen_queries(dataset) -> list[str]:
    """The queries a model trained on ``dataset`` sees while training or choosing its settings:
    all but the test split (recorded in the bundle, :mod:`qcat.training.data.provenance`)."""
    from qcat.training.data.dataset import SPLITS

    return dataset.table.queries[dataset.split != SPLITS.index("test")].tolist()


def print_real_text(model, sets) -> None:
    """The summary's line of PR@1 on real text beside the data's own split, where there is real text."""
    line = real_text_line(model, sets)
    if line:
        print(line)
