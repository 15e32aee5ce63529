"""Training from Python: each function runs ``qcat train BACKEND`` with the same flags (the one
implementation of a training run: its checks, its record of the data, its atomic bundle write)
and returns the trained bundle loaded, ready to classify.

    from qcat.training import train_nb
    classifier = train_nb("my-nb", log="clicks.csv", taxonomy="taxonomy.tsv")

A keyword argument is the flag of the same name (``min_clicks=1`` is ``--min-clicks 1``;
``True`` gives a bare switch such as ``catalog_only=True``); errors are raised as
:class:`qcat.errors.InputError`, naming the flag.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from qcat.classifier import Classifier
from qcat.errors import InputError

BACKENDS = ("nb", "xmlq", "xreg", "hybrid", "rerank")


def flags_of(options: dict) -> list[str]:
    """``{"min_clicks": 1, "catalog_only": True, "corpus": None}`` -> ``["--min-clicks", "1", "--catalog-only"]``."""
    argv = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag, ",".join(str(item) for item in value)]
        else:
            argv += [flag, str(value)]
    return argv


def train(backend: str, out: str | Path, *, verbose: bool = False, **options) -> Classifier:
    """Train a ``backend`` bundle into ``out`` (new or an empty directory) like
    ``qcat train BACKEND --out OUT`` with ``options`` as its flags, and load it. With
    ``verbose``, the command's report is printed as on the command line."""
    from qcat.training.commands.train import main

    if backend not in BACKENDS:
        raise InputError(f"backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    argv = [backend, "--out", str(out), *flags_of(options)]
    with contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO()):
        main("train", argv)
    return Classifier.load(out)


def train_nb(out: str | Path, *, corpus: str | Path | None = None, log: str | Path | None = None,
             taxonomy: str | Path | None = None, catalog: str | Path | None = None, min_clicks: float | None = None,
             verbose: bool = False, **options) -> Classifier:
    """The Naive Bayes backend on a click log (``log`` and ``taxonomy``), a corpus, or the demo
    corpus when neither is given; ``catalog`` adds listings as a second source."""
    return train("nb", out, corpus=corpus, log=log, taxonomy=taxonomy, catalog=catalog, min_clicks=min_clicks,
                 verbose=verbose, **options)


def train_xreg(out: str | Path, *, corpus: str | Path | None = None, log: str | Path | None = None,
               taxonomy: str | Path | None = None, catalog: str | Path | None = None, verbose: bool = False,
               **options) -> Classifier:
    """XReg (extreme regression over label trees); ``options`` are ``qcat train xreg``'s flags."""
    return train("xreg", out, corpus=corpus, log=log, taxonomy=taxonomy, catalog=catalog, verbose=verbose, **options)


def train_xmlq(out: str | Path, *, corpus: str | Path | None = None, log: str | Path | None = None,
               taxonomy: str | Path | None = None, preset: str = "small", verbose: bool = False,
               **options) -> Classifier:
    """The XML-Q network, exported to ONNX (needs the train extra and a Keras backend)."""
    return train("xmlq", out, corpus=corpus, log=log, taxonomy=taxonomy, preset=preset, verbose=verbose, **options)


def train_hybrid(out: str | Path, *, nb: str | Path, xreg: str | Path | None = None, xmlq: str | Path | None = None,
                 verbose: bool = False, **options) -> Classifier:
    """A hybrid of an NB bundle and the long-query candidates given (an XReg and/or an XML-Q
    bundle), its cutoff and blend chosen on validation (``qcat train hybrid``'s other flags as
    ``options``)."""
    return train("hybrid", out, nb=nb, xreg=xreg, xmlq=xmlq, verbose=verbose, **options)


def train_rerank(out: str | Path, *, model: str | Path, catalog: str | Path | None = None, candidates: int | None = None,
                 verbose: bool = False, **options) -> Classifier:
    """A learned second stage over the candidates of the bundle ``model`` (``qcat train rerank``'s
    other flags as ``options``)."""
    return train("rerank", out, model=model, catalog=catalog, candidates=candidates, verbose=verbose, **options)
