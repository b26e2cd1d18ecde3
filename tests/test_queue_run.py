"""A queue run end to end, as a user starts it: ``python -m harness run --workload queue``.

The run goes through the same runner, verdict and report as an eos run (the workload
registry): a fresh cluster, clients under killed processes, the merged ``history.jsonl``, the
checkers' ``results.json``. The test reads what a user reads: the live progress lines, the
report in headless Chromium, the runs index, and a re-check with ``python -m checkers RUN_DIR``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.anomalies import describe
from harness.report.browser import check_page
from harness.report.data import load_run
from harness.report.render import _anomalies
from harness.report.serve import find_runs

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.cluster


def _python(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


def test_queue_run_progress_report_index_and_recheck(harness_store: Path) -> None:
    store = harness_store / "queue-cli"
    proc = _python(
        "-m",
        "harness",
        "run",
        "--workload",
        "queue",
        "--sub-via",
        "assign",
        "--processors",
        "3",
        "--time-limit",
        "12",
        "--seed",
        "4",
        "--nemesis",
        "kill-processor",
        "--nemesis-interval",
        "5",
        "--nemesis-duration",
        "3",
        "--store",
        str(store),
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    run_dir = (store / "latest").resolve()
    assert run_dir.parent.name == "queue-txn-assign-kill-processor"

    # Live progress counted the clients' ops while they ran (not "setting up ... ops 0").
    running = [int(m.group(1)) for m in re.finditer(r"running\] ops (\d+)", proc.stdout)]
    assert running and max(running) > 0, proc.stdout

    # One history where eos keeps its own, a config of the same shape, the checkers' verdict.
    assert (run_dir / "history.jsonl").is_file() and (run_dir / "processes").is_dir()
    config = json.loads((run_dir / "config.json").read_text())
    assert config["workload"] == "queue" and config["checker_suites"] == ["queue"]
    assert config["kafka_version_resolved"] and config["time_limit"] == 12
    results = json.loads((run_dir / "results.json").read_text())
    assert "queue" in results["checkers"] and "checker" not in results["checkers"]
    # Where the run's time went, phase by phase, ending with the verdict.
    phases = json.loads((run_dir / "timeline.json").read_text())["phases"]
    assert [p["phase"] for p in phases] == [
        "starting the cluster",
        "running",
        "stopping the cluster, dumping its logs",
        "checking",
        "judged",
    ]
    walls = [p["wall"] for p in phases]
    assert walls == sorted(walls), walls
    assert proc.returncode == (0 if results["valid"] is True else 1)

    # The report, as a reader sees it.
    page = check_page(
        run_dir / "report.html",
        run_dir / "report.png",
        selectors=["#checkers tr.checker", "img#timeline", "img#throughput", "#files a"],
    )
    assert page.errors == [], page.errors
    m = re.search(r"history\s+(\d+) ops over (\d+) s", page.text)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, page.text[:600]
    assert page.counts["img#timeline"] == 1 and page.counts["img#throughput"] == 1
    assert re.search(r"^queue\s", page.text, re.M), "the checker row names the queue checker"
    data = load_run(run_dir)
    assert data.processes and data.committed and data.seeded and data.txn_latency
    queue = results["checkers"]["queue"]
    for kind, count, summary, _examples in _anomalies(results):
        assert count == queue["anomalies"][kind], kind  # "N found" as the checker counted
        assert f"{kind}: {count} found" in page.text
        # What the type means, from its one definition (checkers.anomalies).
        assert summary and summary == describe(kind, "queue") and summary in page.text
    repro = page.text[page.text.index("python -m harness run") :].splitlines()[0]
    assert "--workload queue --sub-via assign --processors 3" in repro
    assert "--seed 4" in repro and "--time-limit 12" in repro
    assert "--client python" in repro  # the queue workload has a --client of its own
    for eos_flag in ("--variant", "--values", "--txn-size", "--partitions"):
        assert eos_flag not in repro, repro

    # The runs index shows the Kafka version the run resolved.
    (row,) = [r for r in find_runs(store) if r.path.endswith(run_dir.name)]
    assert row.kafka_version == config["kafka_version_resolved"] != "?"

    # A re-check of the stored run gives the same verdict.
    first = results["valid"], results["anomalies"]
    again = _python("-m", "checkers", str(run_dir), timeout=600)
    assert again.returncode == proc.returncode, again.stderr
    rechecked = json.loads(again.stdout)
    assert (rechecked["valid"], rechecked["anomalies"]) == first
