"""Which query a judge gets next: atomic and safe under concurrency.

Each query of a session is judged by ``judges_per_query`` (3) different judges and never twice
by one judge:

- a judge who holds an *open* assignment in the session gets that query back (resume);
- otherwise the judge claims a query: ``UPDATE session_queries SET claims = claims + 1 WHERE
  id = :id AND claims < :limit`` and, in the same transaction, inserts the assignment, whose
  (judge, query) pair is unique in the database. A claim that loses a race updates no row and
  the next candidate is tried; a duplicate (judge, query) rolls the whole claim back. The
  conditional update is what makes this safe: PostgreSQL re-checks ``claims < limit`` on the
  locked row, and SQLite runs every transaction under ``BEGIN IMMEDIATE``;
- candidates are the queries with the most claims first (finish queries before starting new
  ones), then in session order;
- skipping a query releases the claim (another judge can take it) but keeps the skipped
  assignment, so the same judge never gets it again;
- an admin may send a query back for another judgment (the disagreement queue,
  :mod:`qcat.judging.grading.disagreements`): its ``extra_judges`` raises its quota by one each time;
- claims expire: an open assignment whose judge has not had the query shown or acted on it for
  ``claim_timeout`` (default :data:`CLAIM_TIMEOUT`, 30 minutes; ``qcat judge app
  --claim-timeout``) is *released* by the next :func:`next_query` of the session: it no longer
  counts in ``claims``, so the query is offered to another judge. :func:`release` does the same
  on demand (``qcat judge release``). Each release is a conditional ``UPDATE ... WHERE status =
  'open'``, so a claim is released, and its count lowered, once. A judge whose claim was
  released gets the query back while it still needs a judge (or while it is on their screen:
  ``showing``), and may still submit grades for it (:func:`qcat.judging.grading.judgments.submit`).

Gold questions (``session_queries.gold``, :mod:`qcat.judging.grading.gold`) go to *every* judge of the
session, once each: they take no place among a query's ``judges_per_query`` (their claim is an
unconditional ``claims + 1``, so ``claims`` may exceed the quota there) and their claims are never
released (nobody waits for them). They are mixed in among the regular queries: a judge is given
their ``i``-th gold query (1-based) once they have been given ``(i-1)·K + P`` regular queries,
``K`` = :func:`gold_spacing` = ``max(1, min(5, regular queries // (gold queries + 1)))`` (one gold
query in every 5 regular ones in a large session, closer together in a small one) and ``P`` in
1..K the judge's own phase (:func:`gold_phase`); each judge gets the gold queries in an order of
their own (:func:`gold_order`), so judges comparing notes do not find gold at the same places. The
gold queries still left when no regular query remains for the judge come one after another. The
screen of a gold query is the same as any other's.

Where each part lives: ``membership`` (who may judge a session), ``claims`` (the next query and its
claim), ``gold_turns`` (when the gold queries come), ``release`` (claims given up), ``finishing``
(skip, flag) and ``progress`` (the counts). What other packages use is importable from here.
"""

from qcat.judging.grading.assignment.claims import next_queries, next_query
from qcat.judging.grading.assignment.finishing import (
    MAX_NOTE,
    AlreadyFinished,
    check_note,
    finished,
    flag,
    judge_assignment,
    skip,
)
from qcat.judging.grading.assignment.gold_turns import GOLD_EVERY, gold_order, gold_phase, gold_spacing
from qcat.judging.grading.assignment.membership import INACTIVE, NOT_A_MEMBER, check_member, may_judge
from qcat.judging.grading.assignment.progress import judge_progress, progress
from qcat.judging.grading.assignment.release import CLAIM_TIMEOUT, CLAIM_TIMEOUT_ENV, Released, release

__all__ = ["CLAIM_TIMEOUT", "CLAIM_TIMEOUT_ENV", "GOLD_EVERY", "INACTIVE", "MAX_NOTE", "NOT_A_MEMBER", "AlreadyFinished",
           "Released", "check_member", "check_note", "finished", "flag", "gold_order", "gold_phase", "gold_spacing",
           "judge_assignment", "judge_progress", "may_judge", "next_queries", "next_query", "progress",
           "release", "skip"]
