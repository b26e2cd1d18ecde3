"""The scenario suite: ``pytest -n auto harness/``.

Each test is one scenario (workload x nemesis x options) run on the worker's own cluster
(``kafka_cluster``: its own subnet, ports, namespaces and store) with unique topic, group and
transactional-id names, so scenarios share a cluster without sharing state. A correct workload
must come out exactly-once; each broken-on-purpose variant must be caught. A failing test names
the anomalies and the path of the run's HTML report.
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.report import write_report
from harness.run.nemesis import ScheduledNemesis
from harness.run.runner import RunOptions, RunResult, execute
from harness.run.verdict import explain, judge
from workloads.eos_config import EosOptions, Hook

pytestmark = pytest.mark.cluster


def _eos(
    request: pytest.FixtureRequest,
    cluster: Any,
    store: Path,
    name: str,
    *,
    nemesis: str = "none",
    time_limit: float = 30.0,
    **eos: Any,
) -> tuple[dict[str, Any], RunResult, Path]:
    """Run one eos scenario on the worker's cluster and judge it with the checkers.

    ``--time-limit``, ``--seed`` and ``--nemesis`` (for correct-workload scenarios) override
    the scenario's own values, so the same suite can run longer or under other faults.
    """
    config = request.config
    time_limit = config.getoption("--time-limit") or time_limit
    seed = config.getoption("--seed")
    seed = 1 if seed is None else seed
    if nemesis != "none" and eos.get("variant", "eos") == "eos":
        nemesis = config.getoption("--nemesis") or nemesis
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
    verdict = judge(run_dir)
    report = write_report(run_dir)
    request.getfixturevalue("run_report")(report)
    return verdict, result, report


def _explain(verdict: dict[str, Any], result: RunResult, report: Path) -> str:
    return f"{explain(verdict)}; drained={result.drained}; report: {report}"


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
def test_eos_is_exactly_once_under(
    request, kafka_cluster, harness_store, spark, name, nemesis
) -> None:  # type: ignore[no-untyped-def]
    verdict, result, report = _eos(
        request, kafka_cluster, harness_store, name, nemesis=nemesis, session_timeout_ms=6000
    )
    assert verdict["valid"] is True, _explain(verdict, result, report)


@pytest.mark.slow
def test_eos_under_all_faults(request, kafka_cluster, harness_store, spark) -> None:  # type: ignore[no-untyped-def]
    verdict, result, report = _eos(
        request,
        kafka_cluster,
        harness_store,
        "all",
        nemesis="all",
        time_limit=60,
        session_timeout_ms=6000,
    )
    assert verdict["valid"] is True, _explain(verdict, result, report)


def test_java_copier_transaction_version_2(request, kafka_cluster, harness_store, spark) -> None:  # type: ignore[no-untyped-def]
    verdict, result, report = _eos(
        request,
        kafka_cluster,
        harness_store,
        "java",
        client="java",
        time_limit=5,
        nemesis="none",
        processors=2,
        txn_size=100,
    )
    assert verdict["valid"] is True, _explain(verdict, result, report)


@pytest.mark.parametrize(
    ("variant", "extra", "caught_as"),
    [
        (
            "at-least-once",
            {"hooks": {0: Hook(at="after-flush", txn=2, action="kill")}},
            "duplicate",
        ),
        (
            "offsets-outside-txn",
            {"hooks": {0: Hook(at="after-commit", txn=2, action="kill")}},
            "duplicate",
        ),
        ("read-uncommitted", {}, "aborted-read"),
        ("no-rewind", {"abort_probability": 0.3, "drain_timeout_s": 20.0}, "lost"),
    ],
)
def test_broken_variant_is_caught(
    request, kafka_cluster, harness_store, spark, variant, extra, caught_as
) -> None:  # type: ignore[no-untyped-def]
    verdict, result, report = _eos(
        request, kafka_cluster, harness_store, variant, variant=variant, time_limit=15, **extra
    )
    assert verdict["valid"] is False, f"{variant} was not caught; report: {report}"
    assert caught_as in verdict["bad_anomaly_types"], _explain(verdict, result, report)


@pytest.mark.parametrize(
    ("txn", "sub_via", "kinds"),
    [(True, "assign", "pause,kill-processor"), (False, "subscribe", "client-cut")],
)
def test_queue_is_valid(kafka_cluster, harness_store, nemesis, txn, sub_via, kinds) -> None:  # type: ignore[no-untyped-def]
    from checkers.queue import check_queue
    from history import load_history
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
    with contextlib.ExitStack() as faults:

        def during(workload: Any) -> None:
            faults.enter_context(
                nemesis(kinds, time_limit=20, seed=2, interval=4, duration=5, clients=workload)
            )

        history = run_queue(
            kafka_cluster, harness_store / "scenarios" / f"queue-{suffix}", opts, during=during
        )
    result = check_queue(load_history(history), sub_via=sub_via)
    assert result["valid"] is True, f"anomalies {result['bad_anomaly_types']}; {history}"
