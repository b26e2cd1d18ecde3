"""The connect workload (Kafka Connect exactly-once source, KIP-618) against a real cluster.

Worker JVMs are Kafka's own ``ConnectDistributed`` from the cluster's jars, driven through
their REST API; a worker killed mid-run is replaced in its slot, and the run must stay
exactly-once, while the at-least-once variant (``exactly.once.source.support=disabled``) must
visibly duplicate after the same kill. The verdicts are the ``connect`` checker's (its
pure-Python reference here: Spark's agreement with it is ``tests/test_connect_checker.py``'s).
The option checks at the top need no cluster.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from checkers.connect.pyref import check_connect_pyref
from common.errors import HarnessError
from common.waits import wait_for
from harness.run.options import RunContext, RunOptions
from harness.run.runner import RunResult, execute
from history import check_pairing, load_history
from workloads.connect.config import ConnectOptions


def test_the_options_refuse_what_connect_would_refuse() -> None:
    for bad in (
        {"workers": 0},
        {"exactly_once": "maybe"},
        {"boundary": "sometimes"},
        {"exactly_once": "disabled", "boundary": "connector"},
        {"session_timeout_ms": 100},
    ):
        with pytest.raises(HarnessError):
            ConnectOptions(**bad).validate()
    with pytest.raises(HarnessError, match="unknown connect option"):
        ConnectOptions.from_dict({"wokers": 3})


def test_the_connector_config_follows_the_variant_and_the_boundary() -> None:
    eos = ConnectOptions(boundary="interval", interval_ms=500, name_suffix="-x")
    config = eos.connector_config(4)
    assert config["tasks.max"] == "4"
    assert config["exactly.once.support"] == "required"
    assert config["transaction.boundary"] == "interval"
    assert config["transaction.boundary.interval.ms"] == "500"
    assert config["offsets.storage.topic"] == "seq-x-offsets" == eos.offsets_topic
    assert eos.transactional_id_prefix == "connect-x-seq-x-"
    worker = eos.worker_properties("127.0.0.1:9092", 8083)
    assert worker["exactly.once.source.support"] == "enabled"
    assert worker["listeners"] == "http://127.0.0.1:8083"

    alo = ConnectOptions(exactly_once="disabled", own_offsets_topic=False)
    config = alo.connector_config(3)
    assert "exactly.once.support" not in config and "transaction.boundary" not in config
    assert "offsets.storage.topic" not in config
    assert alo.offsets_topic == alo.global_offsets_topic
    assert alo.worker_properties("b:1", 1)["exactly.once.source.support"] == "disabled"
    assert alo.name_parts() == ["at-least-once"]


def test_the_task_count_cycles_as_kafkas_own_test_does() -> None:
    assert ConnectOptions(tasks=3).task_counts() == [3, 5, 1, 5, 3]
    assert ConnectOptions(tasks=2, reconfigure=False).task_counts() == [2]


def test_settle_sets_the_last_task_count_when_the_driver_did_not_reach_it() -> None:
    """Faults can hold the driver's changes back until the load ends (seed 4224 on 4.1.2 left
    the connector at one task): settling first sets the schedule's last count, retrying a
    refusal, then waits for every one of its tasks to run."""
    from workloads.connect.supervisor import ConnectWorkload

    w = object.__new__(ConnectWorkload)
    w.options = ConnectOptions(tasks=3)
    w._tasks = 1
    calls: list[int] = []
    running = [{"id": i, "state": "RUNNING"} for i in range(3)]
    w.wait_workers = lambda timeout: None  # type: ignore[method-assign]
    w.reconfigure = lambda tasks: calls.append(tasks) or len(calls) > 1  # type: ignore[method-assign]
    w.status = lambda: {"state": "RUNNING", "tasks": running[: w._tasks]}  # type: ignore[method-assign]
    w.restart_failed = lambda status: None  # type: ignore[method-assign]
    w.journals = None
    assert w.settle(10.0) is True
    assert calls == [3, 3] and w._tasks == 3  # the first PUT refused, the second taken
    w._tasks = 3
    calls.clear()
    assert w.settle(10.0) is True and calls == []  # in force already: nothing sent

    # Running is not enough: every task must have had a record confirmed since. One that
    # never has keeps the settle waiting its whole timeout (the checker's stalled-task).
    confirmed = {0, 1}

    class Journals:
        def confirmed_since(self, ms: int) -> set[int]:
            return confirmed

    w.journals = Journals()  # type: ignore[assignment]
    assert w.settle(1.0) is False
    confirmed.add(2)
    assert w.settle(1.0) is True


# --- against a real cluster -----------------------------------------------------------------


class _KillWorker:
    """A test nemesis: once the connector's tasks all run, SIGKILL the worker in slot 0."""

    name = "test-kill-worker"

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.killed: int | None = None

    def start(self, ctx: RunContext) -> None:
        rec = ctx.recorder("nemesis", {"nemesis": self.name})
        workload = ctx.workload

        def body() -> None:
            try:

                def running() -> bool:
                    status = workload._status or {}
                    tasks = status.get("tasks") or []
                    return len(tasks) >= 3 and all(t["state"] == "RUNNING" for t in tasks)

                wait_for(running, timeout=60, what="every task running")
                threading.Event().wait(3.0)  # let the tasks write past their first commit
                worker = min(workload.processor_pids())
                rec.invoke("kill", {"worker": worker})
                workload.kill_worker(worker)
                self.killed = worker
                rec.ok("kill", {"worker": worker})
            except BaseException as exc:  # surfaced by the test after the run
                self.error = exc
            finally:
                rec.close()

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def stop(self, ctx: RunContext) -> None:
        if self.thread is not None:
            self.thread.join(timeout=90)

    def heal(self, ctx: RunContext) -> None:
        pass


def _run(cluster: Any, store: Path, name: str, nemeses: list[Any], **connect: Any) -> RunResult:
    suffix = f"-{name}-{uuid.uuid4().hex[:6]}"
    options = ConnectOptions(name_suffix=suffix, reconfigure=False, **connect)
    # 45 s: the killed worker's JVM takes 10-20 s to come back on a loaded machine, and its
    # task must write again before the load ends.
    run = RunOptions(workload="connect", workload_options=options, time_limit=45.0)
    return execute(cluster, run, store / "connect" / suffix.lstrip("-"), nemeses)


@pytest.mark.cluster
def test_a_killed_worker_is_replaced_and_the_source_stays_exactly_once(
    kafka_cluster, harness_store
) -> None:  # type: ignore[no-untyped-def]
    nemesis = _KillWorker()
    result = _run(kafka_cluster, harness_store, "kill", [nemesis])
    assert nemesis.error is None, nemesis.error
    ops = load_history(result.history)
    assert check_pairing([op for op in ops if op["process"] != "nemesis"]) == {}
    exits = [op["value"] for op in ops if op["f"] == "worker-exit" and op["type"] == "ok"]
    assert any(v["worker"] == nemesis.killed and v["returncode"] == -9 for v in exits)
    spawns = [op["value"] for op in ops if op["f"] == "spawn" and op["type"] == "ok"]
    assert any(v["replaces"] == nemesis.killed and v["slot"] == 0 for v in spawns)
    assert result.drained, "the connector stopped and the final reads completed"
    verdict = check_connect_pyref(result.run_dir)
    assert verdict["valid"] is True, json.dumps(verdict["anomalies"])
    committed = [
        json.loads(r[2])
        for op in ops
        if op["f"] == "read" and op["type"] == "ok" and op["value"]["isolation"] == "read_committed"
        for r in op["value"]["records"]
    ]
    assert {r["task"] for r in committed} == {0, 1, 2}
    writers = {r["writer"] for r in committed}
    assert len(writers) > 3, "some task was restarted after the kill and went on writing"


@pytest.mark.cluster
def test_at_least_once_source_duplicates_after_a_worker_kill(kafka_cluster, harness_store) -> None:  # type: ignore[no-untyped-def]
    nemesis = _KillWorker()
    result = _run(kafka_cluster, harness_store, "alo", [nemesis], exactly_once="disabled")
    assert nemesis.error is None, nemesis.error
    verdict = check_connect_pyref(result.run_dir)
    assert verdict["valid"] is False
    assert verdict["anomalies"].get("duplicate", 0) > 0, json.dumps(verdict["anomalies"])
