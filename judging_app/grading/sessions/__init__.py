"""Setting up a judging session (eBay §4.2.3): queries, one third each from head, torso and tail
of the latest log's demand, and for each query the top 5 listings of the same search with the
baseline classifier and with the target classifier, placed left/right at random.

- :func:`build_queries` samples the queries and runs the golden harness's search
  (:class:`qcat.evaluation.golden.search.MiniSearch` over the full catalog, the paper's "full
  inventory");
- :func:`store_session` writes a session and its result lists in one transaction (tests use it
  directly with hand-made lists). Judges get queries in the stored order, which
  :func:`build_queries` shuffles (seeded) so that segments are interleaved;
- :func:`change_members` names a session's judges (``qcat judge members``): then only they see it
  and get its queries (:func:`qcat.judging.grading.assignment.may_judge`); a session naming none
  is open to every active judge.

Queries for which neither system returns a listing have nothing to judge: they are passed
over (and counted) and the next sampled query of the segment takes their place.
"""

from qcat.judging.grading.sessions.engines import build_queries, same_top, select_imported
from qcat.judging.grading.sessions.specs import (
    DEFAULT_QUERIES,
    SEARCH_BATCH,
    SEGMENTS,
    TOP_N,
    UNKNOWN_BRANDS,
    BuiltQueries,
    Listing,
    QuerySpec,
    known_brand,
    known_price,
    split_evenly,
)
from qcat.judging.grading.sessions.stored import (
    change_members,
    check_session_name_free,
    default_name,
    find_query,
    find_session,
    judge_facing_name,
    session_overview,
    store_session,
)

__all__ = ["DEFAULT_QUERIES", "SEARCH_BATCH", "SEGMENTS", "TOP_N", "UNKNOWN_BRANDS", "BuiltQueries", "Listing",
           "QuerySpec", "build_queries", "change_members", "check_session_name_free", "default_name", "find_query",
           "find_session", "judge_facing_name", "known_brand", "known_price", "same_top", "select_imported",
           "session_overview", "split_evenly", "store_session"]
