"""Choosing what a category session asks judges (issue 47): ``create-session --kind categories
--select random|uncertain|disagree`` with a budget (``--queries N``), never re-asking a query
already judged.

- ``random`` (the default): the unbiased sample, the one whose figures estimate a model's
  precision;
- ``uncertain``: the queries on which the first model is least sure: the smallest margin between
  its top-1 and top-2 calibrated scores (a query with one category: its top-1 score), ties by the
  lower top-1, then by a draw of ``seed``. A low top-1 bounds the margin (margin <= top-1), so the
  rule takes both the queries whose top two are closest and those whose top score is low;
  queries the model answers no category for are not candidates;
- ``disagree``: the queries on which two models' top-1 categories differ (one answering none
  counts), most impressions first, ties by a draw of ``seed``.

Each takes the budget split evenly over the head/torso/tail segments the pool holds (a third each
when all three have candidates; a pool of one segment gets the whole budget), the first of each
segment's ranking. A segment with fewer candidates than its share gives fewer.

The library call, for a benchmark that picks queries in-process::

    select_queries(texts, impressions, segments, models, kind, n, seed=0, exclude=None) -> np.ndarray

``texts``: the pool's queries (n strings); ``impressions``: their counts (n numbers; ``disagree``
orders by them); ``segments``: each query's segment, ``"head"``/``"torso"``/``"tail"`` or 0/1/2;
``models``: loaded models (:func:`qcat.classifier.load_model`; ``uncertain`` scores with the first,
``disagree`` compares the first two); ``kind``: ``"random"``, ``"uncertain"`` or ``"disagree"``;
``n``: the budget; ``exclude``: a boolean mask of queries never to choose (already judged).
Returns the chosen indices into ``texts``, segment by segment (head, torso, tail), each in its
ranking's order (for ``random``, the seeded draw ``create-session`` makes). The models predict in
batches (:data:`rank.BATCH` queries at a time).

:mod:`.exclusions` finds the queries never to ask again (judged in the store, listed in a graded
gold file); :mod:`.wording` says in the report what kind of sample a session is.
"""

from qcat.judging.grading.selection.rank import SELECTIONS, select_queries

__all__ = ["SELECTIONS", "select_queries"]
