"""The checker suites ``python -m checkers RUN_DIR`` can run, by name.

The checkers cannot import the workloads (the arrows point the other way), so a run's
``config.json`` names the suites that judge it: ``checker_suites``, written by the harness
from the workload's declaration (``workloads.spec.WorkloadSpec.checker_suites``). A run
stored before that key existed is judged by the suite named like its ``workload``. The
broker-log evidence is judged whenever the run has a log dump, whatever the workload.

A new kind of check is a function ``run(ctx) -> partial verdict`` added to :data:`SUITES`
under a new name; a workload that wants it lists that name.

Two engines: ``run`` judges on Spark (it scales to any run); ``python``, where a family's
plain-Python reference is held by its tests to give the *whole* same partial verdict,
examples included, judges a small run without starting a JVM (:class:`checkers.judge.Judgement`
chooses). Every suite's Spark engine has such a twin: eos (``checkers.eos.pyref``), connect,
streams, share, offsets and the broker-log evidence (``checkers.logs.pyref.check_evidence_py``);
the queue suite has no Spark engine at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.engines import PYTHON, SPARK
from history.logdump import CheckerInputError


@dataclass(frozen=True)
class RunContext:
    """What a run-directory check gets: the directory, its config and the command line."""

    run_dir: Path
    spark_master: str | None = None
    transaction_version: int | None = None
    max_examples: int = 8
    config: dict[str, Any] | None = None
    #: The Spark session this check uses (its own, so its SQL settings are its own); None
    #: for a check without Spark, or to let the check find or start one.
    spark: Any = None

    @property
    def workload_options(self) -> dict[str, Any]:
        """The run's workload options (a queue run stored before the registry kept them
        under ``queue``)."""
        config = self.config or {}
        return dict(config.get("workload_options") or config.get("queue") or {})


@dataclass(frozen=True)
class RunDirCheck:
    """One family of checks on a run directory.

    ``applies(run_dir)`` says whether the directory has its input; ``run(ctx)`` returns a
    partial verdict ``{"checkers": {name: result, ...}}`` (optionally ``stats``,
    ``input_notes``, or ``valid: "unknown"`` with ``error``) and raises
    :class:`history.logdump.CheckerInputError` for unusable input. Checks with ``spark`` share
    one Spark context, started only when one of them runs, each in a session of its own.
    ``prepare(ctx)``, if given, does the check's costly conversion of its input ahead of the
    check (:meth:`checkers.judge.Judgement.prepare`), leaving caches the check then reads.
    ``python(ctx)``, if given, returns exactly what ``run(ctx)`` returns, computed in this
    process without Spark (``ctx.spark`` is None): a small run's verdict then needs no JVM.
    Give it only where the tests hold the two equal as whole results; it may raise
    :class:`history.logdump.CheckerInputError` like ``run``, and any other exception makes
    the judgement fall back to ``run``.
    """

    name: str
    applies: Callable[[Path], bool]
    run: Callable[[RunContext], dict[str, Any]]
    spark: bool = True
    prepare: Callable[[RunContext], None] | None = None
    python: Callable[[RunContext], dict[str, Any]] | None = None


def _has_history(run_dir: Path) -> bool:
    return (run_dir / "history.jsonl").is_file()


def _queue_history(run_dir: Path) -> Path:
    """``history.jsonl``; a queue run stored before the registry merged it into ``queue/``."""
    legacy = run_dir / "queue" / "history.jsonl"
    return legacy if legacy.is_file() and not _has_history(run_dir) else run_dir / "history.jsonl"


def _evidence_run(ctx: RunContext) -> dict[str, Any]:
    from checkers.logs.run import check_evidence

    return check_evidence(
        ctx.run_dir,
        ctx.spark_master,
        transaction_version=ctx.transaction_version,
        max_examples=ctx.max_examples,
        spark=ctx.spark,
    )


def _evidence_py(ctx: RunContext) -> dict[str, Any]:
    """The broker-log checks by their reference (:func:`checkers.logs.pyref.check_logdump`)."""
    from checkers.logs.pyref import check_evidence_py

    return check_evidence_py(
        ctx.run_dir, transaction_version=ctx.transaction_version, max_examples=ctx.max_examples
    )


def _eos_run(ctx: RunContext) -> dict[str, Any]:
    from checkers.eos.run import check_eos

    return check_eos(ctx.run_dir, spark=ctx.spark, max_examples=ctx.max_examples)


def _eos_py(ctx: RunContext) -> dict[str, Any]:
    """The eos checks by their reference; its part has the Spark engine's shape (the eos
    family's result is the part itself: ``checkers``, ``anomalies``, ``liveness``)."""
    from checkers.eos.pyref import check_eos_py

    return check_eos_py(ctx.run_dir, max_examples=ctx.max_examples)


def _eos_prepare(ctx: RunContext) -> None:
    from checkers.eos.run import prepare_eos

    prepare_eos(ctx.spark, ctx.run_dir, ctx.max_examples)


def _queue_run(ctx: RunContext) -> dict[str, Any]:
    """Jepsen's queue checks on the merged history, one checker named ``queue``; how the
    consumers got their partitions (which decides whether poll skips are allowed) comes
    from the run's workload options."""
    from checkers.queue.checks import HistoryInputError, check_queue, load_queue_history

    sub_via = ctx.workload_options.get("sub_via", "assign")
    try:
        ops = load_queue_history(str(_queue_history(ctx.run_dir)))
        result = check_queue(ops, sub_via=sub_via, max_examples=ctx.max_examples)
    except HistoryInputError as e:
        raise CheckerInputError(str(e)) from None
    return {"checkers": {"queue": result}}


def _connect_part(result: dict[str, Any]) -> dict[str, Any]:
    """The connect result as a part, its input notes lifted where the merge collects them."""
    part: dict[str, Any] = {"checkers": {"connect": result}}
    if result.get("input_notes"):
        part["input_notes"] = list(result["input_notes"])
    return part


def _connect_run(ctx: RunContext) -> dict[str, Any]:
    """The connect checker (Spark engine) as one checker named ``connect``."""
    from checkers.connect.run import check_connect

    return _connect_part(check_connect(ctx.run_dir, spark=ctx.spark, max_examples=ctx.max_examples))


def _connect_py(ctx: RunContext) -> dict[str, Any]:
    """The connect checker by its reference, in the part :func:`_connect_run` makes."""
    from checkers.connect.pyref import check_connect_pyref

    return _connect_part(check_connect_pyref(ctx.run_dir, max_examples=ctx.max_examples))


def _connect_prepare(ctx: RunContext) -> None:
    """Take the history apart into the run's Parquet cache while the cluster stops."""
    from checkers.connect.run import load_connect

    try:
        _got, tmp = load_connect(ctx.run_dir)
    except CheckerInputError:
        return  # the check itself reports it
    if tmp is not None:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def _streams_run(ctx: RunContext, engine: str = SPARK) -> dict[str, Any]:
    """The streams checker as one checker named ``streams``, by ``engine`` (its reference
    shares everything with the Spark engine but the counting of anomalies and examples)."""
    from checkers.streams.run import check_streams

    result = check_streams(
        ctx.run_dir, spark=ctx.spark, max_examples=ctx.max_examples, engine=engine
    )
    return {"checkers": {"streams": result}}


def _share_run(ctx: RunContext, engine: str = SPARK) -> dict[str, Any]:
    """The share checker as one checker named ``share``, by ``engine`` (as for streams); the
    delivery limit and the isolation level it judges by are the run's workload options."""
    from checkers.share.run import check_share

    result = check_share(
        ctx.run_dir,
        spark=ctx.spark,
        max_examples=ctx.max_examples,
        engine=engine,
        options=ctx.workload_options or None,
    )
    return {"checkers": {"share": result}}


def _offsets_run(ctx: RunContext, engine: str = SPARK) -> dict[str, Any]:
    """The offsets checker (KAFKA-20634's acknowledged commits read back lower) as one checker
    named ``offsets``, by ``engine``; it judges by no option, ``variant`` is only shown."""
    from checkers.offsets.run import check_offsets

    result = check_offsets(
        ctx.run_dir,
        spark=ctx.spark,
        max_examples=ctx.max_examples,
        engine=engine,
        options=ctx.workload_options or None,
    )
    return {"checkers": {"offsets": result}}


#: The broker-log evidence: judged on every run that has a log dump.
EVIDENCE = RunDirCheck(
    "log_evidence",
    lambda d: (d / "evidence" / "logdump.jsonl").is_file(),
    _evidence_run,
    python=_evidence_py,
)

#: EXTENSION POINT: the history suites a workload may name in ``checker_suites``.
SUITES: dict[str, RunDirCheck] = {
    "eos": RunDirCheck("eos", _has_history, _eos_run, prepare=_eos_prepare, python=_eos_py),
    "queue": RunDirCheck("queue", lambda d: _queue_history(d).is_file(), _queue_run, spark=False),
    "connect": RunDirCheck(
        "connect", _has_history, _connect_run, prepare=_connect_prepare, python=_connect_py
    ),
    "streams": RunDirCheck(
        "streams", _has_history, _streams_run, python=lambda c: _streams_run(c, PYTHON)
    ),
    "share": RunDirCheck("share", _has_history, _share_run, python=lambda c: _share_run(c, PYTHON)),
    "offsets": RunDirCheck(
        "offsets", _has_history, _offsets_run, python=lambda c: _offsets_run(c, PYTHON)
    ),
}


def read_config(run_dir: Path) -> dict[str, Any]:
    try:
        config = json.loads((run_dir / "config.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def suite_names(config: dict[str, Any]) -> list[str]:
    """The suites a run's config names; a run from before ``checker_suites``: its workload's."""
    names = config.get("checker_suites")
    if names is None:
        workload = config.get("workload", (config.get("options") or {}).get("workload"))
        names = [workload or "eos"]
    return [str(n) for n in names]


def checks_for(run_dir: Path, config: dict[str, Any]) -> list[RunDirCheck]:
    """The checks that apply to ``run_dir``, evidence first; an unknown suite is an error."""
    unknown = [n for n in suite_names(config) if n not in SUITES]
    if unknown:
        raise CheckerInputError(f"no checker suite named {', '.join(unknown)} (config.json)")
    checks = [EVIDENCE] + [SUITES[n] for n in suite_names(config)]
    return [c for c in checks if c.applies(run_dir)]
