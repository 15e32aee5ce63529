"""Click logs in: reading CSV, TSV, JSONL and Parquet, validating and aggregating them with DuckDB or
Spark (one shared SQL), into the click table every trainer reads, and its query-set statistics."""

from qcat.console.extras import require_extra

require_extra("data", "qcat.training.clicklogs")
