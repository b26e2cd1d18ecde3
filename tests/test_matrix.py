"""The matrix: scenario expansion, cell verdicts, its files, versions-seen; and one real run.

The unit tests build cells' run directories by hand (summary.json, results.json, a latest
link) and judge them as the matrix would; the ``cluster`` test runs a one-cell matrix for real
and opens its matrix.html in headless Chromium.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from common.errors import HarnessError
from harness.nightly.cells import judge_cell, outcome_of, recovery_seconds, verdict_of
from harness.nightly.matrix import choose_versions, latest_lines, load_seen, update_seen
from harness.nightly.output import junit_xml, write_outputs
from harness.nightly.scenarios import SCENARIOS, expand, resolve_scenarios, security_gap
from harness.nightly.trends_data import new_safety_anomalies, seen_safety_types

AVAILABLE = ["4.10.0", "4.9.0", "4.3.1", "4.3.0", "4.0.0", "3.9.2", "3.9.1"]


# --- scenarios -------------------------------------------------------------------------


def test_smoke_expands_by_transaction_version_support() -> None:
    cells = expand(["3.9.2", "4.3.1"], resolve_scenarios("smoke"))
    ids = [c.cell_id for c in cells]
    assert ids == [
        "3.9.2-eos-python-kill-processor-tv0",
        "3.9.2-eos-java-tv0",
        "3.9.2-broken-read-uncommitted-tv0",
        "4.3.1-eos-python-kill-processor-tv0",
        "4.3.1-eos-java-tv2",
        "4.3.1-broken-read-uncommitted-tv0",
    ]
    # 3.9 has no transaction.version feature: no flag at all; 4.x gets it explicitly.
    assert all("--transaction-version" not in c.run_args(1) for c in cells[:3])
    java4 = cells[4].run_args(1)
    assert java4[java4.index("--transaction-version") + 1] == "2"
    assert java4[java4.index("--client") + 1] == "java"
    assert cells[5].scenario.expected == "invalid"
    assert "--variant" in cells[5].run_args(None) and "--seed" not in cells[5].run_args(None)


def test_both_transaction_versions_only_for_the_java_client_on_4x() -> None:
    both = SCENARIOS["eos-java-tv0-tv2"]
    assert [c.transaction_version for c in expand(["4.0.0"], [both])] == [0, 2]
    assert [c.transaction_version for c in expand(["3.9.2"], [both])] == [None]
    python = SCENARIOS["eos-python-kill-processor"]
    assert [c.transaction_version for c in expand(["4.3.1"], [python])] == [0]


def test_every_faulty_scenario_injects_a_fault_within_its_time_limit() -> None:
    """The first fault is due one interval after the start: a 10 s run with the run's default
    10 s interval never injects one (a broken variant then goes uncaught)."""
    for s in SCENARIOS.values():
        if s.nemesis != "none":
            assert s.nemesis_interval < s.time_limit / 2, s.name
            args = s.run_args()
            assert args[args.index("--nemesis-interval") + 1] == f"{s.nemesis_interval:g}"


def test_every_scenario_is_a_command_line_of_its_workload() -> None:
    """Each scenario's arguments parse as ``python -m harness run`` of its workload (a flag of
    another workload would be refused), and the queue workload has a scenario of its own."""
    from harness.cli import build_parser
    from harness.kafka.versions import DEFAULT_KAFKA_VERSION
    from harness.nightly.scenarios import Cell
    from harness.run.arguments import options_from_args

    for s in SCENARIOS.values():
        argv = ["run", *Cell(DEFAULT_KAFKA_VERSION, s, None, 5).run_args(1)]
        options = options_from_args(build_parser().parse_args(argv))
        assert options.workload == s.workload, s.name
        assert options.test_name.startswith(s.workload), s.name
    assert SCENARIOS["queue-kill-processor"].workload == "queue"


def test_time_limit_override_and_scenario_lists() -> None:
    cells = expand(["4.3.1"], resolve_scenarios("eos-python-none,smoke"), time_limit=5)
    assert {c.time_limit for c in cells} == {5}
    assert cells[0].scenario.name == "eos-python-none"
    assert len(cells) == 4
    with pytest.raises(HarnessError, match="unknown scenario"):
        resolve_scenarios("smoke,nope")


def test_a_secured_matrix_runs_what_can_run_secured_in_columns_of_its_own() -> None:
    scenarios = resolve_scenarios("clients,streams")
    cells = expand(["4.4.0"], scenarios, security="sasl_ssl")
    names = {c.scenario.name for c in cells}
    # Every eos client and the Streams application take the security object; the queue
    # workload does not.
    assert {"streams-all", "eos-python-zombie", "bug-zombie-kafkajs"} <= names, names
    assert not any(n.startswith("queue") for n in names)
    assert security_gap(SCENARIOS["queue-kill-processor"], "tls") is not None
    assert security_gap(SCENARIOS["queue-kill-processor"], "plaintext") is None
    cell = next(c for c in cells if c.scenario.name == "streams-all")
    assert cell.scenario_id == "streams-all/tv0/sasl_ssl"
    assert cell.cell_id == "4.4.0-streams-all-tv0-sasl_ssl"
    args = cell.run_args(7)
    assert args[args.index("--security") + 1] == "sasl_ssl"
    plain = expand(["4.4.0"], scenarios)
    assert "--security" not in plain[0].run_args(7) and "/" not in plain[0].cell_id


# --- versions ----------------------------------------------------------------------------


def _args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"versions": None, "latest": None, "new": False, **kw})


def test_version_selection() -> None:
    assert latest_lines(AVAILABLE, 3) == ["4.10.0", "4.9.0", "4.3.1"]
    assert choose_versions(_args(), AVAILABLE, None) == ["4.10.0", "4.9.0"]
    assert choose_versions(_args(versions="3.9.2, 4.3.1"), AVAILABLE, None) == ["3.9.2", "4.3.1"]
    seen = set(AVAILABLE) - {"4.10.0"}
    assert choose_versions(_args(new=True), AVAILABLE, seen) == ["4.10.0"]
    assert choose_versions(_args(new=True), AVAILABLE, set(AVAILABLE)) == []
    assert choose_versions(_args(new=True, latest=1), AVAILABLE, set(AVAILABLE)) == ["4.10.0"]
    with pytest.raises(HarnessError, match=r"nearest: 3\.9\.2"):
        choose_versions(_args(versions="3.9.3"), AVAILABLE, None)
    with pytest.raises(HarnessError, match="cannot be combined"):
        choose_versions(_args(versions="3.9.2", new=True), AVAILABLE, None)


def test_versions_seen_baseline_then_tested(tmp_path: Path) -> None:
    assert load_seen(tmp_path) is None
    update_seen(tmp_path, ["4.3.1", "3.9.2"], ["4.3.1"])
    assert load_seen(tmp_path) == {"4.3.1", "3.9.2"}
    update_seen(tmp_path, ["4.4.0", "4.3.1", "3.9.2"], ["3.9.2"])
    # 4.4.0 appeared after the baseline and was not run: still new.
    assert load_seen(tmp_path) == {"4.3.1", "3.9.2"}
    update_seen(tmp_path, ["4.4.0", "4.3.1", "3.9.2"], ["4.4.0"])
    assert json.loads((tmp_path / "versions-seen.json").read_text()) == ["4.4.0", "4.3.1", "3.9.2"]


# --- cell verdicts -----------------------------------------------------------------------


def test_verdict_prefers_results_then_exit_status() -> None:
    ok = {"summary": {"exactly_once": True}}
    bad = {"summary": {"exactly_once": False}}
    assert verdict_of(0, {"valid": True}, bad) == ("valid", "results.json")
    assert verdict_of(1, {"valid": False}, ok) == ("invalid", "results.json")
    assert verdict_of(2, {"valid": "unknown"}, ok) == ("error", "results.json")
    assert verdict_of(0, {"valid": "unknown"}, ok) == ("unknown", "results.json")
    assert verdict_of(1, None, ok) == ("invalid", "exit status")
    assert verdict_of(2, None, ok) == ("error", "exit status")
    assert verdict_of(0, None, bad) == ("error", "no results.json")  # the drain tally is no verdict
    assert verdict_of(0, None, None) == ("error", "no results.json")
    assert verdict_of(None, {"valid": True}, ok) == ("error", "timeout")


def test_expected_invalid_counts_as_pass_when_caught() -> None:
    assert outcome_of("invalid", "invalid") == "pass"
    assert outcome_of("invalid", "valid") == "fail"
    assert outcome_of("valid", "invalid") == "fail"
    assert outcome_of("valid", "unknown") == "error"
    # A scenario that reproduces a finding passes only when its verdict names it.
    assert outcome_of("valid", "valid", "F13", ["F13"]) == "pass"
    assert outcome_of("valid", "valid", "F13", []) == "fail"
    assert outcome_of("invalid", "invalid", "F9", ["F5"]) == "fail"


def _fake_run(store: Path, results: dict[str, Any] | None, exactly_once: bool = True) -> Path:
    run = store / "eos" / "20260101T000000"
    run.mkdir(parents=True)
    summary = {
        "summary": {"exactly_once": exactly_once, "duplicates": 0 if exactly_once else 4},
        "stats": {"records_per_s": 1234.5, "txns_per_s": 12.5},
        "drained": True,
    }
    (run / "summary.json").write_text(json.dumps(summary))
    if results is not None:
        (run / "results.json").write_text(json.dumps(results))
    (run / "report.html").write_text("<html></html>")
    t = 10**9
    ops = [
        {"process": 0, "type": "ok", "f": "txn", "time": t // 2, "value": {"offsets": [[0, 5]]}},
        {"process": "nemesis", "type": "ok", "f": "start", "time": 1 * t},
        {"process": "nemesis", "type": "ok", "f": "stop", "time": 2 * t},
        {
            "process": 0,
            "type": "ok",
            "f": "txn",
            "time": int(1.5 * t),
            "value": {"offsets": [[0, 9]]},
        },
        {
            "process": 1,
            "type": "ok",
            "f": "txn",
            "time": int(3.5 * t),
            "value": {"offsets": [[1, 4]]},
        },
        {"process": "nemesis", "type": "ok", "f": "start", "time": 4 * t},
        {
            "process": 1,
            "type": "ok",
            "f": "txn",
            "time": int(4.25 * t),
            "value": {"offsets": [[1, 8]]},
        },
    ]
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    (store / "latest").symlink_to(run)
    return run


def test_judge_cell_from_results(tmp_path: Path) -> None:
    cell = expand(["4.3.1"], [SCENARIOS["broken-at-least-once"]])[0]
    results = {
        "valid": False,
        "anomalies": {"duplicate": 7, "order": 0},
        "bad_anomaly_types": ["duplicate"],
    }
    run = _fake_run(tmp_path, results)
    rec = judge_cell(cell, tmp_path, 1, 42.0, log_path=tmp_path / "cell.log")
    assert rec["verdict"] == "invalid" and rec["outcome"] == "pass"
    assert rec["anomalies"] == {"duplicate": 7}
    assert rec["safety_anomaly_types"] == ["duplicate"]
    assert rec["records_per_s"] == 1234.5
    # Fault 1 (t=1): partition 0 commits at 1.5, partition 1 only at 3.5; fault 2: 0.25 s.
    assert rec["recovery_s"] == 2.5 and rec["faults"] == 2
    assert rec["report"] == str(run / "report.html")
    assert "duplicate=7" in rec["message"] and str(run / "report.html") in rec["message"]


def test_judge_cell_without_results_has_no_verdict(tmp_path: Path) -> None:
    cell = expand(["4.3.1"], [SCENARIOS["eos-python-none"]])[0]
    _fake_run(tmp_path, None, exactly_once=False)
    rec = judge_cell(cell, tmp_path, 0, 10.0)
    assert (rec["verdict"], rec["verdict_source"], rec["outcome"]) == (
        "error",
        "no results.json",
        "error",
    )
    assert rec["anomalies"] == {}


def test_judge_cell_without_a_run_dir_is_an_error(tmp_path: Path) -> None:
    cell = expand(["4.3.1"], [SCENARIOS["eos-python-none"]])[0]
    (tmp_path / "cell.log").write_text("starting\nerror: Java not found on PATH\n")
    rec = judge_cell(cell, tmp_path, 2, 1.0, log_path=tmp_path / "cell.log")
    assert rec["outcome"] == "error" and rec["run_dir"] is None
    assert "Java not found" in rec["message"]


def test_recovery_is_empty_without_faults(tmp_path: Path) -> None:
    assert recovery_seconds(tmp_path / "missing.jsonl") == []


def test_recovery_reads_eos_commits_and_passes_over_queue_transactions(tmp_path: Path) -> None:
    """A queue history's ``txn`` ops hold a list of micro-ops, not an eos processor's dict."""
    ops = [
        {"index": 0, "time": 1_000_000_000, "process": "nemesis", "type": "ok", "f": "start"},
        {"index": 1, "time": 2_000_000_000, "process": 1, "type": "ok", "f": "txn",
         "value": [["send", 0, 5]]},
        {"index": 2, "time": 3_500_000_000, "process": 2, "type": "ok", "f": "txn",
         "value": {"txn": 1, "offsets": [[0, 9]]}},
    ]  # fmt: skip
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(op) + "\n" for op in ops))
    assert recovery_seconds(path) == [2.5]


# --- outputs and new safety anomalies ----------------------------------------------------


def _record(version: str, scenario: str, outcome: str, **kw: Any) -> dict[str, Any]:
    base = {
        "id": f"{version}-{scenario.replace('/', '-')}",
        "version": version,
        "scenario": scenario,
        "expected": "valid",
        "verdict": {"pass": "valid", "fail": "invalid", "error": "error"}[outcome],
        "verdict_source": "results.json",
        "outcome": outcome,
        "anomalies": {},
        "safety_anomaly_types": [],
        "records_per_s": 1000.0,
        "txns_per_s": 10.0,
        "recovery_s": None,
        "wall_s": 60.0,
        "report": None,
        "run_dir": None,
        "log": "cell.log",
        "message": f"{scenario}: {outcome}",
    }
    return {**base, **kw}


def test_outputs(tmp_path: Path) -> None:
    report = tmp_path / "cells" / "x" / "report.html"
    report.parent.mkdir(parents=True)
    report.write_text("<html></html>")
    cells = [
        _record("4.3.1", "eos-java/tv2", "pass", report=str(report)),
        _record(
            "3.9.2",
            "eos-python-kill-processor/tv0",
            "fail",
            anomalies={"lost": 2, "duplicate": 1},
            message="expected valid, got invalid; anomalies: duplicate=1, lost=2; report: R",
        ),
        _record("3.9.2", "eos-java/tv0", "error", verdict_source="timeout"),
    ]
    matrix = {
        "id": "m1",
        "started": "2026",
        "wall_s": 180.0,
        "seed": 1,
        "scenario_spec": "smoke",
        "cells": cells,
        "new_safety_anomalies": [],
    }
    write_outputs(matrix, tmp_path, junit=tmp_path / "extra" / "junit.xml")
    stored = json.loads((tmp_path / "matrix.json").read_text())
    assert stored["totals"] == {"cells": 3, "pass": 1, "fail": 1, "error": 1}
    suite = ET.parse(tmp_path / "extra" / "junit.xml").getroot()
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["eos-python-kill-processor/tv0"].find("failure")
    assert failure is not None and "duplicate=1, lost=2" in failure.get("message", "")
    assert failure.get("type") == "duplicate, lost"
    assert cases["eos-java/tv0"].find("error") is not None
    html = (tmp_path / "matrix.html").read_text()
    assert 'href="cells/x/report.html"' in html and "Kafka 3.9.2" in html
    assert junit_xml(matrix) == (tmp_path / "junit.xml").read_text()


def test_new_safety_anomaly_only_when_unseen_for_version_and_scenario(tmp_path: Path) -> None:
    earlier = tmp_path / "matrix" / "20260101T000000Z"
    earlier.mkdir(parents=True)
    old = [_record("4.3.1", "s/tv0", "fail", safety_anomaly_types=["duplicate"])]
    (earlier / "matrix.json").write_text(json.dumps({"id": "a", "cells": old}))
    seen = seen_safety_types(tmp_path)
    assert seen == {("4.3.1", "s/tv0"): {"duplicate"}}
    tonight = [
        _record("4.3.1", "s/tv0", "fail", safety_anomaly_types=["duplicate"]),
        _record("3.9.2", "s/tv0", "fail", safety_anomaly_types=["duplicate"]),
        _record("4.3.1", "b/tv0", "pass", expected="invalid", safety_anomaly_types=["lost"]),
    ]
    new = new_safety_anomalies(tonight, seen)
    assert [(n["version"], n["types"]) for n in new] == [("3.9.2", ["duplicate"])]
    assert seen_safety_types(tmp_path, exclude=earlier) == {}


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = (
        ["--scenarios", "nope"],
        ["--versions", "9.9.9"],
        ["--versions", "x.y"],
        ["--versions", "4.4.0", "--scenarios", "share", "--security", "tls"],
    )
    for argv in bad:
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "matrix", "--store", str(tmp_path), *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error:")
    assert not (tmp_path / "matrix").exists()


def test_a_client_that_does_not_build_makes_its_cells_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Kafka version the Java clients do not compile against: their cells run nothing and
    say "not built: <javac's first error>" in matrix.json, junit.xml and on the page, while
    the version's other cells still run."""
    import shutil

    from checkers import spark as sparkmod
    from harness.kafka import install as installmod
    from harness.kafka import javaclients
    from harness.kafka.versions import DEFAULT_KAFKA_VERSION, KafkaVersion
    from harness.nightly import matrix as matrixmod

    real = installmod.ensure_installed(DEFAULT_KAFKA_VERSION)
    libs = tmp_path / "kafka" / "libs"  # the real jars, a cache of the test's own
    libs.mkdir(parents=True)
    for jar in real.libs_dir.glob("*.jar"):
        (libs / jar.name).symlink_to(jar)
    scratch = installmod.Installation(
        KafkaVersion(DEFAULT_KAFKA_VERSION), libs, Path("/nonexistent"), real.java
    )
    src = tmp_path / "src"
    shutil.copytree(javaclients.SOURCE_DIR, src)
    (src / "kafkaharness" / "Broken.java").write_text(
        "package kafkaharness;\nfinal class Broken { int x = undefinedName; }\n"
    )
    builds: list[str] = []
    build = javaclients.ensure_built

    def broken_build(install: Any) -> Path:
        builds.append(str(install.version))
        return build(install, source_dir=src)

    ran: list[str] = []
    monkeypatch.setattr(installmod, "ensure_installed", lambda version=None: scratch)
    monkeypatch.setattr(javaclients, "ensure_built", broken_build)
    monkeypatch.setattr(matrixmod, "released_versions", lambda: [DEFAULT_KAFKA_VERSION])
    monkeypatch.setattr(sparkmod, "start_spark", lambda *a, **k: None)
    monkeypatch.setattr(
        matrixmod, "run_cell", lambda cell, *a: ran.append(cell.cell_id) or _record(
            cell.version, cell.scenario_id, "pass", id=cell.cell_id
        )
    )  # fmt: skip
    args = argparse.Namespace(
        versions=DEFAULT_KAFKA_VERSION, latest=None, new=False, store=str(tmp_path / "store"),
        scenarios="eos-java,eos-java-kills,eos-python-kill-processor", time_limit=5.0, seed=1,
        junit=None, fail_on_new_safety_anomaly=False, spark_master=None, security="plaintext",
    )  # fmt: skip
    assert matrixmod.matrix_command(args) == 1  # not every cell came out as expected

    (out_dir,) = (tmp_path / "store" / "matrix").iterdir()
    cells = json.loads((out_dir / "matrix.json").read_text())["cells"]
    java = [c for c in cells if c["scenario"].startswith("eos-java")]
    assert len(java) == 3 and builds == [DEFAULT_KAFKA_VERSION]  # one build for the version
    for c in java:
        assert (c["verdict_source"], c["outcome"]) == ("build", "error")
        assert c["message"].startswith("not built: ") and "Broken.java" in c["message"]
        assert "cannot find symbol" in c["build_error"] and "\n" not in c["build_error"]
    assert ran == [c["id"] for c in cells if c not in java] and ran
    html = (out_dir / "matrix.html").read_text()
    assert html.count("NOT BUILT") == 3 and "cannot find symbol" in html
    errors = ET.parse(out_dir / "junit.xml").getroot().iter("error")
    assert sum(e.get("type") == "build" for e in errors) == 3
    assert not list((tmp_path / "kafka").glob("java-clients/*/classes")), "nothing half-built"


# --- a real matrix ---------------------------------------------------------------------


@pytest.mark.cluster
def test_tiny_matrix_for_real_and_its_page(tmp_path: Path) -> None:
    from harness.report.browser import check_page

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "matrix",
            "--versions",
            "4.3.1",
            "--scenarios",
            "eos-python-none,queue-kill-processor",
            "--time-limit",
            "10",
            "--seed",
            "3",
            "--store",
            str(tmp_path),
            "--junit",
            str(tmp_path / "junit.xml"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (out_dir,) = (tmp_path / "matrix").iterdir()
    matrix = json.loads((out_dir / "matrix.json").read_text())
    cell, _queue_cell = matrix["cells"]
    for c in matrix["cells"]:
        assert c["outcome"] == "pass" and c["verdict"] == "valid", c["message"]
        assert Path(c["report"]).is_file() and Path(c["run_dir"], "results.json").is_file()
        # The child recorded the run; the matrix judged it, in its own process.
        assert "judged by the matrix" in Path(c["log"]).read_text()
        timeline = json.loads(Path(c["run_dir"], "timeline.json").read_text())
        phases = [p["phase"] for p in timeline["phases"]]
        assert "recorded" in phases and "checking" not in phases, phases
        assert "--no-verdict" not in c["command"]  # what a user re-runs judges itself
    # Small cells are judged on the Python engines: no JVM (one at most, shared, if a cell
    # needed Spark).
    assert matrix["spark_jvms"] == 0
    for c in matrix["cells"]:
        engines = json.loads(Path(c["run_dir"], "results.json").read_text())["engines"]
        assert set(engines.values()) == {"python"}, engines
    assert cell["records_per_s"]
    assert load_seen(tmp_path) is not None and "4.3.1" in load_seen(tmp_path)  # type: ignore[operator]
    page = check_page(out_dir / "matrix.html", tmp_path / "matrix.png", selectors=["#matrix td a"])
    assert page.errors == []
    assert "Kafka 4.3.1" in page.text and "eos-python-none/tv0" in page.text
    assert "PASS" in page.text
    assert page.counts["#matrix td a"] == 2
