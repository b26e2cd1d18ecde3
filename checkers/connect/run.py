"""The connect family on a run directory: scan (or reuse the cached scan), plan, judge on Spark.

Public API::

    check_connect(run_dir, spark=None, max_examples=8) -> dict
        {"checker": "connect", "valid": bool | "unknown", "anomalies": {type: count},
         "examples": {type: [...]}, "stats", "notes", ...}
    connect_checks(spark, run_dir, *, max_examples=8)   # None: a session of its own
    load_connect(run_dir) -> (ConnectInput, temp dir or None)

A malformed history raises :class:`history.logdump.CheckerInputError` (one line).
Incomplete final reads, or a Spark failure, give ``valid: "unknown"`` with ``error``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from checkers.connect import results as X
from checkers.connect.checks import judge
from checkers.connect.extract import FORMAT, connect_meta
from checkers.connect.views import ConnectInput, history_file, plan, scan_connect
from checkers.load import derived_cache, publish_derived
from checkers.spark import scratch_dir, spark_error, spark_session
from history.logdump import CheckerInputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["check_connect", "connect_checks", "load_connect"]


#: The derived cache's name under the run's ``.parquet``.
CACHE: Final = "connect"


def load_connect(run_dir: str | Path) -> tuple[ConnectInput, Path | None]:
    """The scanned run with its rows as Parquet: the run's cache when it is current, else a
    fresh scan published there; in a temp dir (returned second, for the caller to remove)
    when the run directory is read-only."""
    source = history_file(run_dir)
    if not source.is_file():
        raise CheckerInputError(f"{source}: no such history")
    data, manifest = derived_cache(source, CACHE)
    if manifest is not None and manifest.get("connect_format") == FORMAT:
        return _from_manifest(source, data, manifest), None

    def write(d: Path) -> dict[str, Any]:
        got = scan_connect(source, out=d)
        return {
            "header": got.header,
            "facts": got.facts,
            "notes": got.notes,
            "journal_ops": got.journal_ops,
            "progress": got.progress,
        }

    published = publish_derived(source, CACHE, write, {"connect_format": FORMAT})
    if published is not None:
        return _from_manifest(source, *published), None
    tmp = scratch_dir("kh-connect-")
    return scan_connect(source, out=tmp / "rows"), tmp


def _from_manifest(source: Path, data: Path, manifest: dict[str, Any]) -> ConnectInput:
    header = manifest["header"]
    meta, why = connect_meta(header)
    facts = [list(f) for f in manifest["facts"]]
    notes = list(manifest["notes"])
    journal_ops = int(manifest["journal_ops"])
    return ConnectInput(
        source,
        header,
        meta,
        why,
        facts,
        notes,
        journal_ops=journal_ops,
        parquet=data,
        progress=manifest.get("progress"),
    )


def connect_checks(
    spark: SparkSession | None, run_dir: str | Path, *, max_examples: int = 8
) -> dict[str, Any]:
    """The checker with a session (None: start one only if the reads are complete, and
    stop it afterwards). Unusable input raises :class:`CheckerInputError`."""
    X.check_max_examples(max_examples)
    got, tmp = load_connect(run_dir)
    try:
        p = plan(got)
        dump = got.path.parent / "evidence" / "logdump.jsonl"
        has_dump = dump.is_file()
        notes = X.base_notes(p, has_dump, got.journal_ops)
        stats = X.base_stats(got.meta, p, has_dump, got.journal_ops)
        if p.unknown is not None or got.meta is None:
            return X.unknown(p.unknown or "no meta", stats, notes, got.notes, max_examples)
        try:
            if spark is not None:
                counts, examples, more = judge(
                    spark, got, p, dump if has_dump else None, max_examples
                )
            else:
                with spark_session() as s:
                    counts, examples, more = judge(
                        s, got, p, dump if has_dump else None, max_examples
                    )
        except CheckerInputError:
            raise
        except Exception as e:
            return X.unknown(str(spark_error(e)), stats, notes, got.notes, max_examples)
        X.add_progress(got, counts, examples, notes, max_examples)
        return X.result(counts, examples, stats | more, notes, got.notes, max_examples)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def check_connect(
    run_dir: str | Path, spark: SparkSession | None = None, max_examples: int = 8
) -> dict[str, Any]:
    """The connect checker on a stored run, with the given session or one started for
    this call (stopped, JVM included, before returning)."""
    return connect_checks(spark, Path(run_dir), max_examples=max_examples)
