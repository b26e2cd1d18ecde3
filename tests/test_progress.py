"""The live progress display folds the growing per-process history files."""

from __future__ import annotations

import json
from pathlib import Path

from harness.run.progress import RunWatcher
from harness.run.workloads import get


def _append(path: Path, *ops: dict, partial: str = "") -> None:
    with path.open("a") as f:
        for op in ops:
            f.write(json.dumps(op) + "\n")
        f.write(partial)


def test_faults_processes_and_ops_follow_the_history(tmp_path: Path) -> None:
    procs = tmp_path / "processes"
    procs.mkdir()
    sup, nem, p0 = procs / "supervisor.jsonl", procs / "nemesis.jsonl", procs / "0.jsonl"
    _append(sup, {"history_format": 1, "kind": "process"})
    _append(
        sup,
        {"process": "supervisor", "type": "ok", "f": "spawn", "value": {"pid": 11}},
        {"process": "supervisor", "type": "ok", "f": "spawn", "value": {"pid": 12}},
    )
    start = {"kind": "pause", "targets": [1], "planned_at": 3.0}
    _append(nem, {"process": "nemesis", "type": "ok", "f": "start", "value": start})
    _append(
        p0,
        {"process": 0, "type": "invoke", "f": "txn", "value": {}},
        {"process": 0, "type": "ok", "f": "txn", "value": {}},
        partial='{"process": 0, "type": "ok"',  # a line still being written
    )
    w = RunWatcher(tmp_path, time_limit=60, load_started=get("eos").spec.load_started)
    s = w.poll()
    assert (s.alive, s.spawned, s.ops) == (2, 2, 4)  # completions only
    assert s.faults == ["pause [1]"]

    _append(p0, partial=', "f": "txn", "value": {}}\n')  # the partial line completes
    _append(
        sup,
        {"process": "supervisor", "type": "ok", "f": "processor-exit", "value": {"pid": 11}},
    )
    stop = {"kind": "pause", "targets": [1], "state": "R"}
    _append(nem, {"process": "nemesis", "type": "ok", "f": "stop", "value": stop})
    s = w.poll()
    assert (s.alive, s.spawned, s.ops) == (1, 2, 7)
    assert s.faults == []
    assert "faults: none" in s.line()


def test_a_queue_run_shows_its_clients_ops_as_running(tmp_path: Path) -> None:
    """The queue clients write ``processes/<n>.jsonl`` like eos processors do; their sends and
    polls are the run's load, so the display leaves "setting up" at the first one."""
    procs = tmp_path / "processes"
    procs.mkdir()
    sup, c0 = procs / "supervisor.jsonl", procs / "0.jsonl"
    _append(sup, {"process": "supervisor", "type": "ok", "f": "spawn", "value": {"pid": 21}})
    w = RunWatcher(tmp_path, time_limit=20, load_started=get("queue").spec.load_started)
    assert (w.poll().phase, w.poll().ops) == ("setting up", 1)
    _append(
        c0,
        {"process": 0, "type": "invoke", "f": "send", "value": [["send", 1, 5]]},
        {"process": 0, "type": "ok", "f": "send", "value": [["send", 1, [0, 5]]]},
        {"process": 0, "type": "invoke", "f": "poll", "value": [["poll"]]},
        {"process": 0, "type": "ok", "f": "poll", "value": [["poll", {"1": [[0, 5]]}]]},
    )
    s = w.poll()
    assert (s.phase, s.ops, s.alive) == ("running", 3, 1)
    assert "running] ops 3" in s.line()


def test_a_connect_run_is_running_once_its_connector_is_created(tmp_path: Path) -> None:
    """What shows the load under way is the workload's to say: for Connect, the REST
    driver's created connector (its workers are processes of the supervisor's own)."""
    procs = tmp_path / "processes"
    procs.mkdir()
    driver = procs / "connect.jsonl"
    w = RunWatcher(tmp_path, time_limit=20, load_started=get("connect").spec.load_started)
    _append(driver, {"process": "connect", "type": "invoke", "f": "create", "value": {}})
    assert w.poll().phase == "setting up"
    _append(driver, {"process": "connect", "type": "ok", "f": "create", "value": {}})
    assert w.poll().phase == "running"
