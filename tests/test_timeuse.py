"""Where a run's time went (``workloads.timeuse``): availability per whole second of the
load, and each processor instance's time, on hand-built histories and on a kept real run."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from workloads.eos import driver as eos_driver
from workloads.queue import driver as queue_driver
from workloads.timeuse import SECOND_NS, InstanceTime, availability, instance_times

DATA = Path(__file__).parent / "data" / "eos"
S = SECOND_NS


def _op(t: float, process: Any, f: str, typ: str, value: Any = None) -> dict[str, Any]:
    return {"time": int(t * S), "process": process, "f": f, "type": typ, "value": value}


def test_a_second_is_available_when_progress_falls_in_it_and_work_waited() -> None:
    a = availability([int(0.5 * S), int(2.2 * S), int(2.9 * S)], 0, 5 * S)
    assert (a.available, a.counted) == (2, 5)
    # Seconds with nothing waiting are not counted at all.
    a = availability([int(0.5 * S)], 0, 5 * S, waiting=lambda b, e: b < 2 * S)
    assert (a.available, a.counted, round(a.share, 2)) == (1, 2, 0.5)
    assert availability([], 0, 0).share == 0.0


PAUSE = {"kind": "pause-processor", "targets": [0]}


def _eos_history() -> list[dict[str, Any]]:
    """Instance 0 spawned at 0, started 0.2-1.0, commits at 2.5 and 3.5; revoked at 4.0 and
    given partitions again at 6.0; paused by a fault 7.0-9.0; commits at 9.5. Instance 1
    spawned at 1.0 never commits. 100 values seeded at 0.1, 50 committed each time."""
    return [
        _op(0.0, "supervisor", "spawn", "invoke", {"instance": 0}),
        _op(0.0, "supervisor", "spawn", "ok", {"instance": 0}),
        _op(0.1, "seeder", "send", "ok", {"values": [[f"v{i}", 0, i] for i in range(150)]}),
        _op(0.2, 0, "start", "invoke"),
        _op(1.0, 0, "start", "ok"),
        _op(1.0, "supervisor", "spawn", "ok", {"instance": 1}),
        _op(2.5, 0, "txn", "ok", {"outputs": [1] * 50}),
        _op(3.5, 0, "txn", "ok", {"outputs": [1] * 50}),
        _op(4.0, 0, "rebalance", "ok", {"event": "revoke"}),
        _op(6.0, 0, "rebalance", "ok", {"event": "assign"}),
        _op(7.0, "nemesis", "start", "ok", {**PAUSE, "traits": ["stops-client"]}),
        _op(9.0, "nemesis", "stop", "ok", {"kind": "pause-processor", "targets": [0]}),
        _op(9.5, 0, "txn", "ok", {"outputs": [1] * 50}),
        _op(12.0, "final", "drain", "invoke"),
    ]


def test_the_eos_summary_says_where_the_time_went() -> None:
    ops = _eos_history()
    times = instance_times(ops)
    t0, t1 = times[0], times[1]
    assert (t0.to_first_commit, t0.starting, t0.unassigned, t0.stopped_by_faults) == (
        2.5,
        0.8,
        2.0,
        2.0,
    )
    assert t1.to_first_commit is None
    summary = eos_driver.summarize(ops)
    use = summary.stats["time_use"]
    # Seconds 0..9 had seeded input waiting (150 seeded, 150 committed at 9.5); commits fell
    # in seconds 2, 3 and 9; seconds 10 and 11 had nothing waiting.
    assert (use["available_s"], use["counted_s"]) == (3, 10)
    assert use["instances"]["0"]["unassigned_s"] == 2.0
    availability_line, instances_line = summary.time_lines
    assert availability_line == (
        "availability: a transaction committed in 3 of the 10 s with seeded input waiting (30%)"
    )
    assert instances_line.startswith("instances: 2 (1 never committed); spawn to first commit")
    assert "stopped or cut off by faults 2.0 s in all" in instances_line
    assert summary.lines[-2:] == summary.time_lines


def test_a_fault_counts_as_stopping_a_process_by_the_traits_its_start_declares() -> None:
    """The fault's kind name means nothing here: only the traits the nemesis recorded do
    (``stops-client``, ``cuts-client``), whatever the kind is called."""

    def stopped(start_value: dict[str, Any]) -> float:
        ops = [
            _op(1.0, "nemesis", "start", "ok", start_value),
            _op(4.0, "nemesis", "stop", "ok", {"kind": start_value["kind"], "targets": [0]}),
        ]
        return instance_times(ops).get(0, InstanceTime()).stopped_by_faults

    cut = {"kind": "some-new-cut", "targets": [0], "traits": ["cuts-client"]}
    assert stopped(cut) == 3.0
    assert stopped({**PAUSE, "traits": ["stops-client"]}) == 3.0
    # The same kind without the field (a history recorded before it), or with other traits.
    assert stopped(PAUSE) == 0.0
    assert stopped({**PAUSE, "traits": []}) == 0.0
    assert stopped({"kind": "hijack", "targets": [0], "traits": ["fences"]}) == 0.0


def test_the_queue_summary_gives_the_load_s_availability() -> None:
    ops = [
        _op(0.0, 0, "send", "invoke"),
        _op(0.4, 0, "send", "ok"),
        _op(1.5, 1, "poll", "invoke"),
        _op(3.2, 1, "poll", "fail"),
        _op(3.5, 0, "txn", "ok"),
        _op(4.1, 1, "assign", "ok"),
    ]
    summary = queue_driver.summarize(ops)
    assert summary.time_lines == [
        "availability: a send, poll or transaction completed in 2 of the 4 s of the load (50%)"
    ]
    assert queue_driver.summarize([_op(0.0, "final", "read", "ok")]).lines == []


def test_a_real_run_that_met_f5_spent_most_of_its_load_recovering() -> None:
    with gzip.open(DATA / "eos-all-1b90.history.jsonl.gz", "rt") as fh:
        ops = [json.loads(line) for line in fh][1:]
    summary = eos_driver.summarize(ops)
    use = summary.stats["time_use"]
    assert (use["available_s"], use["counted_s"]) == (9, 26)
    assert len(use["instances"]) == 7


def test_the_report_shows_the_summary_s_time_lines_and_each_instance(tmp_path: Path) -> None:
    from harness.report import write_report

    summary = eos_driver.summarize(_eos_history())
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"workload": "eos", "test_name": "t"}))
    (run / "summary.json").write_text(
        json.dumps({"stats": summary.stats, "lines": summary.lines, "drained": True})
    )
    page = write_report(run).read_text()
    assert "availability: a transaction committed in 3 of the 10 s" in page
    table = page[page.index('id="time-use"') :]
    assert "<td>0</td><td>2.5</td><td>0.8</td><td>2.0</td><td>2.0</td>" in table
    assert "<td>1</td><td>never</td>" in table
