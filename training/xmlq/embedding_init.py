"""XML-Q's embedding started from skip-gram vectors of the data's own text
(``qcat train xmlq --init-embeddings skipgram``; not in the paper, which starts it at random).

The text is the training split's queries and, when the data is a corpus with a catalog (the
demo corpus), the catalog titles the click simulator was given: the listings the corpus
holds out for its real-text sets (``real-title`` / ``real-2tok``) are left out, and so is any
other listing whose normalized title is a held-out title. Those titles are the catalog a
search engine indexes before any query is logged; they carry no category and no query of
the validation or test split is read, so the vectors learn which words go together in
listings, never an answer. A click log (``--log``) has no catalog: queries only. With
``--catalog FILE`` the listings' titles are already training queries (the catalog joins the
training split), so they come in with the queries.

The vectors have the preset's embedding width and are rescaled to the element standard
deviation of the random init (uniform in +-0.05, sd 0.05/sqrt(3)), so the convolutions and
Adam see inputs of the size they would at random; the layer stays trainable. Tokens the
text never holds (and the padding, end and unknown ids) keep their random rows.
"""

from __future__ import annotations

import numpy as np

from qcat.models.query_encoding import RESERVED
from qcat.text.normalize import tokenize
from qcat.training.xmlq.skipgram import SkipGramConfig, train_skipgram

RANDOM_INIT_LIMIT = 0.05  # build_xmlq's RandomUniform(-0.05, 0.05)
TARGET_SD = RANDOM_INIT_LIMIT / np.sqrt(3.0)


def simulator_titles(corpus) -> list[list[str]] | None:
    """The tokens of the catalog titles a corpus gave its click simulator, held-out ones (and
    titles equal to one) left out; None when the data is not a corpus with a catalog."""
    from qcat.training.data.corpus import Corpus

    if not isinstance(corpus, Corpus) or "catalog" not in corpus.meta:
        return None
    catalog = corpus.catalog()
    held = corpus.holdout_split(catalog) != 0
    titles = [tokenize(title) for title in catalog.title]
    held_texts = {" ".join(tokens) for tokens, out in zip(titles, held.tolist()) if out}
    return [tokens for tokens, out in zip(titles, held.tolist()) if not out and " ".join(tokens) not in held_texts]


def skipgram_embeddings(vocabulary: list[str], queries, titles: list[list[str]] | None, dim: int, epochs: int,
                        seed: int) -> tuple[tuple[np.ndarray, np.ndarray], dict]:
    """``((token ids, their vectors), record)`` for :func:`qcat.training.xmlq.model.build_xmlq`:
    the ids of the vocabulary tokens the text holds and their rescaled vectors; the record
    says what trained them (for the bundle's manifest)."""
    sentences = [query.split(" ") for query in queries] + (titles or [])
    config = SkipGramConfig(dim=dim, epochs=epochs, seed=seed)
    result = train_skipgram(sentences, vocabulary, config)
    rows = np.flatnonzero(result.seen)
    vectors = result.vectors[rows]
    sd = float(vectors.std()) if vectors.size else 0.0
    if sd > 0:
        vectors = vectors * np.float32(TARGET_SD / sd)
    record = {
        "init": "skipgram",
        "text": {"training_queries": len(queries), "catalog_titles": len(titles) if titles is not None else None},
        "skipgram": config.to_json() | result.report,
        "rows_initialised": int(len(rows)),
        "rows_random": int(RESERVED + len(vocabulary) - len(rows)),
        "scale": f"vectors x {TARGET_SD / sd if sd else 0:.4g} (element sd {TARGET_SD:.4f}, the random init's)",
    }
    return (rows + RESERVED, vectors.astype(np.float32)), record


def describe(record: dict) -> str:
    """One line for the trainer's output."""
    text = record["text"]
    titles = text["catalog_titles"]
    source = (f"{text['training_queries']:,} training queries + {titles:,} catalog titles" if titles is not None
              else f"{text['training_queries']:,} training queries only (no corpus catalog: a --log has none, "
                   f"and --catalog titles are training queries already)")
    sg = record["skipgram"]
    return (f"embedding: skip-gram on {source}: {sg['tokens']:,} tokens, {sg['epochs']} epochs, "
            f"{record['rows_initialised']:,} rows initialised, {sg['seconds']:.1f} s")
