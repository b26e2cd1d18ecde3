"""The report's journey of a connect value: one task's seqno, named ``"<task>:<seqno>"``.

A synthetic connect run (docs/history-format.md, "Workload connect": task journals, final
reads, the offsets topic) with a checker example naming ``1:5``; the journey must list the
ops that touched that seqno and no other, and the report must show them. No cluster.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from harness.report import write_report
from harness.report.data import flagged_values, load_run
from workloads.connect.report import ConnectJourneys, contains, parse_value

S = 10**9  # history times are nanoseconds


def _rec(offset: int, task: int, seqno: int, writer: str) -> list[Any]:
    """A data-topic record as a final read returns it."""
    text = json.dumps({"task": task, "seqno": seqno, "writer": writer}, separators=(",", ":"))
    return [offset, str(task), text, {}]


def _offsets_rec(offset: int, task: int, seqno: int | None) -> list[Any]:
    """An offsets-topic record (Connect's own JSON; ``None``: a tombstone)."""
    value = None if seqno is None else json.dumps({"seqno": seqno})
    return [0, offset, json.dumps(["seq", {"task": task}]), value]


def _ops() -> list[tuple[float, str, str, dict[str, Any], dict[str, Any]]]:
    """``(t, process, f, invoke value, ok value)`` (t: seconds from the first op) of a run
    in which task 1 instance A polls and commits seqnos 0..9, its worker is killed, and
    instance C starts again from 3."""
    a, b, c, d = "101#aaaaaaaa", "101#bbbbbbbb", "202#cccccccc", "202#dddddddd"

    def journal(task: int, writer: str, **kw: Any) -> dict[str, Any]:
        return {"task": task, "writer": writer, **kw, "ms": 1_700_000_000_000}

    def start(task: int, writer: str, first: int) -> dict[str, Any]:
        return journal(task, writer) | {"from": first}

    p0 = [_rec(0, 1, 5, a), _rec(1, 1, 50, a), _rec(2, 2, 5, d), _rec(3, 1, 5, c)]
    p0 += [[4, "1", "not json 5", {}], _rec(5, 1, 15, c)]
    p0.append([6, "1", json.dumps({"task": 1, "seqno": 5, "writer": c}), {}])  # with spaces
    p1 = [_rec(0, 2, 5, d), _rec(1, 2, 6, d)]
    offsets = [_offsets_rec(0, 1, 5), _offsets_rec(1, 1, 12), _offsets_rec(2, 2, 5)]
    offsets.append(_offsets_rec(3, 1, None))
    read = {"topic": "connect-data"}
    ops = [
        (0.0, "supervisor", "spawn", {"slot": 0, "worker": 0}, {"slot": 0, "pid": 101}),
        # Superseded before seqno 5 was polled: not in the journey.
        (2.0, "tasks", "task-start", start(1, "100#00000000", 0), {}),
        (3.0, "tasks", "task-start", start(1, a, 0), {}),
        (3.2, "tasks", "task-start", start(1, b, 7), {}),  # from > 5
        (4.0, "tasks", "polled", journal(1, a, seqnos=[[0, 3], [4, 9]]), {}),
        (4.2, "tasks", "polled", journal(2, d, seqnos=[[0, 9]]), {}),  # other task
        (5.0, "tasks", "committed", journal(1, a, seqnos=[[0, 9]]), {}),
        (6.0, "tasks", "polled", journal(1, a, seqnos=[[10, 20]]), {}),
        (6.5, "nemesis", "start", {"kind": "kill-processor"}, {"kind": "kill-processor"}),
        (6.6, "nemesis", "stop", {"kind": "kill-processor"}, {"kind": "kill-processor"}),
        (7.0, "supervisor", "worker-exit", {"slot": 0, "pid": 101}, {"returncode": -9}),
        (8.0, "tasks", "task-start", start(1, c, 3), {}),  # writes 5 again
        (8.5, "tasks", "task-start", start(1, "202#eeeeeeee", 6), {}),
        (9.0, "tasks", "polled", journal(1, c, seqnos=[[3, 12]]), {}),
        (9.5, "tasks", "task-stop", journal(1, c), {}),
        (10.0, "final", "read", read | {"partition": 0, "isolation": "read_committed"}, p0),
        (11.0, "final", "read", read | {"partition": 0, "isolation": "read_uncommitted"}, p0),
        (11.5, "final", "read", read | {"partition": 1, "isolation": "read_committed"}, p1),
        (12.0, "final", "offsets", {"topic": "seq-offsets"}, offsets),
    ]
    return [_complete(op) for op in ops]


def _membership_ops() -> list[tuple[float, str, str, dict[str, Any], dict[str, Any]]]:
    """Workers joining generations, the REST driver's status polls and a task-count change."""
    status = {"connector": "seq", "state": "RUNNING"}
    running = [{"id": i, "state": "RUNNING", "worker_id": "127.0.0.1:1"} for i in range(3)]
    ops = [
        (
            1.0,
            "tasks",
            "assignment",
            {"worker": 0, "generation": 1, "leader_port": 1, "tasks": [0, 1]},
            {},
        ),
        (
            1.1,
            "tasks",
            "assignment",
            {"worker": 1, "generation": 1, "leader_port": 1, "tasks": [2]},
            {},
        ),
        (2.5, "connect", "status", {"connector": "seq"}, status | {"tasks": running}),
        (7.5, "connect", "reconfigure", {"connector": "seq", "tasks": 2}, {}),
        (
            7.8,
            "tasks",
            "assignment",
            {"worker": 1, "generation": 2, "leader_port": 1, "tasks": [0, 1]},
            {},
        ),
        (8.2, "connect", "status", {"connector": "seq"}, status | {"tasks": running[:2]}),
    ]
    return [_complete(op) for op in ops]


def _complete(
    op: tuple[float, str, str, dict[str, Any], Any],
) -> tuple[float, str, str, dict[str, Any], dict[str, Any]]:
    """The ok value of an op: a journal entry's is its invoke's, a read's adds ``records``."""
    t, proc, f, inv, ok = op
    if proc == "tasks":
        return t, proc, f, inv, inv
    if proc == "final":
        return t, proc, f, inv, inv | {"records": ok}
    return t, proc, f, inv, inv | ok


def _example(task: int, seqno: int, writer: str) -> dict[str, Any]:
    """A ``duplicate`` example of the connect checker, with the ``value`` naming its seqno."""
    rec = {"topic": "connect-data", "partition": 0, "offset": 0, "key": str(task)}
    rec["value"] = _rec(0, task, seqno, writer)[2]
    return {"task": task, "seqno": seqno, "copies": 2, "value": f"{task}:{seqno}", "records": [rec]}


def _results(values: list[tuple[int, int]]) -> dict[str, Any]:
    """A run's results: the connect checker, one duplicate example per ``(task, seqno)``,
    and an offset-behind example whose records (``record``, ``offsets_record``) name no
    value to follow."""
    behind = {
        "task": 2,
        "source_offset": 5,
        "max_seqno": 6,
        "gap": 1,
        "offsets_record": {"topic": "seq-offsets", "value": '{"seqno":5}'},
        "record": {"topic": "connect-data", "value": _rec(1, 2, 6, "x")[2]},
    }
    examples = {"duplicate": [_example(t, s, "101#aaaaaaaa") for t, s in values]}
    examples["offset-behind"] = [behind]
    connect = {
        "checker": "connect",
        "valid": False,
        "anomalies": {"duplicate": len(values), "offset-behind": 1},
        "examples": examples,
    }
    return {"valid": False, "checkers": {"connect": connect}}


def write_run(run_dir: Path, values: list[tuple[int, int]]) -> Path:
    """A connect run directory (merged history, config, results flagging ``values``)."""
    run_dir.mkdir(parents=True)
    lines = [json.dumps({"history_format": 1, "kind": "merged", "meta": {"workload": "connect"}})]
    pindex: dict[str, int] = {}
    for t, proc, f, inv, ok in sorted(_ops() + _membership_ops(), key=lambda o: o[0]):
        for i, (typ, value) in enumerate((("invoke", inv), ("ok", ok))):
            pindex[proc] = pindex.get(proc, -1) + 1
            op = {"index": len(lines) - 1, "pindex": pindex[proc], "time": int(t * S) + i}
            op |= {"wall": "2026-11-22T00:00:00Z", "process": proc, "type": typ, "f": f}
            lines.append(json.dumps(op | {"value": value}))
    (run_dir / "history.jsonl").write_text("\n".join(lines) + "\n")
    config = {"workload": "connect", "test_name": "connect-journey", "seed": 1}
    (run_dir / "config.json").write_text(json.dumps(config))
    (run_dir / "results.json").write_text(json.dumps(_results(values)))
    return run_dir


def test_connect_value_journey(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [(1, 5)])
    data = load_run(run)
    # Only the example's value: the records an example carries name no value to follow.
    assert set(data.journeys) == {"1:5"}
    steps = sorted(data.journeys["1:5"], key=lambda s: s["t"])
    assert [(s["t"], s["process"], s["f"]) for s in steps] == [
        (3.0, "tasks", "task-start"),  # the last start before 5 was polled
        (4.0, "tasks", "polled"),
        (5.0, "tasks", "committed"),
        (8.0, "tasks", "task-start"),  # the restart that writes 5 again
        (9.0, "tasks", "polled"),
        (10.0, "final", "read"),
        (11.0, "final", "read"),
        (12.0, "final", "offsets"),
    ]
    what = [s["what"] for s in steps]
    assert "101#aaaaaaaa" in what[0] and "from 0" in what[0]
    assert "task 1 instance 101#aaaaaaaa handed 1:5 to Connect (polled)" in what[1]
    assert "Connect confirmed 1:5 to task 1 instance 101#aaaaaaaa (committed)" in what[2]
    assert "202#cccccccc" in what[3] and "writes 1:5 again" in what[3]
    assert "202#cccccccc" in what[4]
    for s, isolation in ((steps[5], "read_committed"), (steps[6], "read_uncommitted")):
        assert s["what"] == (
            f"{isolation} read found 1:5 at partition 0 @ 0 (written by 101#aaaaaaaa); "
            f"{isolation} read found 1:5 at partition 0 @ 3 (written by 202#cccccccc); "
            f"{isolation} read found 1:5 at partition 0 @ 6 (written by 202#cccccccc)"
        )
        # The row keeps the records of 1:5, not the whole read.
        assert [r[0] for r in s["result"]["records"]] == [0, 3, 6]
        assert s["result"]["isolation"] == isolation
    assert "partition 0 @ 0" in what[7] and "committed source offset is 5" in what[7]
    assert [r[1] for r in steps[7]["result"]["records"]] == [0]

    page = write_report(run).read_text()
    assert page.count('<table class="journey"') == 1
    (table,) = re.findall(r'<table class="journey" data-value="1:5">.*?</table>', page, re.S)
    rows = re.findall(r"<tr class=\"[^\"]*\">(.*?)</tr>", table, re.S)
    assert len(rows) == 8
    assert "polled" in rows[1] and "committed" in rows[2] and "kill-processor" not in rows[2]
    assert "read_committed read found 1:5 at partition 0 @ 0" in rows[5]
    assert "1:50" not in table and "2:5" not in table
    assert "Connect confirmed" in table and "task:seqno" in page


def test_journeys_only_of_wanted_seqnos(tmp_path: Path) -> None:
    """Two wanted seqnos of one task, one of another; a seqno never polled keeps the start of
    the instance due to write it."""
    run = write_run(tmp_path / "run", [(1, 15), (2, 6), (1, 40)])
    data = load_run(run)
    assert set(data.journeys) == {"1:15", "2:6", "1:40"}
    fs = {
        v: [(s["t"], s["f"]) for s in sorted(st, key=lambda s: s["t"])]
        for v, st in data.journeys.items()
    }
    # Starts from 0, 0 and 7 before 15 was polled: the last one; then the two restarts.
    assert fs["1:15"] == [
        (3.2, "task-start"),
        (6.0, "polled"),
        (8.0, "task-start"),
        (8.5, "task-start"),
        (10.0, "read"),
        (11.0, "read"),
    ]
    assert fs["2:6"] == [(4.2, "polled"), (11.5, "read")]
    assert fs["1:40"] == [(8.5, "task-start")]


def test_containment_not_expansion() -> None:
    """A journal range of a trillion seqnos is tested in constant time."""
    assert contains([[0, 3], [5, 9]], 5) and not contains([[0, 3], [5, 9]], 4)
    assert not contains([[10, 20]], 5) and not contains("junk", 5) and not contains([[1]], 1)
    steps: list[tuple[str, str]] = []
    journeys = ConnectJourneys(["1:5"], lambda v, inv, op, what, res: steps.append((v, what)) or {})
    op = {"process": "tasks", "f": "committed", "time": 0}
    op["value"] = {"task": 1, "writer": "w", "seqnos": [[0, 10**12]]}
    started = time.perf_counter()
    journeys.see(op, op)
    assert time.perf_counter() - started < 0.1
    assert [v for v, _ in steps] == ["1:5"]


def test_value_names() -> None:
    """Connect values and eos ones never look alike; records in examples name no value."""
    assert parse_value("2:417") == (2, 417)
    assert parse_value("v000007") is None and parse_value("x1:2") is None
    assert flagged_values(_results([(1, 5)]), 12) == {"1:5"}
    assert not ConnectJourneys(["v000007"], lambda *a: {})


def test_a_connect_report_shows_its_own_figures_and_assignments(tmp_path: Path) -> None:
    """The report draws what the connect workload declares: seqnos Connect confirmed per
    task, the task count, the workers' generations; the worker assignments and the task-count
    change in its table; and no figure or sentence of another workload (no blank drain)."""
    run = write_run(tmp_path / "run", [(1, 5)])
    data = load_run(run)

    def rounded(title: str) -> list[tuple[float, str, float]]:
        return [(round(t, 1), n, y) for t, n, y in data.series[title]]

    assert rounded("seqnos Connect confirmed, per task") == [(5.0, "task 1", 9)]
    assert rounded("tasks") == [
        (2.5, "tasks running", 3),
        (7.5, "tasks asked for", 2),
        (8.2, "tasks running", 2),
    ]
    assert [(n, g) for _, n, g in data.series["worker generations"]] == [
        ("worker 0", 1),
        ("worker 1", 1),
        ("worker 1", 2),
    ]
    assert [(round(t, 1), e, g) for t, e, _p, g in data.rebalances] == [
        (1.0, "worker 0 given tasks [0, 1]", 1),
        (1.1, "worker 1 given tasks [2]", 1),
        (7.5, "task count set to 2", None),
        (7.8, "worker 1 given tasks [0, 1]", 2),
    ]
    assert sum(n for _, n in data.committed) == 10 and sum(n for _, n in data.seeded) == 41
    page = write_report(run).read_text()
    assert "<h2>Worker assignments and task-count changes</h2>" in page
    assert "4 changes" in page and "None recorded" not in page
    titles = re.findall(r"<h3>(.*?)</h3>\n<img class=\"figure series", page)
    assert titles == ["seqnos Connect confirmed, per task", "tasks", "worker generations"]
    assert "Final read_committed drain" not in page and "seeded ," not in page
