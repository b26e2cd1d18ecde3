"""The eos family on a run directory: build the run's frames once, run every check side by side.

Public API::

    check_eos(run_dir, spark=None, max_examples=8) -> dict
        {"valid": bool | "unknown", "anomalies": {type: count},
         "checkers": {name: {"valid", "count", "examples"}}, "liveness": {...}}
    eos_checks(spark, run_dir, *, max_examples=8)   # with an existing session
    prepare_eos(spark, run_dir, max_examples=8)     # the checks that need no log dump, early

A malformed history raises :class:`checkers.load.CheckerInputError` (one line). A Spark
failure, or an exception inside one check, makes that check ``valid: "unknown"``, never true.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.eos import results as X
from checkers.eos import rules as eos_rules
from checkers.eos.checks import (
    check_aborted_read,
    check_committed_later,
    check_duplicate,
    check_invalid_state_commit,
    check_lost,
    check_premature_commit,
    check_zombie,
    log_at,
)
from checkers.eos.extract import EosTables
from checkers.eos.frames import EosFrames
from checkers.eos.log import defer_log
from checkers.eos.starts import check_started_below
from checkers.eos.views import build
from checkers.load import CheckerInputError, Loaded, history_path, load_history, logdump_path
from checkers.spark import restore_conf, set_conf, spark_error, spark_session

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

__all__ = ["CHECKS", "CheckerInputError", "check_eos", "eos_checks", "prepare_eos"]


#: Safety checks in report order, then the notices; each takes (frames, max_examples, spark,
#: run_dir).
CHECKS: dict[str, Callable[[EosFrames, int, SparkSession, Path], dict[str, Any]]] = {
    "lost": check_lost,
    "duplicate": lambda fr, n, _s, _d: check_duplicate(fr, n),
    "zombie-write": lambda fr, n, _s, _d: check_zombie(fr, n),
    "aborted-read": check_aborted_read,
    "committed-in-later-transaction": check_committed_later,
    "premature-commit": check_premature_commit,
    "torn-transaction": lambda fr, n, s, d: eos_rules.check_torn(
        fr, n, lambda outs: log_at(fr, s, d, outs)
    ),
    "order": lambda fr, n, _s, _d: eos_rules.check_order(fr, n),
    "hanging-transaction": eos_rules.check_hanging,
    "started-below-committed": lambda fr, n, _s, _d: check_started_below(fr, n),
    "invalid-state-commit": lambda fr, n, _s, _d: check_invalid_state_commit(fr, n),
}


#: How many checks run at once: each is a few small queries whose planning takes one core, so
#: on two cores three side by side keep both busy.
CHECK_THREADS = 3


def _error(e: BaseException) -> str:
    return str(spark_error(e))


def eos_checks(spark: SparkSession, run_dir: Path, *, max_examples: int = 8) -> dict[str, Any]:
    """Every eos check with an existing session; input errors raise CheckerInputError."""
    loaded = load_history(spark, run_dir, typed=EosTables)
    saved = _tune(spark, loaded.rows)
    try:
        return _eos_checks(spark, loaded, Path(run_dir), max_examples)
    finally:
        restore_conf(spark, saved)


def prepare_eos(spark: SparkSession, run_dir: Path, max_examples: int = 8) -> None:
    """Convert the history and parse its views into the run's caches, and, while the run has
    no broker log dump yet, run every check that needs none.

    Why: the conversion and most checks need only the history, so the harness runs them while
    the cluster stops and its logs are dumped; the check proper then reads the caches and
    runs only what needed the dump (:data:`_EARLY` keeps the rest). A check that needs the
    dump for its count (``aborted-read``), or for the evidence of an example it found,
    raises :class:`checkers.eos.log.LogNotYet` here and is simply run again later. Input
    errors are left for the check to report.
    """
    run_dir = Path(run_dir)
    try:
        loaded = load_history(spark, run_dir, typed=EosTables)
    except CheckerInputError:
        return
    saved = _tune(spark, loaded.rows)
    try:
        fr = build(spark, loaded)
        try:
            key = _early_key(run_dir, max_examples)
            if key is not None and not logdump_path(run_dir).is_file():
                defer_log(fr)
                _remember(key, _without_log(fr, max_examples, spark, run_dir))
        finally:
            fr.release()
    finally:
        restore_conf(spark, saved)


#: Checks run early by :func:`prepare_eos`, by (history, size, mtime, max_examples): results
#: that did not touch the dump, so a later check of the same history returns them unchanged.
_EARLY: dict[tuple[str, int, int, int], dict[str, dict[str, Any]]] = {}


_EARLY_LOCK = threading.Lock()


#: The name the liveness check goes by among the early results.
_PROGRESS = ""


def _early_key(run_dir: Path, max_examples: int) -> tuple[str, int, int, int] | None:
    path = history_path(run_dir)
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, max_examples)


def _remember(key: tuple[str, int, int, int], results: dict[str, dict[str, Any]]) -> None:
    with _EARLY_LOCK:
        _EARLY.clear()  # one run's at a time: a process judges its runs one after another
        _EARLY[key] = results


def _take_early(run_dir: Path, max_examples: int) -> dict[str, dict[str, Any]]:
    key = _early_key(run_dir, max_examples)
    with _EARLY_LOCK:
        return _EARLY.pop(key, {}) if key is not None else {}


def _jobs(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, Callable[[], dict[str, Any]]]:
    """Every safety check by name, and the liveness check as :data:`_PROGRESS`."""
    jobs: dict[str, Callable[[], dict[str, Any]]] = {
        name: (lambda fn=fn: fn(fr, max_examples, spark, run_dir)) for name, fn in CHECKS.items()
    }
    jobs[_PROGRESS] = lambda: eos_rules.check_progress(fr, max_examples)
    return jobs


def _without_log(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, dict[str, Any]]:
    """The checks that complete without the dump; a failing one is left for the check."""
    jobs = _jobs(fr, max_examples, spark, run_dir)

    def attempt(fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        try:
            return fn()
        except Exception:  # LogNotYet, or a failure the check proper will meet and report
            return None

    with ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="eos-early") as pool:
        futures = {name: pool.submit(attempt, fn) for name, fn in jobs.items()}
    done = {name: f.result() for name, f in futures.items()}
    return {name: r for name, r in done.items() if r is not None}


#: Session settings by history size. Small runs (tests, short real runs) are dominated by
#: per-query overhead: adaptive planning and whole-stage code generation cost more than they
#: save (measured: about 3x faster without), and so does compiling expressions at all
#: (interpreted: 9.2 s against 12.4 s for a 60 s run's checks in a warm JVM, two shuffle
#: partitions included). Big runs are dominated by rows: generated code and adaptive
#: coalescing of shuffle partitions win there.
SMALL_RUN = 200_000


_TUNE_SMALL = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.autoBroadcastJoinThreshold": str(64 << 20),
}


_TUNE_BIG = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
    "spark.sql.autoBroadcastJoinThreshold": str(64 << 20),
}


def _tune(spark: SparkSession, rows: int) -> dict[str, str | None]:
    return set_conf(spark, _TUNE_SMALL if rows < SMALL_RUN else _TUNE_BIG)


def _eos_checks(
    spark: SparkSession, loaded: Loaded, run_dir: Path, max_examples: int
) -> dict[str, Any]:
    try:
        fr = build(spark, loaded)
    except CheckerInputError:
        raise
    except Exception as e:  # cannot even parse the views: every check is unknown
        return X.all_unknown(_error(e))
    early = _take_early(run_dir, max_examples)
    try:
        jobs = _jobs(fr, max_examples, spark, run_dir)
        jobs |= {name: (lambda r=r: r) for name, r in early.items()}
        progress = jobs.pop(_PROGRESS)
        out = X.run_checks(jobs, progress, _error, CHECK_THREADS)
    finally:
        fr.release()
    if loaded.notes:
        out["input_notes"] = list(loaded.notes)
    return out


def check_eos(
    run_dir: Path, spark: SparkSession | None = None, max_examples: int = 8
) -> dict[str, Any]:
    """All eos checks on a stored run, with the given session or one started for this call.

    A session started here is stopped (JVM included) before returning. Unusable input raises
    :class:`CheckerInputError`; a Spark failure gives ``valid: "unknown"`` with the error.
    """
    run_dir = Path(run_dir)
    try:
        if spark is not None:
            return eos_checks(spark, run_dir, max_examples=max_examples)
        with spark_session() as s:
            return eos_checks(s, run_dir, max_examples=max_examples)
    except CheckerInputError:
        raise
    except Exception as e:
        out = X.all_unknown(_error(e))
        out["error"] = _error(e)
        return out
