"""The largest difference between an XML-Q bundle's ONNX scores and the network's, rebuilt from
the best weights of its checkpoint under this process's Keras backend.

    python tests/xmlq_onnx_check.py BUNDLE CHECKPOINT_DIR QUERIES_CSV

prints the largest absolute difference over the queries of QUERIES_CSV (its ``query`` column), the
number of queries, and whether TensorFlow was imported."""

from __future__ import annotations

import csv
import gzip
import json
import sys
from pathlib import Path

import numpy as np

from qcat.classifier import load_model
from qcat.models.query_encoding import RESERVED, encode, token_index
from qcat.text.normalize import normalize
from qcat.training.xmlq.checkpoint import Checkpoint
from qcat.training.xmlq.model import PRESETS, build_xmlq


def main(bundle: Path, checkpoint: Path, queries_csv: Path) -> None:
    model = load_model(bundle)
    config = json.loads((checkpoint / Checkpoint.STATE).read_text())["config"]
    network = build_xmlq(RESERVED + len(model.vocabulary), len(model.labels), PRESETS[config["preset"]],
                         rnn=config["rnn"])
    Checkpoint(checkpoint).load_best(network)
    opener = gzip.open if queries_csv.suffix == ".gz" else open
    with opener(queries_csv, "rt", newline="") as handle:
        queries = list(dict.fromkeys(normalize(row["query"]) for row in csv.DictReader(handle)))
    tokens = encode(queries, token_index(list(model.vocabulary)))
    difference = np.abs(model.probabilities(tokens) - network.predict(tokens, verbose=0)).max()
    print(f"{difference:.3g} {len(tokens)} {'tensorflow' in sys.modules}")


if __name__ == "__main__":
    main(*map(Path, sys.argv[1:4]))
