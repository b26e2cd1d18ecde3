"""Where a run's time went: ``summary.json``'s ``phases`` derived from a run's timeline
(``harness.run.summary``), the marks the harness's :class:`Drive` sets around the faults, and
``bench/phases.py`` folding several stored runs into min / median / max.

Logic tier: synthetic run directories, no cluster, no Spark.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.run.drive import Drive
from harness.run.runner import Timeline
from harness.run.summary import read_phases, record_phases, record_report

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)


def _wall(seconds: float) -> str:
    """``seconds`` after T0 as the timeline and the histories write a wall time."""
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _run_dir(
    path: Path,
    phases: list[tuple[str, float]],
    marks: Sequence[tuple[str, float]] = (),
    *,
    drain_end: float | None = None,
    checks: dict[str, float] | None = None,
) -> Path:
    """A run directory with what the derivation reads: ``timeline.json``, the final process's
    history (with its drain, if any) and a ``summary.json`` as the runner writes it first."""
    (path / "processes").mkdir(parents=True)
    timeline: dict[str, Any] = {"phases": [{"phase": n, "wall": _wall(s)} for n, s in phases]}
    if marks:
        timeline["marks"] = [{"mark": n, "wall": _wall(s)} for n, s in marks]
    if checks:
        timeline["checks"] = checks
    (path / "timeline.json").write_text(json.dumps(timeline))
    final = [{"history_format": 1, "kind": "process"}]
    if drain_end is not None:
        final += [
            {"process": "final", "type": "invoke", "f": "drain", "wall": _wall(drain_end - 9)},
            {"process": "final", "type": "ok", "f": "drain", "wall": _wall(drain_end)},
        ]
    final.append({"process": "final", "type": "ok", "f": "read", "wall": _wall(1e4)})
    (path / "processes" / "final.jsonl").write_text("".join(json.dumps(o) + "\n" for o in final))
    (path / "summary.json").write_text(json.dumps({"summary": {"seeded": 5}, "drained": True}))
    return path


#: The main job's moments: cluster start 10 s, setup 5 s, load 60 s, heal 2 s, drain 8 s,
#: final reads 4 s, stop and dump 3 s, checks 6 s.
PHASES = [
    ("starting the cluster", 0),
    ("running", 10),
    ("stopping the cluster, dumping its logs", 89),
    ("checking", 92),
    ("judged", 98),
]
MARKS = [("load", 15), ("healing", 75), ("healed", 77)]


def test_the_phases_of_a_judged_eos_run_in_run_order(tmp_path: Path) -> None:
    run = _run_dir(
        tmp_path / "run", PHASES, MARKS, drain_end=85, checks={"eos": 4.5, "log_evidence": 2.25}
    )
    phases = read_phases(run)
    expected = {
        "cluster_start": 10,
        "setup": 5,
        "load": 60,
        "heal": 2,
        "drain": 8,
        "final_reads": 4,
        "stop_and_dump": 3,
        "checks": 6,
        "check:eos": 4.5,
        "check:log_evidence": 2.25,
    }
    assert phases == expected and list(phases) == list(expected)  # in run order
    # Consecutive phases add up to the run; the checker suites lie inside "checks".
    assert sum(s for n, s in phases.items() if not n.startswith("check:")) == 98


def test_a_phase_the_run_did_not_have_is_absent_not_zero(tmp_path: Path) -> None:
    """A queue run (no drain) recorded and not judged: no drain, no checks; its final reads
    are everything from the heal's end to the cluster's stop."""
    phases = [*PHASES[:3], ("recorded", 93)]
    run = _run_dir(tmp_path / "run", phases, MARKS)
    assert read_phases(run) == {
        "cluster_start": 10,
        "setup": 5,
        "load": 60,
        "heal": 2,
        "final_reads": 12,
        "stop_and_dump": 4,
    }


def test_a_run_that_marked_nothing_inside_its_running_phase(tmp_path: Path) -> None:
    """A run of a version before the marks (or one that stopped before its verdict): its
    driver's phases are one, ``workload``, and nothing after the last moment is guessed."""
    run = _run_dir(tmp_path / "run", PHASES[:4], drain_end=85)
    assert read_phases(run) == {"cluster_start": 10, "workload": 79, "stop_and_dump": 3}
    assert read_phases(tmp_path / "nowhere") == {}


def test_summary_json_gets_the_phases_and_keeps_the_report(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run", PHASES, MARKS, drain_end=85)
    record_phases(run)
    record_report(run, 1.23456)
    record_phases(run)  # again (a re-derivation): the report's seconds stay
    summary = json.loads((run / "summary.json").read_text())
    assert summary["summary"] == {"seeded": 5} and summary["drained"] is True
    assert summary["phases"]["drain"] == 8 and summary["phases"]["report"] == 1.235
    assert list(summary["phases"])[-1] == "report"
    record_phases(tmp_path / "no-run")  # no summary.json: nothing written, no error
    assert not (tmp_path / "no-run").exists()


def test_the_timeline_keeps_the_drive_marks_apart_from_its_phases(tmp_path: Path) -> None:
    """The progress line hears the phases only; the Drive's marks (around the faults, even
    when the faulty block fails) land in timeline.json beside them."""
    heard: list[str] = []
    timeline = Timeline(tmp_path / "timeline.json", heard.append)
    timeline.phase("starting the cluster")
    timeline.phase("running")
    drive = Drive(cluster=None, options=None, run_dir=tmp_path, mark=timeline.mark)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError), drive.faults(workload=None, clients=None):  # type: ignore[arg-type]
        raise RuntimeError("the load failed")
    timeline.phase("stopping the cluster, dumping its logs")
    timeline.checks = {"eos": 1.0}
    timeline.phase("judged")
    data = json.loads((tmp_path / "timeline.json").read_text())
    assert [p["phase"] for p in data["phases"]] == [
        "starting the cluster",
        "running",
        "stopping the cluster, dumping its logs",
        "judged",
    ]
    assert [m["mark"] for m in data["marks"]] == ["load", "healing", "healed"]
    assert heard == ["starting the cluster", "running", "stopping the cluster, dumping its logs"]
    assert data["checks"] == {"eos": 1.0}
    names = list(read_phases(tmp_path))
    assert names == [
        "cluster_start",
        "setup",
        "load",
        "heal",
        "final_reads",
        "stop_and_dump",
        "check:eos",
    ]


# --- bench/phases.py ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """``bench/phases.py`` as a module (bench/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("bench_phases", ROOT / "bench" / "phases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _stored_run(path: Path, phases: dict[str, float], span: float, limit: float = 60) -> Path:
    """A finished run as bench/phases.py reads it: summary.json's phases, config.json's time
    limit, and a timeline spanning ``span`` seconds."""
    path.mkdir(parents=True)
    (path / "summary.json").write_text(json.dumps({"summary": None, "phases": phases}))
    (path / "config.json").write_text(json.dumps({"workload": "eos", "time_limit": limit}))
    moments = [("starting the cluster", 0.0), ("running", 10.0), ("judged", span)]
    (path / "timeline.json").write_text(
        json.dumps({"phases": [{"phase": n, "wall": _wall(s)} for n, s in moments]})
    )
    return path


def test_min_median_max_over_stored_runs(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [
        _stored_run(tmp_path / "a", {"cluster_start": 9, "load": 60, "drain": 4, "report": 1}, 90),
        _stored_run(tmp_path / "b", {"cluster_start": 12, "load": 61, "report": 2}, 100),
        _stored_run(tmp_path / "c", {"cluster_start": 10, "load": 62, "drain": 6, "report": 3}, 95),
    ]
    out = tmp_path / "figures.json"
    assert bench.main(["--run-dir", *map(str, runs), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    figures = data["figures"]
    assert list(figures) == [
        "cluster_start",
        "load",
        "drain",
        "report",
        "whole run",
        "time limit",
        "over the time limit",
    ]
    assert figures["cluster_start"] == {"runs": 3, "min": 9, "median": 10, "max": 12}
    # Run b had no drain: the drain's figures are of two runs, not three with a zero.
    assert figures["drain"] == {"runs": 2, "min": 4, "median": 5, "max": 6}
    # The whole run of a stored run: its timeline's span plus the report.
    assert figures["whole run"] == {"runs": 3, "min": 91, "median": 98, "max": 102}
    assert figures["over the time limit"]["median"] == 38
    assert [r["run_dir"] for r in data["runs"]] == [str(r) for r in runs]
    assert len(data["load_average"]) == 3
    printed = capsys.readouterr().out
    assert "cluster_start" in printed and "load average" in printed and "median" in printed


def test_a_run_without_phases_is_refused(bench: ModuleType, tmp_path: Path) -> None:
    run = _stored_run(tmp_path / "old", {}, 90)
    with pytest.raises(SystemExit, match="no phases"):
        bench.main(["--run-dir", str(run)])
