"""The scenario suite: ``pytest -n auto harness/``.

Each test is one scenario (workload x nemesis x options) run on the worker's own cluster
(``kafka_cluster``: its own subnet, ports, namespaces and store) with unique topic, group and
transactional-id names, so scenarios share a cluster without sharing state. A correct workload
must come out exactly-once; each broken-on-purpose variant must be caught. A failing test names
the anomalies and the path of the run's HTML report.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.nemesis_run import ScheduledNemesis
from harness.report import write_report
from harness.runner import RunOptions, RunResult, execute
from workloads.eos_config import EosOptions, Hook

pytestmark = pytest.mark.cluster


def _eos(
    cluster: Any,
    store: Path,
    name: str,
    *,
    nemesis: str = "none",
    time_limit: float = 30.0,
    seed: int = 1,
    **eos: Any,
) -> tuple[RunResult, Path]:
    suffix = f"-{name}-{uuid.uuid4().hex[:6]}"
    opts: dict[str, Any] = {
        "values": 3000,
        "partitions": 6,
        "processors": 3,
        "find_hanging": False,
        "drain_timeout_s": 120.0,
    }
    options = RunOptions(
        eos=EosOptions(name_suffix=suffix, seed=seed, **{**opts, **eos}),
        time_limit=time_limit,
        seed=seed,
        nemesis=nemesis,
        nemesis_interval=4.0,
        nemesis_duration=6.0,
    )
    run_dir = store / "scenarios" / suffix.lstrip("-")
    nemeses = [ScheduledNemesis(options)] if nemesis != "none" else []
    result = execute(cluster, options, run_dir, nemeses)
    return result, write_report(run_dir)


def _explain(result: RunResult, report: Path) -> str:
    s = result.summary
    bad = {k: s[k] for k in ("duplicates", "missing", "unexpected") if s.get(k)}
    return f"anomalies {bad or 'none'}; drained={result.drained}; report: {report}"


@pytest.mark.parametrize(
    ("name", "nemesis"),
    [
        ("partition", "partition"),
        ("pauses", "pause,pause-processor"),
        ("kills", "kill,kill-processor"),
        ("zombie", "zombie"),
        ("late", "late-request,slow"),
        ("client-cuts", "client-cut,hijack"),
    ],
)
def test_eos_is_exactly_once_under(kafka_cluster, harness_store, name, nemesis) -> None:  # type: ignore[no-untyped-def]
    result, report = _eos(
        kafka_cluster, harness_store, name, nemesis=nemesis, session_timeout_ms=6000
    )
    assert result.summary["exactly_once"], _explain(result, report)


@pytest.mark.slow
def test_eos_under_all_faults(kafka_cluster, harness_store) -> None:  # type: ignore[no-untyped-def]
    result, report = _eos(
        kafka_cluster, harness_store, "all", nemesis="all", time_limit=60, session_timeout_ms=6000
    )
    assert result.summary["exactly_once"], _explain(result, report)


def test_java_copier_transaction_version_2(kafka_cluster, harness_store) -> None:  # type: ignore[no-untyped-def]
    result, report = _eos(
        kafka_cluster,
        harness_store,
        "java",
        client="java",
        time_limit=5,
        nemesis="none",
        processors=2,
        txn_size=100,
    )
    assert result.summary["exactly_once"], _explain(result, report)


@pytest.mark.parametrize(
    ("variant", "extra", "caught_by"),
    [
        (
            "at-least-once",
            {"hooks": {0: Hook(at="after-flush", txn=2, action="kill")}},
            "duplicates",
        ),
        (
            "offsets-outside-txn",
            {"hooks": {0: Hook(at="after-commit", txn=2, action="kill")}},
            "duplicates",
        ),
        ("read-uncommitted", {}, "unexpected"),
        ("no-rewind", {"abort_probability": 0.3, "drain_timeout_s": 20.0}, "missing"),
    ],
)
def test_broken_variant_is_caught(kafka_cluster, harness_store, variant, extra, caught_by) -> None:  # type: ignore[no-untyped-def]
    result, report = _eos(
        kafka_cluster, harness_store, variant, variant=variant, time_limit=15, **extra
    )
    assert not result.summary["exactly_once"], f"{variant} was not caught; report: {report}"
    assert result.summary[caught_by] > 0, _explain(result, report)


@pytest.mark.parametrize(
    ("txn", "sub_via", "nemesis"),
    [(True, "assign", "pause,kill-processor"), (False, "subscribe", "client-cut")],
)
def test_queue_is_valid(kafka_cluster, harness_store, txn, sub_via, nemesis) -> None:  # type: ignore[no-untyped-def]
    from checkers.queue import check_queue
    from history import load_history
    from nemeses.engine import Nemesis as Engine
    from nemeses.kinds import parse_kinds
    from nemeses.schedule import generate
    from nemeses.targets import FaultContext
    from workloads.queue import QueueOptions, run_queue

    suffix = uuid.uuid4().hex[:6]
    opts = QueueOptions.from_dict(
        {
            "topic": f"queue-{suffix}",
            "txn": txn,
            "sub_via": sub_via,
            "time_limit": 20.0,
            "seed": 2,
            "clients": 3,
        }
    )
    schedule = generate(parse_kinds(nemesis), seed=2, time_limit=20, interval=4, duration=5)
    engines: list[Engine] = []

    def during(workload: Any) -> None:
        engine = Engine(FaultContext(kafka_cluster, workload), schedule)
        engines.append(engine)
        engine.start()

    try:
        history = run_queue(
            kafka_cluster, harness_store / "scenarios" / f"queue-{suffix}", opts, during=during
        )
    finally:
        for engine in engines:
            engine.stop()
    result = check_queue(load_history(history), sub_via=sub_via)
    assert result["valid"] is True, f"anomalies {result['bad_anomaly_types']}; {history}"
