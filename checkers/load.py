"""Load a run directory's history and broker log dump into Spark DataFrames, via a Parquet cache.

Why: JSONL is the durable, greppable format the harness writes, but parsing tens of millions
of JSON lines costs far more than the checks themselves. Each source file is converted once to
Parquet beside the run (``<run>/.parquet/<name>/`` plus a ``<name>.json`` manifest holding the
source's size and mtime); later checks of the same unchanged file read the Parquet directly.

Input rules (shared with the history reader and :mod:`history.logdump`):

* line 1 is a header (``logdump_format: 1`` or ``history_format: 1``);
* a torn last line (a crash mid-write) is skipped and reported in ``notes``;
* anything else malformed raises :class:`CheckerInputError` naming the file and line.

Public API::

    load_logdump(spark, run_or_file, *, cache=True) -> Loaded   # columns: see LOGDUMP_SCHEMA
    load_history(spark, run_or_file, *, cache=True) -> Loaded   # columns: see HISTORY_SCHEMA
    logdump_path(run_dir), history_path(run_dir)
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from history.logdump import (
    CheckerInputError,
    first_bad_line,
    read_header,
    snippet,
    torn_tail,
)
from history.logdump_format import (
    KINDS,
    REQUIRED_BOOL,
    REQUIRED_INT,
    REQUIRED_STR,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from checkers.history_parquet import TypedTables

__all__ = [
    "CACHE_FORMAT",
    "CheckerInputError",
    "Loaded",
    "derived_cache",
    "history_path",
    "history_schema",
    "load_history",
    "load_logdump",
    "logdump_path",
    "logdump_schema",
    "publish_derived",
]

#: Bump when the Parquet layout changes, so old caches are rebuilt rather than misread.
CACHE_FORMAT = 7
CACHE_DIR = ".parquet"
_CORRUPT = "_corrupt_record"


@dataclass
class Loaded:
    """A loaded source: the DataFrame plus what the loader noticed on the way."""

    df: DataFrame
    source: Path
    header: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    cached: bool = False  # True when an existing Parquet cache was reused
    rows: int = 0
    #: The family's typed tables, one directory each (histories loaded with ``typed=``).
    tables: Path | None = None


def logdump_path(run: str | os.PathLike[str]) -> Path:
    """``<run>/evidence/logdump.jsonl`` (or the argument itself if it is a file)."""
    p = Path(run)
    return p if p.is_file() else p / "evidence" / "logdump.jsonl"


def history_path(run: str | os.PathLike[str]) -> Path:
    """``<run>/history.jsonl`` (or the argument itself if it is a file)."""
    p = Path(run)
    return p if p.is_file() else p / "history.jsonl"


def logdump_schema() -> StructType:
    """Explicit schema of a dumped record (see docs/history-format.md), plus the header keys:
    the Spark form of :func:`checkers.logdump_parquet.record_schema`, so both converters of a
    dump write the same columns."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from checkers.logdump_parquet import record_schema

    return from_arrow_schema(record_schema())


def history_schema() -> StructType:
    """Columns of a loaded history: generic op fields extracted, ``value`` kept as JSON text.

    ``process`` is a string (``process_is_int`` keeps ``1`` and ``"1"`` apart, as the format
    requires); ``value`` and ``error_json`` are exact JSON text; ``error`` is the error as plain
    text (a JSON string unquoted, anything else as JSON text) for easy filtering. A big read
    op is several rows with the same ``index`` (see :data:`READ_CHUNK`); ``part`` orders them.
    """
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("index", T.LongType(), False),
            T.StructField("pindex", T.LongType(), True),
            T.StructField("time", T.LongType(), False),
            T.StructField("wall", T.StringType(), True),
            T.StructField("process", T.StringType(), False),
            T.StructField("process_is_int", T.BooleanType(), False),
            T.StructField("type", T.StringType(), False),
            T.StructField("f", T.StringType(), False),
            T.StructField("value", T.StringType(), True),
            T.StructField("error", T.StringType(), True),
            T.StructField("error_json", T.StringType(), True),
            T.StructField("part", T.IntegerType(), True),
        ]
    )


# ------------------------------------------------------------------------------------------
# The cache


def _cache_root(source: Path) -> Path:
    """Where a source's Parquet lives: the run directory's ``.parquet``."""
    parent = source.parent
    if parent.name == "evidence":
        parent = parent.parent
    return parent / CACHE_DIR


def _fingerprint(source: Path) -> dict[str, Any]:
    st = source.stat()
    return {
        "cache_format": CACHE_FORMAT,
        "source": source.name,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
    }


def _read_manifest(manifest: Path) -> dict[str, Any] | None:
    try:
        return json.loads(manifest.read_text())
    except (OSError, ValueError):
        return None


def _cached(source: Path, name: str, cache: bool) -> tuple[Path, Path, dict[str, Any] | None]:
    root = _cache_root(source)
    data, manifest = root / name, root / f"{name}.json"
    if not cache:
        return data, manifest, None
    m = _read_manifest(manifest)
    fp = _fingerprint(source)
    if m is not None and all(m.get(k) == v for k, v in fp.items()) and data.is_dir():
        return data, manifest, m
    return data, manifest, None


def _publish(tmp: Path, data: Path, manifest: Path, meta: dict[str, Any]) -> None:
    """Move a freshly written Parquet dir into place and write its manifest last."""
    if data.exists():
        shutil.rmtree(data)
    tmp.replace(data)
    tmp_m = manifest.with_suffix(f".{uuid.uuid4().hex}.tmp")
    tmp_m.write_text(json.dumps(meta, indent=1) + "\n")
    tmp_m.replace(manifest)


def _scratch(root: Path | None, name: str) -> Path:
    """A scratch directory next to the cache, or in the temp dir (no cache, read-only run).
    One in the temp dir may be what a DataFrame of this process reads until it ends, so it
    is removed when the process exits, not before."""
    try:
        if root is None:
            raise OSError("no cache")
        root.mkdir(parents=True, exist_ok=True)
        d = root / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
        d.mkdir()
        return d
    except OSError:
        from checkers.spark import scratch_dir

        d = scratch_dir(f"kh-{name}-")
        atexit.register(shutil.rmtree, d, True)
        return d


def derived_cache(source: Path, name: str) -> tuple[Path, dict[str, Any] | None]:
    """A cache *derived* from ``source`` (e.g. the eos checks' parsed views): its directory and
    manifest, or None when absent or stale.

    Why: parsing the JSON ``value`` of millions of ops costs more than the checks themselves;
    a checker may store what it parsed once, keyed, like the Parquet cache, by the source's
    size and mtime (and its own ``format`` in the manifest).
    """
    data, _manifest, meta = _cached(source, name, True)
    return data, meta


def publish_derived(
    source: Path, name: str, write: Callable[[Path], dict[str, Any]], meta: dict[str, Any]
) -> tuple[Path, dict[str, Any]] | None:
    """Build a derived cache: ``write(dir)`` fills a scratch dir and returns facts for the
    manifest; the dir is then moved into place with a manifest holding the source fingerprint,
    ``meta`` and those facts. Returns (dir, manifest), or None if the run directory is
    read-only (the caller then works without a cache)."""
    root = _cache_root(source)
    data, manifest = root / name, root / f"{name}.json"
    fp = _fingerprint(source)
    try:
        root.mkdir(parents=True, exist_ok=True)
        scratch = root / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
        scratch.mkdir()
    except OSError:
        return None
    try:
        full = fp | meta | write(scratch / "data")
        _publish(scratch / "data", data, manifest, full)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return data, full


# ------------------------------------------------------------------------------------------
# Log dumps


_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def _converting(source: Path) -> threading.Lock:
    """Held while a source is converted: checks running side by side (the broker-log checks
    and the eos checks both read the dump) convert it once, the later one reads the cache."""
    with _locks_guard:
        return _locks.setdefault(source.resolve(), threading.Lock())


def load_logdump(
    spark: SparkSession, run_or_file: str | os.PathLike[str], *, cache: bool = True
) -> Loaded:
    """The dump's records as a DataFrame with :func:`logdump_schema` columns (header dropped).

    Also adds ``_row``, increasing in file order, used only to order duplicate offsets
    deterministically. Raises :class:`CheckerInputError` for unusable input.
    """
    source = logdump_path(run_or_file)
    if not cache:
        return _load_logdump(spark, source, cache)
    with _converting(source):
        return _load_logdump(spark, source, cache)


def _load_logdump(spark: SparkSession, source: Path, cache: bool) -> Loaded:
    from pyspark.sql import functions as F

    from checkers.logdump_parquet import convert as convert_logdump

    if not source.is_file():
        raise CheckerInputError(f"{source}: no such log dump")
    header = read_header(source)
    data, manifest, meta = _cached(source, "logdump", cache)
    if meta is not None:
        df = spark.read.parquet(str(data))
        return Loaded(
            _clean_logdump(df), source, header, list(meta.get("notes", [])), True, meta["rows"]
        )

    fp = _fingerprint(source)
    torn = torn_tail(source)
    notes = []
    if torn is not None:
        notes.append(
            f"{source}: torn last line skipped (writer crashed mid-write): {snippet(torn)}"
        )
    scratch = _scratch(data.parent if cache else None, "logdump")
    out = scratch / "parquet"
    try:
        rows = convert_logdump(source, out, torn_expected=torn is not None)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    if rows is not None:  # every record well typed: converted without Spark
        return _loaded_logdump(
            spark, source, header, notes, rows, out, (cache, scratch, data, manifest, fp)
        )
    shutil.rmtree(out, ignore_errors=True)
    schema = logdump_schema().add(_CORRUPT, "string", True)
    raw = (
        spark.read.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .json(str(source))
        .withColumn("_row", F.monotonically_increasing_id())
    )
    try:
        raw.write.parquet(str(out))
        written = spark.read.parquet(str(out))
        is_header = F.col("logdump_format").isNotNull()
        corrupt = F.col(_CORRUPT).isNotNull()
        missing = F.lit(False)
        for c in (*REQUIRED_INT, *REQUIRED_BOOL, *REQUIRED_STR):
            missing = missing | F.col(c).isNull()
        bad = (~corrupt) & (~is_header) & (missing | ~F.col("kind").isin(*KINDS))
        agg = written.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(corrupt.cast("int")).alias("corrupt"),
            F.sum((is_header & ~corrupt).cast("int")).alias("headers"),
            F.sum(bad.cast("int")).alias("bad"),
        ).first()
        n_corrupt, n_bad = int(agg["corrupt"] or 0), int(agg["bad"] or 0)
        if n_corrupt > (1 if torn is not None else 0) or n_bad or int(agg["headers"] or 0) != 1:
            raise CheckerInputError(
                first_bad_line(source)
                or f"{source}: {n_corrupt} unparseable and {n_bad} incomplete records"
            )
        rows = int(agg["n"]) - n_corrupt - 1
    except CheckerInputError:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return _loaded_logdump(
        spark, source, header, notes, rows, out, (cache, scratch, data, manifest, fp)
    )


def _loaded_logdump(
    spark: SparkSession,
    source: Path,
    header: dict[str, Any],
    notes: list[str],
    rows: int,
    out: Path,
    where: tuple[bool, Path, Path, Path, dict[str, Any]],
) -> Loaded:
    """A converted dump published as the cache (when it has one) and read back; ``where``:
    (cache, scratch, data, manifest, fingerprint)."""
    cache, scratch, data, manifest, fp = where
    if cache and scratch.parent == data.parent:
        _publish(out, data, manifest, fp | {"rows": rows, "notes": notes})
        shutil.rmtree(scratch, ignore_errors=True)
        out = data
    # else the scratch stays until the process ends: the DataFrame reads it
    return Loaded(_clean_logdump(spark.read.parquet(str(out))), source, header, notes, False, rows)


def _clean_logdump(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return df.filter(F.col(_CORRUPT).isNull() & F.col("logdump_format").isNull()).drop(
        _CORRUPT, "logdump_format", "nodes"
    )


# ------------------------------------------------------------------------------------------
# Histories


#: A read op with more records than this is stored as several rows, one per slice of its
#: records (column ``part``: 0, 1, ...; null for an op stored whole). A final read holds every
#: record of an output partition, millions in a long run: as one JSON string it overflows the
#: JVM's per-row limits and leaves one core to parse it.
READ_CHUNK = 20_000


def load_history(
    spark: SparkSession,
    run_or_file: str | os.PathLike[str],
    *,
    cache: bool = True,
    typed: Callable[[], TypedTables] | None = None,
) -> Loaded:
    """The merged history as a DataFrame with :func:`history_schema` columns.

    Validation is the history format's own (:func:`history.scan.scan_history`, which leaves
    every verdict it cannot prove to ``history.iter_history``): the same torn-last-line rule and
    the same one-line errors as every other history consumer. ``typed``: a family's typed tables
    (:class:`checkers.history_parquet.TypedTables`) the scan also writes, cached apart from a
    load without them; ``Loaded.tables`` is where they are.
    """
    source = history_path(run_or_file)
    if not cache:
        return _load_history(spark, source, cache, typed)
    with _converting(source):
        return _load_history(spark, source, cache, typed)


def _load_history(
    spark: SparkSession, source: Path, cache: bool, typed: Callable[[], TypedTables] | None
) -> Loaded:
    from checkers.history_parquet import ParquetSinks
    from history import HistoryError
    from history.scan import scan_history

    if not source.is_file():
        raise CheckerInputError(f"{source}: no such history")
    family = getattr(typed, "NAME", None)
    name = "history" if family is None else f"history-{family}"
    data, manifest, meta = _cached(source, name, cache)
    if meta is not None:
        df = spark.read.schema(history_schema()).parquet(str(data / "ops"))
        return Loaded(
            df,
            source,
            meta["header"],
            list(meta.get("notes", [])),
            True,
            meta["rows"],
            None if family is None else data / family,
        )
    fp = _fingerprint(source)
    scratch = _scratch(data.parent if cache else None, name)
    out = scratch / "parquet"

    def discard() -> None:
        shutil.rmtree(out, ignore_errors=True)

    try:
        scanned = scan_history(source, ParquetSinks(str(out), READ_CHUNK, typed), discard=discard)
    except HistoryError as e:
        shutil.rmtree(scratch, ignore_errors=True)
        raise CheckerInputError(str(e)) from None
    except OSError as e:
        shutil.rmtree(scratch, ignore_errors=True)
        raise CheckerInputError(f"{source}: cannot read: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    if scanned.header is None:
        shutil.rmtree(scratch, ignore_errors=True)
        raise CheckerInputError(f"{source}: empty history (no header line)")
    header, notes, n = dict(scanned.header), scanned.notes, scanned.ops
    meta = fp | {"rows": n, "notes": notes, "header": header}
    if cache and scratch.parent == data.parent:
        _publish(out, data, manifest, meta)
        shutil.rmtree(scratch, ignore_errors=True)
        out = data
    df = spark.read.schema(history_schema()).parquet(str(out / "ops"))
    return Loaded(df, source, header, notes, False, n, None if family is None else out / family)
