"""``qcat train nodes``: a bundle's node calibration (``--precision``) fitted again, or for the first
time on a bundle from before it existed, on the validation sets of the data the bundle records;
written to a copy of the bundle (the model itself, and so its leaf answers, unchanged)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from qcat.cli import float_in
from qcat.errors import InputError
from qcat.training.commands.bundles import check_bundle_out, terminate_cleanly
from qcat.training.commands.data_flags import add_data_flags, data_args_from, data_from_args, load_dataset


def add_nodes_command(sub: argparse._SubParsersAction) -> None:
    nodes = sub.add_parser("nodes", help="fit a bundle's node calibration (qcat classify --precision) into a copy")
    nodes.add_argument("--model", type=Path, required=True, help="the model bundle (any backend)")
    nodes.add_argument("--confidence", type=float_in(0, 1, low_open=True, high_open=True), default=None,
                       help="confidence of the lower bound each precision's threshold keeps on every validation set "
                            "(default 0.7; higher: a firmer promise, shallower answers)")
    add_data_flags(nodes, out_help="the bundle to write: a copy of --model with the node calibration", confusable=False)
    nodes.set_defaults(run=run_train_nodes)


def run_train_nodes(args: argparse.Namespace) -> int:
    from qcat.bundles.bundle import read_manifest, relist_files
    from qcat.classifier import load_model
    from qcat.console.output import write_directory
    from qcat.models.calibration.nodes import describe_nodes, save_node_calibration
    from qcat.training.data.provenance import check_same_source
    from qcat.training.selection.nodes import CONFIDENCE, fit_node_calibration

    check_bundle_out(args.out)
    manifest = read_manifest(args.model)
    recorded = manifest.config.get("data", {})
    if isinstance(recorded, dict) and recorded.get("judged"):
        raise InputError(f"{args.model} was trained with --judged: its validation sets left the judged queries out; "
                         f"retrain it with this qcat to fit its node calibration on the same sets")
    data_args_from(args, recorded if isinstance(recorded, dict) else {}, args.model)
    data = data_from_args(args)
    check_same_source(recorded, data[1], f"--model {args.model}")
    _, _, sets = load_dataset(args, data)
    model = load_model(args.model)
    nodes = fit_node_calibration(model, sets, confidence=args.confidence or CONFIDENCE)
    print(describe_nodes(nodes))
    if nodes is None:
        raise InputError(f"{args.model}: the validation sets hold no query; nothing to fit the node calibration on")

    def write(directory: Path) -> None:
        shutil.copytree(args.model, directory, dirs_exist_ok=True)
        save_node_calibration(nodes, directory)
        relist_files(directory)

    with terminate_cleanly():
        write_directory(Path(args.out), write)
    read_manifest(args.out)  # the copy verifies as a bundle
    print(f"wrote {args.out}: {args.model} with a node calibration (qcat classify --model {args.out} --precision 0.9)")
    return 0
