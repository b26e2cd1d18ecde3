"""The task journals' tailer: what the connector's tasks wrote becomes merged history ops."""

from __future__ import annotations

import json
from pathlib import Path

from history.reader import read_process_file
from workloads.connect.journal import TaskJournals, merge_ranges


def test_merge_ranges_joins_touching_and_overlapping() -> None:
    assert merge_ranges([[5, 9], [0, 4], [12, 12], [11, 11], [7, 8]]) == [[0, 9], [11, 12]]
    assert merge_ranges([]) == []


def _line(**fields: object) -> str:
    return json.dumps(fields) + "\n"


def test_journals_and_worker_logs_become_ops(tmp_path: Path) -> None:
    tasks, procs, logs = tmp_path / "tasks", tmp_path / "processes", tmp_path / "logs"
    procs.mkdir()
    logs.mkdir()
    journals = TaskJournals(tasks, procs, logs)
    path = tasks / "1-42-abcd.jsonl"
    path.write_text(
        _line(e="start", task=1, writer="42#abcd", **{"from": 10}, ms=1)
        + _line(e="polled", seqnos=[[10, 19]], ms=2)
        + _line(e="polled", seqnos=[[20, 29]], ms=3)
        + _line(e="committed", seqnos=[[10, 24]], ms=4)
        + '{"e":"committed","seqnos":[[25,2'  # torn: finished below
    )
    (logs / "worker-3.log").write_text(
        "[2026] INFO [Worker clientId=c] Joined group at generation 7 with protocol version 2 "
        "and got assignment: Assignment{error=0, leader='x', leaderUrl='http://127.0.0.1:4711/', "
        "offset=3, connectorIds=[seq], taskIds=[seq-0, seq-2], revokedConnectorIds=[], "
        "revokedTaskIds=[seq-1], delay=0} with rebalance delay: 0 (DistributedHerder)\n"
        "[2026] INFO unrelated\n"
    )
    journals.look()
    assert journals.leader_port == 4711
    assert journals.confirmed_since(4) == {1} and journals.confirmed_since(5) == set()
    with path.open("a") as fh:
        fh.write('9]],"ms":5}\n' + _line(e="stop", ms=6) + "not json\n")
    journals.stop()
    assert journals.confirmed_since(5) == {1}  # the torn line, finished, confirmed at 5
    header, ops, notes = read_process_file(procs / "tasks.jsonl")
    assert header is not None and header["process"] == "tasks" and not notes
    oks = [(op["f"], op["value"]) for op in ops if op["type"] == "ok"]
    assert all(op["type"] in ("invoke", "ok") for op in ops) and len(ops) == 2 * len(oks)
    w = {"task": 1, "writer": "42#abcd"}
    assert oks == [
        ("task-start", {**w, "from": 10, "ms": 1}),
        ("polled", {**w, "seqnos": [[10, 29]], "ms": 3}),
        ("committed", {**w, "seqnos": [[10, 24]], "ms": 4}),
        ("assignment", {"worker": 3, "generation": 7, "leader_port": 4711, "tasks": [0, 2]}),
        ("committed", {**w, "seqnos": [[25, 29]], "ms": 5}),
        ("task-stop", {**w, "ms": 6}),
    ]
