"""Nemeses inside real eos runs: the zombie made on demand, exact replay, and Ctrl-C.

The runs share the session's cluster (unique topic, group and transactional-id names); the
Ctrl-C test runs the real CLI in a child process on a cluster of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.run.nemesis import ScheduledNemesis
from harness.run.runner import RunOptions, RunResult, execute
from harness.substrate.runstate import marked_processes
from history import is_nemesis, load_history, read_process_file
from nemeses.kinds import parse_nemesis
from nemeses.schedule import Event, Schedule, load
from workloads.eos.config import EosOptions

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parent.parent
REJECTIONS = {
    "UNKNOWN_MEMBER_ID",
    "ILLEGAL_GENERATION",
    "_FENCED",
    "PRODUCER_FENCED",
    "INVALID_PRODUCER_EPOCH",
    "FENCED_INSTANCE_ID",
}


def _options(name: str, time_limit: float, **eos: Any) -> RunOptions:
    defaults: dict[str, Any] = {
        "values": 1500,
        "partitions": 6,
        "processors": 3,
        "find_hanging": False,
        "drain_timeout_s": 90.0,
    }
    suffix = f"-{name}-{uuid.uuid4().hex[:6]}"
    return RunOptions(
        workload_options=EosOptions(name_suffix=suffix, **{**defaults, **eos}),
        time_limit=time_limit,
        seed=5,
    )


def _run(cluster: Any, store: Path, options: RunOptions) -> RunResult:
    assert isinstance(options.workload_options, EosOptions)
    run_dir = store / "nemesis-runs" / options.workload_options.name_suffix.lstrip("-")
    return execute(cluster, options, run_dir, [ScheduledNemesis(options)])


def _write_schedule(path: Path, events: list[Event], time_limit: float) -> Path:
    Schedule(0, sorted({e.kind for e in events}), time_limit, 5, 5, events).save(path)
    return path


def test_zombie_pause_is_rebalanced_away_and_its_commit_rejected(
    kafka_cluster, harness_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    sched = _write_schedule(tmp_path / "s.json", [Event(4.0, "zombie", {"pick": 0}, 14.0)], 25)
    options = _options("zombie", 25.0, session_timeout_ms=6000, transaction_timeout_ms=60000)
    options.replay = sched
    result = _run(kafka_cluster, harness_store, options)
    ops = load_history(result.history)
    start = next(
        o for o in ops if o["process"] == "nemesis" and o["f"] == "start" and o["type"] == "ok"
    )
    stop = next(
        o for o in ops if o["process"] == "nemesis" and o["f"] == "stop" and o["type"] == "ok"
    )
    zombie = start["value"]["targets"][0]
    assert start["value"]["mode"] == "at-commit"
    # While it was stopped, another member got its partitions.
    moved = [
        o
        for o in ops
        if o["f"] == "rebalance"
        and o["process"] != zombie
        and o["value"]["event"] == "assign"
        and start["time"] < o["time"] < stop["time"]
    ]
    assert moved, "no rebalance moved the zombie's partitions"
    # After the resume, its pending commit is rejected, not committed (or, when its offsets
    # were out before the stop, see below, nobody else read past them). The first completion
    # after the pause began is that commit's (the process was stopped until the resume); it
    # may be recorded before the nemesis's own "stop" op, which is written only once the
    # resume has been verified.
    after = [
        o
        for o in ops
        if o["process"] == zombie
        and o["f"] == "txn"
        and o["type"] != "invoke"
        and o["time"] > start["time"]
    ]
    assert after, "the zombie's transaction never completed"
    first = after[0]
    if first["type"] == "ok":
        # The stop landed after its offsets had gone out (SIGUSR1 raced the offset commit):
        # they were accepted while its generation was current and stay pending, and KIP-447
        # holds the partitions' new owner back (UNSTABLE_OFFSET_COMMIT) until the zombie's
        # transaction ends. Its commit then stands; the new owner must start where it
        # committed, and only after it did.
        committed = {p: off for p, off in first["value"]["offsets"]}
        for o in ops:
            if o["f"] != "txn" or o["type"] != "invoke" or o["process"] == zombie:
                continue
            if o["time"] <= start["time"]:
                continue
            theirs = [(p, off) for p, off, _v in o["value"]["inputs"] if p in committed]
            assert not theirs or o["time"] > first["time"], (o, first)
            assert all(off >= committed[p] for p, off in theirs), (o, first)
    else:
        assert first["type"] in ("fail", "info"), first
        assert first["error"]["code"] in REJECTIONS, first["error"]
    assert result.summary["duplicates"] == result.summary["missing"] == 0, result.summary


def test_replay_reproduces_kinds_roles_and_timing(kafka_cluster, harness_store: Path) -> None:  # type: ignore[no-untyped-def]
    first = _options("orig", 15.0)
    first.nemesis = parse_nemesis("pause,slow,client-cut")
    first.nemesis_interval, first.nemesis_duration = 3, 4
    a = _run(kafka_cluster, harness_store, first)
    saved = load(a.run_dir / "schedule.json")
    assert saved.events, "the schedule planned no fault"
    again = _options("replay", 15.0)
    again.replay = a.run_dir / "schedule.json"
    b = _run(kafka_cluster, harness_store, again)
    ea = json.loads((a.run_dir / "schedule.json").read_text())["executed"]
    eb = json.loads((b.run_dir / "schedule.json").read_text())["executed"]
    assert [(e["kind"], e["params"]) for e in ea] == [(e["kind"], e["params"]) for e in eb]
    # Same plan, acted on at the planned times in both runs: every start and every undo of a
    # fault begins within 1 s of its planned time, or of the end of the action before it
    # when that one overran (a resumed broker may take seconds to answer on a loaded
    # machine, and one lane acts one fault at a time).
    for executed in (ea, eb):
        _assert_on_time(executed, limit=15.0, slack=1.0)
    for r in (a, b):
        assert r.summary["duplicates"] == r.summary["missing"] == 0, r.summary


@pytest.mark.skipif(os.geteuid() != 0, reason="partitions need root")
def test_ctrl_c_during_a_partition_and_a_pause_leaves_nothing(tmp_path: Path) -> None:
    sched = _write_schedule(
        tmp_path / "s.json",
        [
            Event(
                1.0,
                "partition",
                {"shape": "isolate", "role": "random", "pick": 1, "seed": 1},
                300.0,
            ),
            Event(2.0, "pause-processor", {"pick": 0}, 300.0),
            Event(
                3.0,
                "slow",
                {
                    "mode": "latency",
                    "attributes": {"latency": 300},
                    "stream": "downstream",
                    "role": "random",
                    "pick": 2,
                },
                300.0,
            ),
        ],
        300,
    )
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--workload",
            "eos",
            "--time-limit",
            "300",
            "--replay",
            str(sched),
            "--store",
            str(store),
            "--values",
            "100000",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        started: list[dict[str, Any]] = []
        while time.monotonic() < deadline and len(started) < 3 and proc.poll() is None:
            files = list(store.glob("*/*/processes/nemesis.jsonl"))
            if files:
                _h, ops, _w = read_process_file(files[0])
                started = [o for o in ops if o["f"] == "start" and o["type"] == "ok"]
            time.sleep(0.2)
        assert len(started) == 3, proc.stderr.read() if proc.poll() is not None else started
        run_dir = files[0].parent.parent
        run_id = json.loads((run_dir / "config.json").read_text())["run_id"]
        paused_pid = started[1]["value"]["pid"]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert not [p for p, rid in marked_processes().items() if rid == run_id]
    assert not Path(f"/proc/{paused_pid}").exists()
    _h, ops, _w = read_process_file(run_dir / "processes" / "nemesis.jsonl")
    stopped = {o["value"]["kind"] for o in ops if o["f"] == "stop" and o["type"] == "ok"}
    assert stopped == {"partition", "pause-processor", "slow"}, "faults healed before teardown"
    slot = json.loads((run_dir / "config.json").read_text())["slot"]
    assert_slot_clean(slot, run_id)
    assert "Traceback" not in proc.stderr.read()


def assert_slot_clean(slot: int, run_id: str) -> None:
    """No namespace of the slot is left, unless another live run (a test of the other xdist
    worker) has taken the slot since, which it can only do after this run released it."""
    from harness.substrate.runstate import _read_state, _try_lock

    fd = _try_lock(slot)
    if fd is None:
        state = _read_state(slot)
        assert state is not None and state.run_id != run_id, "the killed run still holds its slot"
        return
    try:
        ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert not [line for line in ns.splitlines() if line.startswith(f"kh{slot}n")]
    finally:
        os.close(fd)


def _assert_on_time(executed: list[dict[str, Any]], limit: float, slack: float) -> None:
    """Each action of one lane (a fault's start, its undo) begins within ``slack`` s of
    max(its planned time, the end of the lane's previous action). Undos planned at or after
    the time limit are the end-of-run heal's, not the schedule's, and are not timed."""
    actions = []
    for e in executed:
        actions.append((e["started_at"], e["planned_at"], e["started_at"] + e["start_took"]))
        planned_stop = e["planned_at"] + e["duration"]
        if "stopping_at" in e and e["duration"] > 0 and planned_stop < limit:
            actions.append((e["stopping_at"], planned_stop, e["stopped_at"]))
    actions.sort()
    free = 0.0
    for begin, planned, end in actions:
        assert begin <= max(planned, free) + slack, (begin, planned, free, executed)
        free = max(free, end)


def _nemesis_ops(ops: list[dict[str, Any]], f: str) -> list[dict[str, Any]]:
    return [o for o in ops if is_nemesis(o["process"]) and o["f"] == f and o["type"] == "ok"]


def test_crash_clients_kills_processors_at_their_moments(
    kafka_cluster, harness_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Armed kills land where they were aimed: the history says which moment fired in which
    transaction, that transaction stays open in the dead instance's history, and an
    at-least-once client killed between its outputs and its offset commit duplicates."""
    moments = ["after-flush", "before-offsets", "during-commit"]
    params = {"pick": 0, "delay_ms": 5, "moments": moments}
    sched = _write_schedule(tmp_path / "s.json", [Event(3.0, "crash-clients", params, 8.0)], 20)
    options = _options("crash", 20.0, variant="at-least-once")
    options.replay = sched
    result = _run(kafka_cluster, harness_store, options)
    ops = load_history(result.history)
    (stop,) = _nemesis_ops(ops, "stop")
    hits = stop["value"]["hit"]
    assert hits, stop["value"]
    for hit in hits:
        assert hit["at"] in moments and hit["txn"] >= 1
        mine = [o for o in ops if o["process"] == hit["instance"] and o["f"] == "txn"]
        last = mine[-1]
        if hit["at"] == "during-commit":
            # The kill lands delay_ms after the commit began; a commit that completes sooner
            # (loopback, a few ms) is recorded, and the kill then lands in the next one.
            assert last["value"]["txn"] in (hit["txn"], hit["txn"] + 1), last
            if last["value"]["txn"] == hit["txn"] + 1:
                assert last["type"] == "invoke", last
        else:
            assert last["type"] == "invoke" and last["value"]["txn"] == hit["txn"], last
    executed = json.loads((result.run_dir / "schedule.json").read_text())["executed"]
    assert executed[0]["hit"] == hits
    if any(h["at"] in ("after-flush", "before-offsets") for h in hits):
        assert result.summary["duplicates"] > 0, result.summary


@pytest.mark.parametrize(
    ("variant", "client"), [("eos", "python"), ("no-rewind", "python"), ("no-rewind", "java")]
)
def test_crash_clients_abort_runs_the_abort_path_at_its_moment(
    variant: str, client: str, kafka_cluster, harness_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """An armed abortable failure fails exactly the transaction it was aimed at, the instance
    lives on; the correct client aborts and rewinds (nothing missing), the client that skips
    the rewind loses the aborted inputs (both clients)."""
    params = {"pick": 0, "delay_ms": 0, "moments": ["after-flush"], "actions": ["abort"]}
    sched = _write_schedule(tmp_path / "s.json", [Event(3.0, "crash-clients", params, 8.0)], 20)
    options = _options(f"abort-{variant}-{client}", 20.0, variant=variant, client=client)
    options.replay = sched
    result = _run(kafka_cluster, harness_store, options)
    ops = load_history(result.history)
    (stop,) = _nemesis_ops(ops, "stop")
    (hit,) = stop["value"]["hit"]
    assert hit["action"] == "abort" and hit["at"] == "after-flush", hit
    mine = [o for o in ops if o["process"] == hit["instance"]]
    (failed,) = [
        o
        for o in mine
        if o["f"] == "txn" and o["type"] != "invoke" and o["value"]["txn"] == hit["txn"]
    ]
    assert failed["type"] == "fail" and failed["error"]["code"] == "INJECTED_ABORT", failed
    later = mine[mine.index(failed) + 1 :]
    assert any(o["f"] == "txn" and o["type"] == "ok" for o in later), "the instance went on"
    rewound = any(o["f"] == "rewind" for o in later)
    if variant == "eos":
        assert rewound and result.summary["missing"] == 0, result.summary
    else:
        assert not rewound and result.summary["missing"] > 0, result.summary


def test_coordinator_at_pauses_the_txn_coordinator_as_end_txn_goes_out(
    kafka_cluster, harness_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The processor stops itself before its commit, its own transaction coordinator is
    paused, it continues into it; the correct client stays exactly-once."""
    params = {"pick": 1, "at": "before-commit", "fault": "pause", "mode": "down"}
    sched = _write_schedule(tmp_path / "s.json", [Event(3.0, "coordinator-at", params, 5.0)], 20)
    options = _options("coord", 20.0)
    options.replay = sched
    result = _run(kafka_cluster, harness_store, options)
    ops = load_history(result.history)
    (start,) = _nemesis_ops(ops, "start")
    value = start["value"]
    assert value["at"] == "before-commit" and value["fault"] == "pause"
    instance, txn = value["processor"], value["txn"]
    tids = {
        o["process"]: o["value"]["transactional_id"]
        for o in ops
        if o["f"] == "start" and o["type"] == "ok" and isinstance(o["process"], int)
    }
    assert tids[instance] in value["why"] and "txn coordinator" in value["why"]
    # The stopped transaction completed (one way or the other) only after it was let go.
    done = [
        o
        for o in ops
        if o["process"] == instance
        and o["f"] == "txn"
        and o["type"] != "invoke"
        and o["value"]["txn"] == txn
    ]
    assert not done or done[0]["time"] > start["time"]
    assert _nemesis_ops(ops, "stop"), "the coordinator was not resumed"
    assert result.summary["duplicates"] == result.summary["missing"] == 0, result.summary
