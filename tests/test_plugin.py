"""The pytest plugin links a test to its run's report in JUnit XML and pytest-html output."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

_TEST = """
def test_links_its_report(run_report, tmp_path):
    report = tmp_path / "report.html"
    report.write_text("<html></html>")
    run_report(report)
    assert False, "a failing scenario"
"""


def test_junit_and_html_name_the_report(tmp_path: Path) -> None:
    (tmp_path / "test_scenario.py").write_text(_TEST)
    junit, html = tmp_path / "junit.xml", tmp_path / "out.html"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         f"--junitxml={junit}", f"--html={html}", "test_scenario.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the test failed, pytest did not
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["report"].endswith("report.html")
    assert Path(props["report"]).as_uri() in html.read_text()


_SCENARIO_TEST = """
import json
from dataclasses import asdict, dataclass
from types import SimpleNamespace

import pytest

from checkers import suites
from harness.run import workloads
from workloads.drive import Outcome, Workload
from history import Recorder
from workloads.spec import WorkloadSpec


@dataclass
class Options:
    seed: int = 0
    topic: str = "t"

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, raw):
        return cls(**raw)

    def validate(self):
        pass

    def name_parts(self):
        return []


def drive(d):
    (d.run_dir / "processes").mkdir()
    # No nemesis runs in this scenario: nothing asks the (absent) client processes.
    with d.faults(None, SimpleNamespace()), Recorder(d.run_dir / "processes" / "0.jsonl", 0) as rec:
        rec.invoke("write", d.options.workload_options.topic)
        rec.ok("write", d.options.workload_options.topic)
    return Outcome(True)


class NoCluster:
    run_id = "none"


@pytest.fixture(scope="session")
def kafka_cluster():
    return NoCluster()


def test_scenario_runs_a_registered_workload(scenario, monkeypatch):
    spec = WorkloadSpec("toy", Options, (), ("toy",), isolate=lambda tag: {"topic": tag})
    workloads.register(Workload(spec, drive))
    def check(ctx):
        return {"checkers": {"toy": {"valid": True, "topic": ctx.workload_options["topic"]}}}

    toy = suites.RunDirCheck("toy", lambda d: True, check, spark=False)
    monkeypatch.setitem(suites.SUITES, "toy", toy)
    verdict, result, report = scenario("toy", "first", time_limit=1)
    assert verdict["valid"] is True and result.drained
    assert verdict["checkers"]["toy"]["topic"].startswith("first-")
    assert report.name == "report.html" and report.is_file()
"""


def test_scenario_fixture_runs_any_registered_workload(tmp_path: Path) -> None:
    """The ``scenario`` fixture finds a workload in the registry, gives it names of its own,
    runs it, has the checkers judge it and writes its report (a fake cluster: the fixture is
    overridden, as a project using the plugin may)."""
    (tmp_path / "test_toy.py").write_text(_SCENARIO_TEST)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--store", str(tmp_path / "store"), "test_toy.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


_MARKED = """
def test_on_a_cluster(kafka_cluster):
    pass


def test_on_a_faulted_cluster(healthy_cluster):
    pass


def test_with_spark(spark):
    pass


def test_plain():
    pass
"""


def test_fixtures_mark_their_tests_so_the_quick_tier_leaves_them_out(tmp_path: Path) -> None:
    """``-m "not cluster and not spark"`` must leave out a test that only asks for a cluster or
    a Spark session, without a mark written by hand; collecting starts neither."""
    (tmp_path / "test_marked.py").write_text(_MARKED)

    def collected(expr: str) -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
             "-p", "no:xdist", "-m", expr, "test_marked.py"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode in (0, 5), proc.stdout + proc.stderr  # 5: nothing selected
        return sorted(ln.split("::")[1] for ln in proc.stdout.splitlines() if "::" in ln)

    assert collected("not cluster and not spark") == ["test_plain"]
    assert collected("cluster") == ["test_on_a_cluster", "test_on_a_faulted_cluster"]
    assert collected("spark") == ["test_with_spark"]
