"""The one way in for a user's files: each reader declares its file kind as a schema
(:mod:`qcat.inputs.schema`) and :mod:`qcat.inputs.table` reads it by the same rules for every kind."""

from qcat.inputs.schema import (COMMENTS_ANYWHERE, COMMENTS_BEFORE_HEADER, COMMENTS_NONE, Column, Directive,
                                FileSchema, header_problem, parse_value)
from qcat.inputs.table import (REFUSE, SKIP, Query, Row, Skipped, Table, data_suffix, raw_lines, read_bytes, read_table,
                               split_cells, table_from_bytes, text_lines)

__all__ = ["COMMENTS_ANYWHERE", "COMMENTS_BEFORE_HEADER", "COMMENTS_NONE", "Column", "Directive", "FileSchema",
           "header_problem", "parse_value", "REFUSE", "SKIP", "Query", "Row", "Skipped", "Table", "data_suffix",
           "raw_lines", "read_bytes", "read_table", "split_cells", "table_from_bytes", "text_lines"]
