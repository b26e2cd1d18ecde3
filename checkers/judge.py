"""Judging a stored run directory: its checks run side by side in one Spark context.

Why concurrent: the checks of a short run are dozens of small Spark queries, each mostly
driver-side planning and scheduling on one core, so two families of checks run one after the
other leave a core idle (measured on 2 cores, a 60 s run's checks in a warm JVM: 9.3 s in
turn, 6.5 s side by side). Each Spark check gets a session of its own
(``SparkSession.newSession``: one JVM and one cache, separate SQL settings), because each
tunes the session for its input's size and those settings must not leak into the other.

Why in two steps: converting a history (JSON to Parquet, its views parsed) and the checks that
need no broker log dump are most of a short run's check, so the harness calls
:meth:`Judgement.prepare` as soon as the history is merged, while the cluster stops and its logs
are dumped, and :meth:`Judgement.result` once the dump is on disk; the checks then read the
caches, and the eos checks done early are not run again (:func:`checkers.eos.run.prepare_eos`).
The verdict is the same as a check of the stored run from scratch (``python -m checkers
RUN_DIR``).

Why two engines: even a warm JVM spends seconds on a small run's dozens of queries, and a
cold one tens of seconds, while the plain-Python references judge such a run in about a
second. So a check whose reference gives the whole same part (``RunDirCheck.python``) runs on
it when the run is small (:data:`PYTHON_MAX_BYTES`); big runs, a Spark cluster asked for, and
checks without such a reference run on Spark, which is started only if one of them needs it.
Each part says which engine judged it (``engine``; the merged verdict's ``engines``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.findings import known_findings
from checkers.suites import PYTHON, SPARK
from history.logdump import CheckerInputError

if TYPE_CHECKING:
    from checkers.suites import RunContext, RunDirCheck

log = logging.getLogger("checkers.judge")

#: What ``engine`` may be: ``auto`` (Python for a small run, where a check has a Python
#: engine), ``spark`` (always Spark) or ``python`` (the Python engine wherever a check has one).
ENGINES = ("auto", SPARK, PYTHON)

#: Bytes of input (``history.jsonl`` plus ``evidence/logdump.jsonl``) below which ``auto``
#: judges on the Python engines. Bytes, not lines: a history line is anything from one op to
#: a final read of thousands of records, while both engines' cost follows the bytes they
#: parse, and a size costs one stat where counting lines reads the file.
#:
#: Measured on this 2-core machine on 2026-11-27 (through :class:`Judgement`, both engines
#: in one process): the whole judgement of a fresh copy of each run, two
#: each, Spark's in a session warmed by three judgements first (a cold session adds 20-35 s);
#: wall seconds, and in brackets CPU seconds (the Python process's plus the JVM's). Quiet
#: machine (load average 2.5-3.5, mostly Spark's own threads):
#:
#: ====================================  ===========================  ========================
#: input: history + dump                 Python engines: wall (CPU)   warm Spark: wall (CPU)
#: ====================================  ===========================  ========================
#: synthetic eos, 13 MB                  1.6 s (1.8-2.2 s)            7.4-7.6 s (14-15 s)
#: real eos main jobs, 60 s, 19-20 MB    1.6-2.0 s (1.8-2.7 s)        8.9-11.5 s (17-22 s)
#: real connect run, 45 s, 33 MB         2.7-3.1 s (2.9-3.5 s)        7.3-8.7 s (14-16 s)
#: synthetic eos, 55 MB                  7.6-8.3 s (8.1-8.8 s)        14.4-14.9 s (26-27 s)
#: synthetic eos, 137 MB                 17.2-19.3 s (18-20 s)        18.3-20.5 s (33-37 s)
#: synthetic eos, 275 MB                 40.2-40.3 s (42 s)           47-56 s (83-100 s)
#: ====================================  ===========================  ========================
#:
#: Loaded by a CI-like test run (load average 12-22) the real main jobs took 2.6-3.4 s on
#: Python against 25-32 s on Spark, and 55 MB 6.9-13 s against 39-49 s: Spark, which wants
#: both cores, suffers most. The references' cost grows with the bytes (about 0.15 s a MB on
#: one core; peak RSS 170 MiB at 55 MB, 370 MiB at 137 MB), Spark's is mostly fixed (planning
#: some seventy small jobs) up to about 50 MB: they are about even from 137 MB on. Below
#: 64 MiB the Python engines are at least 1.6 times as fast as a warm session and take a third
#: of its CPU or less, and every real run measured so far is below it (an hour's soak: 35 MB).
PYTHON_MAX_BYTES = 64 << 20


class RunDirUnusable(Exception):
    """The run directory cannot be judged at all (nothing to check, or unusable input)."""


class Judgement:
    """The verdict on one run directory, prepared early and completed on demand.

    A Spark context that is already running in this process (a test session's, a campaign's,
    one :func:`checkers.spark.prewarm` started) is used and left running; one started here
    is stopped, JVM included, when :meth:`result` returns. ``engine`` (:data:`ENGINES`) says
    which checks run on their Python engine (:meth:`on_python`); none needing Spark, no
    Spark context is started at all.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        spark_master: str | None = None,
        transaction_version: int | None = None,
        max_examples: int = 8,
        engine: str = "auto",
    ) -> None:
        from checkers.suites import RunContext, read_config

        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        self.engine = engine
        self.run_dir = Path(run_dir)
        config = read_config(self.run_dir)
        self.ctx: RunContext = RunContext(
            self.run_dir, spark_master, transaction_version, max_examples, config
        )
        self._prepared: threading.Thread | None = None
        self._started_spark = False
        self._spark_error: str | None = None
        self._lock = threading.Lock()
        #: Seconds each check ran in :meth:`result`, by suite name (side by side, so they
        #: overlap): the harness records them as the run's per-checker phases.
        self.seconds: dict[str, float] = {}

    # --- the Spark context ------------------------------------------------------------

    def _spark(self) -> Any:
        """The process's Spark session, started here if none runs; None if it cannot start."""
        from checkers.spark import active_session, spark_error, start_spark

        with self._lock:
            if self._spark_error is not None:
                return None
            running = active_session()
            if running is not None:
                return running
            try:
                session = start_spark(self.ctx.spark_master)
            except Exception as e:
                self._spark_error = str(spark_error(e))
                return None
            self._started_spark = True
            return session

    def _stop_spark(self) -> None:
        if self._started_spark:
            from checkers.spark import stop_spark

            stop_spark()
            self._started_spark = False

    # --- the engine -------------------------------------------------------------------

    def input_bytes(self) -> int:
        """The run's input as it is now: ``history.jsonl`` plus ``evidence/logdump.jsonl``."""
        total = 0
        for path in (self.run_dir / "history.jsonl", self.run_dir / "evidence" / "logdump.jsonl"):
            with contextlib.suppress(OSError):
                total += path.stat().st_size
        return total

    def on_python(self, check: RunDirCheck) -> bool:
        """Whether ``check`` runs on its Python engine: it has one, no Spark cluster was asked
        for (``spark_master``, or ``$KAFKA_HARNESS_SPARK_MASTER``: a cluster is a request for
        Spark, always), and the engine is ``python``, or ``auto`` and the run is small.

        Decided on the input present when asked: :meth:`prepare`, called before the log dump
        exists, may find a run small that :meth:`result` then judges on Spark (unprepared,
        which costs time, never a different verdict)."""
        from checkers.spark import ENV_MASTER

        if check.python is None or self.engine == SPARK:
            return False
        if self.ctx.spark_master or os.environ.get(ENV_MASTER):
            return False
        return self.engine == PYTHON or self.input_bytes() < PYTHON_MAX_BYTES

    # --- the two steps ----------------------------------------------------------------

    def prepare(self) -> None:
        """Start converting the inputs that exist now (in a thread; errors are left for
        :meth:`result`, which reports them exactly as a check from scratch would)."""
        from checkers.suites import checks_for

        try:
            checks = checks_for(self.run_dir, self.ctx.config or {})
        except CheckerInputError:
            return
        checks = [c for c in checks if c.prepare and not self.on_python(c)]
        if not checks:
            return

        def work() -> None:
            spark = self._spark()
            if spark is None:
                return
            for check in checks:
                assert check.prepare is not None
                try:
                    check.prepare(replace(self.ctx, spark=spark.newSession()))
                except Exception as e:  # the check itself will meet and report it
                    log.info("preparing %s for %s: %s", check.name, self.run_dir, e)

        self._prepared = threading.Thread(target=work, name="checkers-prepare", daemon=True)
        self._prepared.start()

    def result(self) -> dict[str, Any]:
        """Run every applicable check, side by side; merge, write ``results.json``, return.

        Raises :class:`RunDirUnusable` when there is nothing to check or the input is
        unusable (``results.json`` then says so).
        """
        from checkers.suites import checks_for

        try:
            if self._prepared is not None:
                self._prepared.join()
            try:
                checks = checks_for(self.run_dir, self.ctx.config or {})
            except CheckerInputError as e:
                raise RunDirUnusable(str(e)) from e
            if not checks:
                raise RunDirUnusable(
                    f"nothing to check in {self.run_dir}: "
                    "no history.jsonl and no evidence/logdump.jsonl"
                )
            parts = self._run(checks)
        finally:
            self._stop_spark()
        options = (self.ctx.config or {}).get("workload_options") or {}
        result = merge_verdicts(parts, findings=options.get("client_findings"))
        write_results(self.run_dir, result)
        return result

    def _run(self, checks: list[RunDirCheck]) -> dict[str, dict[str, Any]]:
        from checkers.verdict import unknown_result

        python = {c.name for c in checks if self.on_python(c)}
        needs_spark = any(c.spark and c.name not in python for c in checks)
        spark = self._spark() if needs_spark else None
        parts: dict[str, dict[str, Any]] = {}
        futures: dict[str, Future[dict[str, Any]]] = {}
        with ThreadPoolExecutor(max_workers=len(checks), thread_name_prefix="check") as pool:
            for check in checks:
                on_spark = check.spark and check.name not in python
                if on_spark and spark is None:
                    part = unknown_result(self._spark_error or "no Spark session")
                    parts[check.name] = {**part, "engine": SPARK}
                    continue
                ctx = replace(self.ctx, spark=spark.newSession() if on_spark else None)
                futures[check.name] = pool.submit(self._timed, check, ctx, check.name in python)
        bad_input: CheckerInputError | None = None
        for check in checks:  # in the suites' order, so the merged verdict's order is stable
            future = futures.get(check.name)
            if future is None:
                continue
            try:
                parts[check.name] = future.result()
            except CheckerInputError as e:
                bad_input = bad_input or e
        if bad_input is not None:
            write_results(
                self.run_dir, {"valid": "unknown", "error": str(bad_input), "checkers": {}}
            )
            raise RunDirUnusable(str(bad_input)) from bad_input
        return {c.name: parts[c.name] for c in checks if c.name in parts}

    def _timed(self, check: RunDirCheck, ctx: RunContext, python: bool) -> dict[str, Any]:
        """The check's part by its engine, its seconds kept in :attr:`seconds` (a failed
        check's too: the time was spent)."""
        t0 = time.monotonic()
        try:
            return self._judged(check, ctx, python)
        finally:
            self.seconds[check.name] = round(time.monotonic() - t0, 3)

    def _judged(self, check: RunDirCheck, ctx: RunContext, python: bool) -> dict[str, Any]:
        """``check.python`` or ``check.run``, the part marked with the engine that judged it.

        A Python engine that fails other than on the input (a bug in a reference) must not
        decide the verdict: the check is then judged on Spark, as if it had no Python engine.
        """
        from checkers.verdict import unknown_result

        if python:
            assert check.python is not None
            try:
                return {**check.python(ctx), "engine": PYTHON}
            except CheckerInputError:
                raise
            except Exception as e:
                log.warning("the Python engine of %s failed (%s); judging on Spark", check.name, e)
            spark = self._spark()
            if spark is None:
                part = unknown_result(self._spark_error or "no Spark session")
                return {**part, "engine": SPARK}
            ctx = replace(ctx, spark=spark.newSession())
        return {**check.run(ctx), "engine": SPARK if check.spark else PYTHON}


def merge_verdicts(
    parts: dict[str, dict[str, Any]], findings: Collection[str] | None = None
) -> dict[str, Any]:
    """Combine the partial verdicts of the run-dir checks into the printed result.

    Two shapes of part exist: broker-log evidence names its anomaly types per checker
    (``anomalies`` and ``bad_anomaly_types`` inside each checker), the eos checks name them
    at part level (``anomalies`` = counts of the checks that failed, one checker per type,
    ``liveness`` beside). A part whose own ``valid`` is false always makes the run invalid,
    whatever shape it has, so no part can be lost in the merge. ``findings`` (the ids the
    run's client is known for, from its config) limits the known findings to those. The
    engine each part was judged by (its ``engine``) is kept under ``engines``.
    """
    checkers: dict[str, Any] = {}
    engines: dict[str, str] = {}
    anomalies: dict[str, int] = {}
    bad: set[str] = set()
    errors: dict[str, str] = {}
    stats: dict[str, Any] = {}
    liveness: dict[str, Any] = {}
    notes: list[str] = []
    for name, part in parts.items():
        if part.get("valid") == "unknown" or "error" in part:
            errors[name] = str(part.get("error", "unknown verdict"))
        part_bad: set[str] = set(part.get("bad_anomaly_types", []))
        for cname, res in part.get("checkers", {}).items():
            checkers[cname] = res
            anomalies.update(res.get("anomalies", {}))
            part_bad.update(res.get("bad_anomaly_types", []))
            if res.get("valid") is False and "anomalies" not in res:
                part_bad.add(cname)  # an eos check: the checker is the anomaly type
            if res.get("valid") == "unknown":
                errors[cname] = str(res.get("error", "unknown verdict"))
        anomalies.update(part.get("anomalies", {}))
        if part.get("valid") is False and not part_bad:
            part_bad = {t for t, n in part.get("anomalies", {}).items() if n} or {name}
        bad |= part_bad
        if "stats" in part:
            stats[name] = part["stats"]
        if "liveness" in part:
            liveness[name] = part["liveness"]
        if "engine" in part:
            engines[name] = str(part["engine"])
        notes += part.get("input_notes", [])
    valid: bool | str = False if bad else ("unknown" if errors else True)
    out: dict[str, Any] = {
        "valid": valid,
        "anomalies": dict(sorted(anomalies.items())),
        "bad_anomaly_types": sorted(bad),
        "checkers": checkers,
    }
    if liveness:
        out["liveness"] = liveness
    if errors:
        out["errors"] = errors
    if stats:
        out["stats"] = stats
    if notes:
        out["input_notes"] = notes
    if engines:
        out["engines"] = engines
    found = known_findings(out, findings)
    if found:
        out["known_findings"] = found
    return out


def write_results(run_dir: Path, result: dict[str, Any]) -> None:
    """``results.json`` beside the run, replaced atomically; a read-only run is not an error."""
    target = run_dir / "results.json"
    tmp = run_dir / f".results.json.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(result, indent=2, default=str) + "\n")
        tmp.replace(target)


def judge_run_dir(
    path: str | Path,
    *,
    spark_master: str | None = None,
    transaction_version: int | None = None,
    max_examples: int = 8,
    engine: str = "auto",
) -> dict[str, Any]:
    """Run every applicable check on a stored run directory and write ``results.json``.

    Returns the merged verdict (``valid`` is True, False or "unknown"); see
    :class:`Judgement` (``engine``: :data:`ENGINES`).
    """
    return Judgement(
        path,
        spark_master=spark_master,
        transaction_version=transaction_version,
        max_examples=max_examples,
        engine=engine,
    ).result()


__all__ = ["ENGINES", "PYTHON_MAX_BYTES", "Judgement", "RunDirUnusable", "judge_run_dir"]
