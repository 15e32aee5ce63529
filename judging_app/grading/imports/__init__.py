"""Result lists from any search system (``qcat judge create-session --results FILE``): the two
groups of a side-by-side session read from files instead of qcat's own search.

A file is JSON Lines (``.jsonl``: one object per line), CSV (``.csv``) or TSV (``.tsv``) with a
header row. Each row is one listing a system returned for a query:

- required: ``query``, ``rank`` (1 = top), ``listing_id``;
- optional: ``system`` (which search system; with two files, each file is one system and may
  leave it out), ``title``, ``category``, ``brand``, ``price``, ``image_url`` (http, https or a
  ``data:image/`` URL), ``link`` (http or https), ``segment`` (head, torso or tail) or
  ``impressions`` (a number: the queries are then split 30/30/40% of impressions, as the golden
  harness does).

A TREC run (``.run`` or ``.trec``: ``qid Q0 docno rank score tag`` per line, the tag naming the
system) names queries by id: ``--topics FILE`` gives their text (``qid<TAB>query`` per line) and
``--listings FILE`` (CSV, TSV or JSON Lines with ``listing_id`` and any of the optional fields
above) what the cards show.

Rows that cannot be used (a missing or malformed field, a rank or listing given twice for one
query and system, a segment that contradicts an earlier row) are skipped and each is reported
with its file and line; :class:`Imported` counts them. A system none of whose rows is usable is
refused, naming its file. Listings ranked below the top
:data:`qcat.judging.grading.sessions.TOP_N` of a list are not shown (counted too).

Queries are matched on qcat's normalized query (:func:`qcat.text.normalize.normalize`): ``TV`` in one
system's list and ``tv `` in the other's are one query, shown as first written; such merges are
counted (:attr:`Imported.merged`) and reported.

Where each part lives: ``files`` (the formats and their readers), ``rows`` (a row checked),
``queries`` (the rows put together as queries) and ``results`` (both lists read, what was skipped
reported). What other packages use is importable from here.
"""

from qcat.judging.grading.imports.files import LISTINGS, RESULTS, TOPICS, read_listings, read_topics
from qcat.judging.grading.imports.queries import Imported, query_key
from qcat.judging.grading.imports.results import MAX_BAD_SHOWN, read_results, report_bad_rows
from qcat.judging.grading.imports.rows import safe_url

__all__ = ["LISTINGS", "MAX_BAD_SHOWN", "RESULTS", "TOPICS", "Imported", "query_key", "read_listings", "read_results",
           "read_topics", "report_bad_rows", "safe_url"]
