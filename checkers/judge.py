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
from history.logdump import CheckerInputError

if TYPE_CHECKING:
    from checkers.suites import RunContext, RunDirCheck

log = logging.getLogger("checkers.judge")


class RunDirUnusable(Exception):
    """The run directory cannot be judged at all (nothing to check, or unusable input)."""


class Judgement:
    """The verdict on one run directory, prepared early and completed on demand.

    A Spark context that is already running in this process (a test session's, a campaign's,
    one :func:`checkers.spark.prewarm` started) is used and left running; one started here
    is stopped, JVM included, when :meth:`result` returns.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        spark_master: str | None = None,
        transaction_version: int | None = None,
        max_examples: int = 8,
    ) -> None:
        from checkers.suites import RunContext, read_config

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

    # --- the two steps ----------------------------------------------------------------

    def prepare(self) -> None:
        """Start converting the inputs that exist now (in a thread; errors are left for
        :meth:`result`, which reports them exactly as a check from scratch would)."""
        from checkers.suites import checks_for

        try:
            checks = [c for c in checks_for(self.run_dir, self.ctx.config or {}) if c.prepare]
        except CheckerInputError:
            return
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

        spark = self._spark() if any(c.spark for c in checks) else None
        parts: dict[str, dict[str, Any]] = {}
        futures: dict[str, Future[dict[str, Any]]] = {}
        with ThreadPoolExecutor(max_workers=len(checks), thread_name_prefix="check") as pool:
            for check in checks:
                if check.spark and spark is None:
                    parts[check.name] = unknown_result(self._spark_error or "no Spark session")
                    continue
                ctx = replace(self.ctx, spark=spark.newSession() if check.spark else None)
                futures[check.name] = pool.submit(self._timed, check, ctx)
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

    def _timed(self, check: RunDirCheck, ctx: RunContext) -> dict[str, Any]:
        """``check.run``, its seconds kept in :attr:`seconds` (a failed check's too: the
        time was spent)."""
        t0 = time.monotonic()
        try:
            return check.run(ctx)
        finally:
            self.seconds[check.name] = round(time.monotonic() - t0, 3)


def merge_verdicts(
    parts: dict[str, dict[str, Any]], findings: Collection[str] | None = None
) -> dict[str, Any]:
    """Combine the partial verdicts of the run-dir checks into the printed result.

    Two shapes of part exist: broker-log evidence names its anomaly types per checker
    (``anomalies`` and ``bad_anomaly_types`` inside each checker), the eos checks name them
    at part level (``anomalies`` = counts of the checks that failed, one checker per type,
    ``liveness`` beside). A part whose own ``valid`` is false always makes the run invalid,
    whatever shape it has, so no part can be lost in the merge. ``findings`` (the ids the
    run's client is known for, from its config) limits the known findings to those.
    """
    checkers: dict[str, Any] = {}
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
) -> dict[str, Any]:
    """Run every applicable check on a stored run directory and write ``results.json``.

    Returns the merged verdict (``valid`` is True, False or "unknown"); see
    :class:`Judgement`.
    """
    return Judgement(
        path,
        spark_master=spark_master,
        transaction_version=transaction_version,
        max_examples=max_examples,
    ).result()


__all__ = ["Judgement", "RunDirUnusable", "judge_run_dir"]
