"""``stalled-task``: a task of the connector's final configuration that went quiet after the
faults healed must not leave the run valid.

``tests/data/connect-stall`` is the history and worker logs of ``--workload connect --nemesis
all --time-limit 45 --kafka-version 4.1.2 --seed 4224`` (2026-11-27, before the supervisor's
settle set the schedule's last task count): the driver's last change left ``tasks.max=1`` and
task 0 confirmed until the stop, so as kept no task of the final configuration stalled. With
that last change turned into a failure the final configuration is the five tasks set before,
and tasks 1-4, stopped at the change, never confirmed again: the planted stall.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from checkers.connect.progress import STALL_S, stalled
from checkers.connect.pyref import check_connect_pyref

DATA = Path(__file__).parent / "data" / "connect-stall"


def _unpacked(into: Path, *, drop_last_count: bool = False) -> Path:
    (into / "logs").mkdir(parents=True)
    for log in (DATA / "logs").glob("*.log.gz"):
        (into / "logs" / log.name[:-3]).write_bytes(gzip.decompress(log.read_bytes()))
    lines = gzip.decompress((DATA / "history.jsonl.gz").read_bytes()).decode().splitlines()
    if drop_last_count:
        last = max(
            i for i, line in enumerate(lines)
            if '"f":"reconfigure"' in line and '"type":"ok"' in line
        )  # fmt: skip
        op = json.loads(lines[last])
        op["type"] = "fail"
        op["error"] = {"code": "TimeoutError", "message": "timed out"}
        lines[last] = json.dumps(op, separators=(",", ":"))
    (into / "history.jsonl").write_text("\n".join(lines) + "\n")
    return into


def test_the_kept_run_s_final_task_kept_confirming(tmp_path: Path) -> None:
    r = check_connect_pyref(_unpacked(tmp_path / "run"))
    assert r["valid"] is True, r["anomalies"]
    assert "stalled-task" not in r["anomalies"]


def test_tasks_of_the_final_configuration_that_went_quiet_are_stalled(tmp_path: Path) -> None:
    r = check_connect_pyref(_unpacked(tmp_path / "run", drop_last_count=True), max_examples=8)
    assert r["valid"] is False
    assert r["anomalies"] == {"stalled-task": 4}, r["anomalies"]
    ex = r["examples"]["stalled-task"]
    assert [e["task"] for e in ex] == [1, 2, 3, 4]
    assert all(e["quiet_s"] >= STALL_S for e in ex)
    # Task 1 last ran on the worker at REST port 37991 (worker-0), and that worker's own log
    # says what became of seq-1 there: stopped at the change, never started again.
    one = ex[0]
    assert one["worker"] == "127.0.0.1:37991" and one["last_confirmed_ms"] is not None
    assert one["log"] and all(line.startswith("worker-0.log: ") for line in one["log"])
    assert all("seq-1" in line for line in one["log"])
    assert any("Stopping task seq-1" in line for line in one["log"])
    assert ex[1]["worker"] == "127.0.0.1:34439"
    assert ex[1]["log"] and all(line.startswith("worker-2.log: ") for line in ex[1]["log"])


def _facts(**over: object) -> dict[str, object]:
    facts: dict[str, object] = {
        "counts": [[5, 1_000_000, 2]],
        "workers": {"0": [9, "h:1"], "1": [9, "h:2"]},
        "stop": [99, 1_000_000 + 60_000],
        "heal": 1_000_000 + 10_000,
        "confirmed": {"0": 1_000_000 + 59_000, "1": 1_000_000 + 20_000},
    }
    return facts | over


def test_a_task_counts_from_the_heal_and_one_never_confirmed_is_stalled() -> None:
    n, ex, note = stalled(_facts(), "seq", Path("/nonexistent"), 8)
    assert (n, [e["task"] for e in ex], note) == (1, [1], None)
    assert ex[0]["quiet_s"] == 40.0 and ex[0]["worker"] == "h:2" and ex[0]["log"] == []
    n, ex, _ = stalled(_facts(confirmed={"0": 1_059_000}), "seq", Path("/x"), 8)
    assert n == 1 and ex[0]["last_confirmed_ms"] is None and ex[0]["quiet_s"] == 50.0


@pytest.mark.parametrize(
    ("over", "want"),
    [
        ({"heal": 1_000_000 + 40_000}, (0, None)),  # stopped 20 s after the heal: not judged
        ({"counts": [[5, 1_000_000, 2], [50, 1_000_000 + 45_000, 3]]}, (0, None)),
        ({"stop": None}, (0, "stalled-task not checked")),
        ({"counts": []}, (0, "stalled-task not checked")),
    ],
)
def test_too_little_time_or_no_facts_judges_nothing(over: dict[str, object], want: tuple) -> None:
    n, _ex, note = stalled(_facts(**over), "seq", Path("/x"), 8)
    assert (n, note if note is None else note[: len(want[1])]) == want


@pytest.mark.spark
def test_the_spark_engine_gives_the_reference_s_whole_result(spark: object, tmp_path: Path) -> None:
    from checkers.connect.run import check_connect

    run = _unpacked(tmp_path / "run", drop_last_count=True)
    got = check_connect(run, spark)  # type: ignore[arg-type]
    assert got["anomalies"] == {"stalled-task": 4}
    assert got == check_connect_pyref(run)
