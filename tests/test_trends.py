"""Trends over two synthetic matrix runs, computed on a real (embedded) Spark.

Night 1: two versions, all correct scenarios pass. Night 2: the same, plus a broken variant
that is caught (expected invalid), one correct scenario that fails with a new safety anomaly
on 3.9.2, and a 4.3.1 throughput drop of 50%. Trends must report exactly those differences.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")


def _cell(version: str, scenario: str, outcome: str = "pass", **kw: Any) -> dict[str, Any]:
    return {
        "id": f"{version}-{scenario.replace('/', '-')}",
        "version": version,
        "scenario": scenario,
        "client": "java" if "java" in scenario else "python",
        "expected": "valid",
        "verdict": "valid" if outcome == "pass" else "invalid",
        "outcome": outcome,
        "anomalies": {},
        "safety_anomaly_types": [],
        "records_per_s": 1000.0,
        "txns_per_s": 10.0,
        "recovery_s": None,
        "report": None,
        **kw,
    }


def _write(store: Path, run: str, cells: list[dict[str, Any]]) -> None:
    d = store / "matrix" / run
    d.mkdir(parents=True)
    doc = {"id": run, "started": run, "complete": True, "cells": cells, "extra": {"x": 1}}
    (d / "matrix.json").write_text(json.dumps(doc))


@pytest.fixture
def two_nights(tmp_path: Path) -> Path:
    _write(
        tmp_path,
        "20260101T021700Z",
        [
            _cell("4.3.1", "eos-python-kill-processor/tv0", recovery_s=2.0),
            _cell("4.3.1", "eos-java/tv2", records_per_s=2000.0),
            _cell("3.9.2", "eos-python-kill-processor/tv0", recovery_s=3.0),
        ],
    )
    _write(
        tmp_path,
        "20260102T021700Z",
        [
            _cell("4.3.1", "eos-python-kill-processor/tv0", recovery_s=4.0),
            _cell("4.3.1", "eos-java/tv2", records_per_s=1000.0),
            _cell(
                "3.9.2",
                "eos-python-kill-processor/tv0",
                "fail",
                anomalies={"lost": 3, "order": 0},
                safety_anomaly_types=["lost"],
                report=str(tmp_path / "r" / "report.html"),
            ),
            _cell(
                "4.3.1",
                "broken-at-least-once/tv0",
                expected="invalid",
                verdict="invalid",
                anomalies={"duplicate": 12},
                safety_anomaly_types=["duplicate"],
            ),
        ],
    )
    # An unreadable leftover of a killed run must not stop the trends.
    (tmp_path / "matrix" / "20260103T000000Z").mkdir()
    (tmp_path / "matrix" / "20260103T000000Z" / "matrix.json").write_text("{")
    return tmp_path


@pytest.mark.spark
def test_trends_show_what_changed_between_two_nights(two_nights: Path, spark: Any) -> None:
    from harness.nightly.trends import compute_trends, write_trends
    from harness.nightly.trends_data import load_matrix, matrix_files

    paths = [p for p in matrix_files(two_nights) if load_matrix(p) is not None]
    assert len(paths) == 2
    t = compute_trends(spark, paths)
    assert t["matrix_runs"] == 2 and t["latest_run"] == "20260102T021700Z"
    assert [(r["cells"], r["pass"], r["fail"]) for r in t["runs"]] == [(3, 3, 0), (4, 3, 1)]

    series = {(s["version"], s["scenario"]): s for s in t["series"]}
    assert [s["version"] for s in t["series"]][:3] == ["4.3.1"] * 3  # newest version first
    py39 = series[("3.9.2", "eos-python-kill-processor/tv0")]
    assert (py39["runs"], py39["pass_rate"]) == (2, 0.5)
    assert py39["anomaly_types"] == ["lost"] and py39["safety_types"] == ["lost"]
    assert [h["outcome"] for h in py39["history"]] == ["pass", "fail"]
    py43 = series[("4.3.1", "eos-python-kill-processor/tv0")]
    assert py43["recovery_s_median"] == pytest.approx(3.0) and py43["recovery_s_max"] == 4.0
    java = series[("4.3.1", "eos-java/tv2")]
    assert java["records_per_s_median"] == pytest.approx(1500.0)
    assert java["records_per_s_latest"] == 1000.0
    assert java["recovery"].startswith("not recorded")
    assert series[("4.3.1", "broken-at-least-once/tv0")]["pass_rate"] == 1.0

    # The client axis: a broken variant's caught duplicates are not the client's failure.
    clients = {(c["client"], c["version"]): c for c in t["clients"]}
    assert set(clients) == {("python", "4.3.1"), ("python", "3.9.2"), ("java", "4.3.1")}
    py43c, py39c = clients[("python", "4.3.1")], clients[("python", "3.9.2")]
    assert (py43c["cells"], py43c["correct_cells"], py43c["correct_pass_rate"]) == (3, 2, 1.0)
    assert py43c["anomaly_types"] == ["duplicate"]
    assert (py39c["correct_cells"], py39c["correct_pass_rate"]) == (2, 0.5)
    assert py39c["anomaly_types"] == ["lost"]
    assert [c["client"] for c in t["clients"]] == ["java", "python", "python"]

    new = {(e["kind"], e["version"], e["scenario"]): e for e in t["whats_new"]}
    assert set(new) == {
        ("first-failure", "3.9.2", "eos-python-kill-processor/tv0"),
        ("new-anomaly-type", "3.9.2", "eos-python-kill-processor/tv0"),
        ("throughput-drop", "4.3.1", "eos-java/tv2"),
        ("new-scenario", "4.3.1", "broken-at-least-once/tv0"),
        ("new-anomaly-type", "4.3.1", "broken-at-least-once/tv0"),
    }
    lost = new[("new-anomaly-type", "3.9.2", "eos-python-kill-processor/tv0")]
    assert lost["types"] == ["lost"] and lost["safety"] == ["lost"]
    assert (
        "broken on purpose"
        in new[("new-anomaly-type", "4.3.1", "broken-at-least-once/tv0")]["text"]
    )
    assert "50% below" in new[("throughput-drop", "4.3.1", "eos-java/tv2")]["text"]

    out_json, out_html = write_trends(t, two_nights)
    assert json.loads(out_json.read_text())["latest_run"] == "20260102T021700Z"
    html = out_html.read_text()
    assert "first failure of Kafka 3.9.2" in html and 'href="r/report.html"' in html
    assert 'href="matrix/20260101T021700Z/matrix.html"' in html
    assert '<table id="clients">' in html and "<td>python</td><td>3.9.2</td>" in html


def test_trends_command_without_matrix_runs_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "trends", "--store", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: no matrix runs") and proc.stderr.count("\n") == 1
