"""bench_real_text.py's peers, trained on the demo corpus's train split and answering qcat's predict
protocol (``labels``, ``predict(queries, k) -> Predictions``): fastText and Omikuji (Parabel trees),
with the settings and reasons bench_real_text.py's docstring gives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from bench_xreg import xc_format

from qcat.models.model import Predictions
from qcat.text.normalize import tokenize

SEED = 0
FASTTEXT = {"loss": "softmax", "wordNgrams": 2, "dim": 100, "epoch": 10, "lr": 0.5, "minCount": 1,
            "bucket": 1_000_000, "thread": 1, "seed": SEED, "verbose": 0}


def normalized(queries: Sequence[str]) -> list[str]:
    return [" ".join(tokenize(q)) for q in queries]


def click_repeats(clicks: np.ndarray) -> np.ndarray:
    """Lines per (query, category) pair in fastText's training file: ceil(log2(1 + clicks))."""
    return np.ceil(np.log2(1.0 + clicks)).astype(np.int64)


@dataclass
class FastTextPeer:
    model: object  # fasttext's _FastText
    labels: tuple[str, ...]  # taxonomy ids in the model's label order

    @classmethod
    def train(cls, table, workdir: Path) -> FastTextPeer:
        import fasttext

        path = workdir / "fasttext_train.txt"
        with open(path, "w") as out:
            out.writelines(f"__label__{table.categories[c]} {table.queries[q]}\n" * int(n) for q, c, n in zip(table.pair_query, table.pair_category, click_repeats(table.clicks)))
        model = fasttext.train_supervised(input=str(path), **FASTTEXT)
        return cls(model, tuple(name.removeprefix("__label__") for name in model.labels))

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        position = {f"__label__{label}": i for i, label in enumerate(self.labels)}
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for row, text in enumerate(normalized(queries)):
            for j, (probability, name) in enumerate(self.model.f.predict(text + "\n", k, 0.0, "strict")):
                labels[row, j], scores[row, j] = position[name], probability
        return Predictions(labels, scores, ("fasttext",) * len(queries))


@dataclass
class OmikujiPeer:
    model: object  # omikuji.Model
    features: object  # qcat.models.xreg.TfidfFeatures
    labels: tuple[str, ...]

    @classmethod
    def train(cls, table, workdir: Path) -> OmikujiPeer:
        import omikuji

        from qcat.training.xreg.features import featurize, fit_tfidf
        from qcat.training.xreg.relevance import relevance_matrix

        used = np.unique(table.pair_category)
        columns = np.full(len(table.categories), -1, dtype=np.int64)
        columns[used] = np.arange(len(used))
        features = fit_tfidf(table.queries)
        path = workdir / "omikuji_train.txt"
        xc_format(path, featurize(features, table.queries), relevance_matrix(table, columns))
        model = omikuji.Model.train_on_data(str(path), omikuji.Model.default_hyper_param(), n_threads=1)
        return cls(model, features, tuple(table.categories[used]))

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        rows = self.features.transform([tokenize(q) for q in queries])
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for i in range(rows.n):
            lo, hi = rows.indptr[i], rows.indptr[i + 1]
            pairs = list(zip(rows.indices[lo:hi].tolist(), rows.data[lo:hi].tolist()))
            for j, (label, score) in enumerate(self.model.predict(pairs, beam_size=10, top_k=k) if pairs else []):
                labels[i, j], scores[i, j] = label, score
        return Predictions(labels, scores, ("omikuji",) * len(queries))


PEERS = {"fastText": FastTextPeer, "Omikuji (Parabel)": OmikujiPeer}
