"""The eos workload against a real cluster: correct runs are exactly-once, faults are recorded
the way checkers need them, and a broken variant is visibly broken.

All scenarios share the session's cluster (one cluster at a time on a 2-core machine) and use
unique topic, group and transactional-id names. Faults are injected through small test-only
nemeses passed to the runner's hook, exactly as the real nemeses will be.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from common.waits import wait_for
from harness.run.options import RunContext, RunOptions
from harness.run.runner import RunResult, execute
from history import check_pairing, load_history, read_process_file
from history.eos_records import input_of
from workloads.eos.config import EosOptions, Hook

pytestmark = pytest.mark.cluster

#: Codes with which a group or transaction coordinator refuses a zombie's commit.
ZOMBIE_REJECTIONS = {
    "UNKNOWN_MEMBER_ID",
    "ILLEGAL_GENERATION",
    "FENCED_INSTANCE_ID",
    "_FENCED",
    "PRODUCER_FENCED",
    "INVALID_PRODUCER_EPOCH",
}


def _run(
    cluster: Any,
    store: Path,
    name: str,
    nemeses: list[Any] | None = None,
    time_limit: float = 15.0,
    **eos: Any,
) -> RunResult:
    suffix = f"-{name}-{uuid.uuid4().hex[:6]}"
    defaults: dict[str, Any] = {
        "values": 1500,
        "partitions": 6,
        "processors": 3,
        "find_hanging": False,
        "drain_timeout_s": 60.0,
    }
    options = EosOptions(name_suffix=suffix, **{**defaults, **eos})
    run = RunOptions(workload_options=options, time_limit=time_limit)
    return execute(cluster, run, store / "eos" / suffix.lstrip("-"), nemeses)


def _outputs_per_input(ops: list[dict[str, Any]]) -> Counter[str | None]:
    """How often each input value appears in the final read_committed drain of the output."""
    counts: Counter[str | None] = Counter()
    for op in ops:
        value = op["value"]
        if (
            op["process"] == "final"
            and op["f"] == "read"
            and op["type"] == "ok"
            and value["isolation"] == "read_committed"
        ):
            counts.update(input_of(out) for _offset, _key, out, _headers in value["records"])
    return counts


def _seeded(ops: list[dict[str, Any]]) -> set[str]:
    return {
        v
        for op in ops
        if op["process"] == "seeder" and op["f"] == "send" and op["type"] == "ok"
        for v, _p, _o in op["value"]["values"]
    }


def _assert_exactly_once(result: RunResult) -> list[dict[str, Any]]:
    ops = load_history(result.history)  # validates every op and the merged-file rules
    seeded = _seeded(ops)
    counts = _outputs_per_input(ops)
    assert result.drained
    assert len(seeded) == result.summary["seeded"] > 0
    assert set(counts) == seeded, "missing or unexpected outputs"
    assert max(counts.values()) == 1, "an input was output more than once"
    assert result.summary["duplicates"] == result.summary["unexpected"] == 0
    assert result.summary["missing"] == 0 and result.summary["complete_read"]
    return ops


def _committed_txns(path: Path) -> int:
    _header, ops, _warnings = read_process_file(path)
    return sum(1 for op in ops if op["f"] == "txn" and op["type"] == "ok")


class _Once:
    """A test nemesis: one action in a thread of its own, recorded under ``"nemesis"``."""

    name = "test-once"

    def __init__(self, action: Any) -> None:
        self.action = action
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self, ctx: RunContext) -> None:
        rec = ctx.recorder("nemesis", {"nemesis": self.name})

        def body() -> None:
            try:
                self.action(ctx, rec)
            except BaseException as exc:  # surfaced by the test after the run
                self.error = exc
            finally:
                rec.close()

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def stop(self, ctx: RunContext) -> None:
        if self.thread is not None:
            self.thread.join(timeout=60)

    def heal(self, ctx: RunContext) -> None:
        for instance in ctx.workload.paused():
            ctx.workload.resume_processor(instance)


def test_three_processors_without_faults_are_exactly_once(kafka_cluster, harness_store) -> None:  # type: ignore[no-untyped-def]
    # 3 processors, no faults: long enough for every instance to be assigned and commit.
    result = _run(
        kafka_cluster, harness_store, "nofault", time_limit=15.0, values=3000, find_hanging=True
    )
    ops = _assert_exactly_once(result)
    assert check_pairing(ops) == {}, "every invocation completed"
    assert (result.run_dir / "processes" / "seeder.jsonl").exists()
    rebalances = [op for op in ops if op["f"] == "rebalance" and op["type"] == "ok"]
    assigned = {op["process"] for op in rebalances if op["value"]["event"] == "assign"}
    assert assigned == {0, 1, 2}
    assert all(
        isinstance(op["value"]["generation"], int) and op["value"]["member_id"]
        for op in rebalances
        if op["value"]["event"] == "assign"
    )
    txns = [op for op in ops if op["f"] == "txn" and op["type"] == "ok"]
    assert {op["process"] for op in txns} == {0, 1, 2}
    hanging = [op for op in ops if op["f"] == "find-hanging" and op["type"] == "ok"]
    assert len(hanging) == 1
    assert all(r.get("rows") == [] for r in hanging[0]["value"]["results"])
    marks = [op for op in ops if op["f"] == "watermarks" and op["type"] == "ok"]
    assert all(row["lso"] == row["hwm"] for op in marks for row in op["value"]["partitions"])


def test_a_killed_processor_is_replaced_and_the_run_stays_exactly_once(
    kafka_cluster, harness_store
) -> None:  # type: ignore[no-untyped-def]
    def kill(ctx: RunContext, rec: Any) -> None:
        path = ctx.processes_dir / "0.jsonl"
        wait_for(lambda: _committed_txns(path) >= 3, timeout=30, what="instance 0 committing")
        rec.invoke("kill", {"instance": 0})
        ctx.workload.kill_processor(0)
        rec.ok("kill", {"instance": 0})

    nemesis = _Once(kill)
    result = _run(
        kafka_cluster,
        harness_store,
        "kill",
        [nemesis],
        txn_id_strategy="static",
        session_timeout_ms=6000,
    )
    assert nemesis.error is None, nemesis.error
    ops = _assert_exactly_once(result)
    exits = [op for op in ops if op["f"] == "processor-exit" and op["type"] == "ok"]
    assert any(op["value"]["instance"] == 0 and op["value"]["returncode"] == -9 for op in exits)
    spawns = [op for op in ops if op["f"] == "spawn" and op["type"] == "ok"]
    successor = next(op["value"] for op in spawns if op["value"]["replaces"] == 0)
    assert successor["slot"] == 0 and successor["instance"] >= 3
    assert successor["transactional_id"].endswith("-slot-0")
    later = [op for op in ops if op["process"] == successor["instance"] and op["f"] == "txn"]
    assert any(op["type"] == "ok" for op in later), "the successor committed work"


def test_a_paused_zombie_cannot_commit_after_it_resumes(kafka_cluster, harness_store) -> None:  # type: ignore[no-untyped-def]
    def resume_after_eviction(ctx: RunContext, rec: Any) -> None:
        wait_for(lambda: 0 in ctx.workload.paused(), timeout=30, what="instance 0 stopped")
        group = ctx.workload.options.group_id

        def evicted() -> bool:
            desc = ctx.cluster.admin().describe_consumer_groups([group], request_timeout=5)
            members = desc[group].result(timeout=10).members
            return bool(members) and all(m.client_id != "eos-c0" for m in members)

        wait_for(evicted, timeout=30, what="the group to evict paused instance 0")
        rec.invoke("resume", {"instance": 0})
        ctx.workload.resume_processor(0)
        rec.ok("resume", {"instance": 0})

    nemesis = _Once(resume_after_eviction)
    result = _run(
        kafka_cluster,
        harness_store,
        "zombie",
        [nemesis],
        time_limit=20.0,
        session_timeout_ms=6000,
        transaction_timeout_ms=60000,
        hooks={0: Hook(at="before-offsets", txn=2, action="stop")},
    )
    assert nemesis.error is None, nemesis.error
    ops = _assert_exactly_once(result)
    done = [op for op in ops if op["process"] == 0 and op["f"] == "txn" and op["type"] != "invoke"]
    paused_txn = next(op for op in done if op["value"]["txn"] == 2)
    assert paused_txn["type"] == "fail", paused_txn
    assert paused_txn["error"]["code"] in ZOMBIE_REJECTIONS
    resumed = next(op for op in ops if op["process"] == "nemesis" and op["f"] == "resume")
    assert paused_txn["time"] > resumed["time"]


def test_at_least_once_variant_duplicates_after_a_crash(kafka_cluster, harness_store) -> None:  # type: ignore[no-untyped-def]
    result = _run(
        kafka_cluster,
        harness_store,
        "alo",
        variant="at-least-once",
        hooks={0: Hook(at="after-flush", txn=2, action="kill")},
    )
    ops = load_history(result.history)
    counts = _outputs_per_input(ops)
    assert set(counts) == _seeded(ops), "at-least-once loses nothing"
    assert result.summary["duplicates"] > 0
    assert max(counts.values()) >= 2

    open_ops = check_pairing(ops)
    assert open_ops[0]["f"] == "txn", "the crashed instance's last txn stays open"
