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
