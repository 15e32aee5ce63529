"""The Spark ingestion engine: the same SQL and rules as DuckDB, run by PySpark.

It reads CSV, TSV, JSONL or Parquet from any path or URI Spark reads (local, hdfs://,
s3a://... where the cluster has them). CSV and JSONL are read in PERMISSIVE mode with a
corrupt-record column: such rows are ``malformed_row``. Spark decodes invalid UTF-8 as
U+FFFD, so a row holding U+FFFD counts as ``bad_encoding`` (a log that really contains
U+FFFD is rejected here where DuckDB keeps it). A distributed read has no line numbers:
reject examples carry none, and ``strict`` names the reason and value only. CSV and TSV are
read line by line, as the Python reader reads them: a quoted field does not run across lines, so
a quote left open makes one malformed row, never swallows the lines after it.

Queries are normalized by :func:`qcat.text.normalize.normalize` itself, on the executors, over
the distinct queries (``mapInArrow``); the driver ships qcat's normalizer to them. The few
distinct categories are resolved on the driver and broadcast-joined.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import warnings
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import numpy as np

from qcat.errors import InputError
from qcat.text.lines import MAX_QUERY_BYTES
from qcat.training.clicklogs.ingest_engine import COLUMNS, check_header

INSTALL = 'pip install "qcat[spark]" and Java 17+ (Debian: apt-get install default-jre-headless)'
CORRUPT = "_corrupt_record"
NOT_TEXT = "_query_not_text"
REPLACEMENT = "\ufffd"
_shipped: set[tuple[int, str]] = set()  # (SparkContext id, zip digest) already added


def session(master: str = "local[2]", shuffle_partitions: int | None = None):
    """A SparkSession for ingestion, quiet on the console; InputError (one line) if Spark or
    Java is missing or the master cannot be reached."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError(f"--engine spark needs PySpark: {INSTALL}") from None
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        raise InputError(f"--engine spark needs Java, which is not installed: {INSTALL}")
    builder = (SparkSession.builder.master(master).appName("qcat ingest")
               .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_quiet_log4j()}")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    if master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable  # local workers: this very Python (not "python3")
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    with _spark_errors(f"--spark-master {master}: no Spark session could be started"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("FATAL")
    return spark


def _quiet_log4j() -> Path:
    """A log4j2 configuration printing fatal errors only: qcat reports Spark's errors itself,
    in one line, and the console shows qcat's report."""
    path = Path(tempfile.gettempdir()) / "qcat-spark-log4j2-fatal.properties"
    if not path.exists():
        path.write_text("rootLogger.level = fatal\nrootLogger.appenderRef.stderr.ref = console\n"
                        "appender.console.type = Console\nappender.console.name = console\n"
                        "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
                        "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n")
    return path


@contextmanager
def _spark_errors(what: str):
    """Any error from Spark, the JVM or a Python worker as one line naming ``what``."""
    try:
        yield
    except InputError:
        raise
    except Exception as exc:  # py4j, pyspark and Java errors share no base class
        if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j"):
            raise
        raise InputError(f"{what}: Spark: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    """The line that says what went wrong: the first, or a Python worker's exception (the last
    line of its traceback)."""
    text = str(getattr(exc, "java_exception", None) or exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if "Traceback (most recent call last)" in text:
        worker = [line for line in lines if not line.startswith(("File ", "at ", "^", "~"))
                  and ("Error" in line.split(":")[0] or "Exception" in line.split(":")[0])]
        if worker:
            return worker[-1][:300]
    return lines[0][:300]


class SparkEngine:
    name = "spark"
    row_numbers = False
    lines = None  # a distributed read counts no lines
    header_lines = 0
    blank_lines = 0
    present: frozenset[str] = frozenset()

    def __init__(self, spark, *, owned: bool = False):
        self.spark = spark
        self._owned = owned
        self._views: list[str] = []
        self._cached: list = []
        self._path = "Spark"

    @classmethod
    def start(cls, master: str = "local[2]") -> "SparkEngine":
        """An engine on a new session, stopped by :meth:`close`; a session already running in
        this process (its master wins) is used and left running."""
        try:
            from pyspark import SparkContext
        except ImportError:
            raise InputError(f"--engine spark needs PySpark: {INSTALL}") from None
        running = SparkContext._active_spark_context is not None
        return cls(session(master), owned=not running)

    # -- reading -------------------------------------------------------------------------

    def read(self, path: str, fmt: str) -> None:
        from pyspark.sql import functions as F

        self._path = path
        with _spark_errors(path):
            # Parse every column of a CSV row, so a short or long row is always seen as malformed.
            self.spark.conf.set("spark.sql.csv.parser.columnPruning.enabled", "false")
            if fmt == "parquet":
                frame = self.spark.read.parquet(path)
                check_header(frame.columns)
                names = {c.lower(): c for c in frame.columns}
                self.present = frozenset(names)
                texts = [(F.col(f"`{names[c]}`").cast("string") if c in names else F.lit(None).cast("string")).alias(c)
                         for c in COLUMNS]
                raw = frame.select(F.monotonically_increasing_id().alias("row"), *texts,
                                   F.lit(None).cast("string").alias("bad"), F.lit(None).cast("string").alias("bad_value"))
            else:
                frame, fields = self._read_text(path, fmt)
                texts = [(F.col(f"`{c}`") if c in fields else F.lit(None).cast("string")).alias(c) for c in COLUMNS]
                every = [F.col(f"`{c}`") for c in fields] + [F.col(CORRUPT)]
                joined = F.coalesce(F.col(CORRUPT), F.concat_ws("\t" if fmt == "tsv" else ",", *every[:-1]))
                # Decoded text holds U+FFFD where the bytes were not UTF-8; a JSON corrupt record
                # keeps the bytes themselves.
                undecodable = F.lit(False)
                for column in every:
                    undecodable = undecodable | F.coalesce(
                        (F.instr(column, REPLACEMENT) > 0) | ~F.call_function("is_valid_utf8", column), F.lit(False))
                bad = F.when(undecodable, "bad_encoding").when(F.col(CORRUPT).isNotNull(), "malformed_row")
                if fmt == "jsonl":
                    bad = bad.when(F.col(NOT_TEXT), "query_not_text")
                raw = frame.select(F.monotonically_increasing_id().alias("row"), *texts, bad.alias("bad"),
                                   F.when(bad.isNotNull(), F.substring(joined, 1, 80)).alias("bad_value"))
            self._name("raw", raw)
            if fmt == "jsonl":
                self._check_json_columns()
            elif fmt != "parquet":
                self.present = frozenset(fields)

    def _read_text(self, path: str, fmt: str):
        from pyspark.sql.types import StringType, StructField, StructType

        if fmt == "jsonl":
            from pyspark.sql import functions as F
            from pyspark.sql.types import VariantType

            # The query is read as a variant, so that a list or a number (which a string column
            # would hold as its JSON text: ["lego"] -> "lego") is a row skipped as query_not_text.
            fields = list(COLUMNS)
            schema = StructType([StructField(c, VariantType() if c == "query" else StringType()) for c in fields]
                                + [StructField(CORRUPT, StringType())])
            frame = self.spark.read.json(path, schema=schema, mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT)
            text = "schema_of_variant(query) = 'STRING'"
            frame = frame.select(
                F.expr(f"case when {text} then variant_get(query, '$', 'string') end").alias("query"),
                *[F.col(c) for c in fields if c != "query"], F.col(CORRUPT),
                F.expr(f"coalesce(query is not null and not is_variant_null(query) and not {text}, false)")
                .alias(NOT_TEXT))
            return frame, fields
        options = dict(sep="\t" if fmt == "tsv" else ",", quote='"', escape='"', encoding="UTF-8", multiLine=False)
        header = self.spark.read.csv(path, header=True, **options).columns
        written = [h.strip().lstrip("\ufeff").strip() for h in header]
        check_header(written)
        fields = [h.lower() for h in written]
        schema = StructType([StructField(f"_c{i}_{c}", StringType()) for i, c in enumerate(fields)]
                            + [StructField(CORRUPT, StringType())])
        frame = self.spark.read.csv(path, header=True, schema=schema, mode="PERMISSIVE",
                                    columnNameOfCorruptRecord=CORRUPT, **options)
        # Spark ignores the header once given a schema (names are positional); check_header has
        # refused a name given twice.
        chosen = {c: f"_c{i}_{c}" for i, c in enumerate(fields)}
        frame = frame.select(*[frame[chosen[c]].alias(c) for c in chosen], frame[CORRUPT])
        return frame, list(chosen)

    def _check_json_columns(self) -> None:
        found = [c for c in COLUMNS if self.spark.sql(f"select 1 from raw where {c} is not null limit 1").take(1)]
        self.present = frozenset(found)
        if self.spark.sql("select 1 from raw where bad is null limit 1").take(1):
            check_header(found)

    # -- the protocol ----------------------------------------------------------------------

    def map_queries(self, normalize: Callable[[str], str]) -> None:
        import pyarrow as pa

        self._ship(normalize)
        limit = MAX_QUERY_BYTES  # a plain int in the closure: the executors need no qcat.text.lines

        def normalized(batches):
            for batch in batches:
                raw = batch.column(0).to_pylist()
                size = [len(q.encode("utf-8", "surrogatepass")) for q in raw]  # qcat.text.lines.query_bytes
                yield pa.RecordBatch.from_arrays(
                    [pa.array(raw, pa.string()),
                     pa.array([normalize(q) if n <= limit else "" for q, n in zip(raw, size)], pa.string()),
                     pa.array(size, pa.int64())],
                    names=["raw", "normalized", "bytes"])

        with _spark_errors(self._path), warnings.catch_warnings():
            # PySpark warns about pandas versions even where, as here, it uses no pandas.
            warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
            distinct = self.spark.sql("select distinct query from raw where query is not null")
            self._name("query_map", distinct.mapInArrow(normalized, "raw string, normalized string, bytes bigint"), cache=True)

    def _ship(self, function: Callable) -> None:
        """Send the module of ``function`` (qcat's normalizer, stdlib only) to the executors,
        so they run the driver's very code whether or not qcat is installed there."""
        import importlib

        module = importlib.import_module(function.__module__)
        package = module.__name__.split(".")[0]
        files = [Path(importlib.import_module(package).__file__), Path(module.__file__)]
        blob = b"".join(f.read_bytes() for f in files)
        digest = hashlib.sha256(blob).hexdigest()[:16]
        key = (id(self.spark.sparkContext), digest)
        if key in _shipped:
            return
        archive = Path(tempfile.gettempdir()) / f"qcat-normalize-{digest}.zip"
        with zipfile.ZipFile(archive, "w") as z:
            for f in files:
                z.write(f, f"{package}/{f.name}")
        self.spark.sparkContext.addPyFile(str(archive))
        _shipped.add(key)

    def distinct(self, column: str) -> list[str]:
        return [r[0] for r in self.rows(f"select distinct {column} from raw where {column} is not null")]

    def register(self, name: str, columns: dict[str, np.ndarray]) -> None:
        import pyarrow as pa

        table = pa.table({c: pa.array(list(v), type=pa.bool_() if v.dtype == bool else pa.string())
                          for c, v in columns.items()})
        with _spark_errors(self._path):
            self._name(name, self.spark.createDataFrame(table))

    def view(self, name: str, sql: str) -> None:
        with _spark_errors(self._path):
            self._name(name, self.spark.sql(sql))

    def materialize(self, name: str, sql: str) -> None:
        with _spark_errors(self._path):
            self._name(name, self.spark.sql(sql), cache=True)

    def rows(self, sql: str) -> list[tuple]:
        with _spark_errors(self._path):
            return [tuple(r) for r in self.spark.sql(sql).collect()]

    def columns(self, sql: str) -> dict[str, np.ndarray]:
        with _spark_errors(self._path):
            table = self.spark.sql(sql).toArrow()
        import pyarrow as pa

        result = {}
        for name in table.column_names:
            column = table.column(name)
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                result[name] = np.asarray(column.to_pylist(), dtype=object)
            else:
                result[name] = column.to_numpy(zero_copy_only=False).astype(np.float64)
        return result

    def close(self) -> None:
        for frame in self._cached:
            frame.unpersist()
        for name in self._views:
            self.spark.catalog.dropTempView(name)
        self._cached, self._views = [], []
        if self._owned:
            self.spark.stop()

    def _name(self, name: str, frame, cache: bool = False) -> None:
        if cache:
            frame = frame.persist()
            self._cached.append(frame)
        frame.createOrReplaceTempView(name)
        self._views.append(name)
