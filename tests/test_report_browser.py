"""The failure report as a person sees it: a real broken run, opened in headless Chromium.

A broken-on-purpose variant (at-least-once: outputs flushed before the offsets are
committed, and one processor killed right there) runs on the worker's cluster under killed and
paused processors, so the run has both anomalies and fault bands. The checkers judge it, the
report is written and loaded in Chromium; the test asserts what a reader must find, and leaves
``report.png`` in the run directory for a human to look at.

A second test needs no cluster: a synthetic 120k-op history, to show the report stays small and
readable (downsampled timeline) without losing the flagged op or the fault band.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from checkers.anomalies import describe
from harness.report import write_report
from harness.report.browser import check_page

MAX_REPORT_BYTES = 5 * 1024 * 1024


def broken_run(cluster: Any, store: Path, seed: int = 7) -> Path:
    """A ~15 s at-least-once run with processor kills and pauses, checked; its directory.

    Shared with the docs screenshot: ``docs/img/report-failure.png`` comes from such a run.
    """
    from checkers.cli import check_run_dir
    from harness.run.nemesis import ScheduledNemesis
    from harness.run.runner import RunOptions, execute
    from workloads.eos.config import EosOptions, Hook

    suffix = f"-report-{uuid.uuid4().hex[:6]}"
    options = RunOptions(
        workload_options=EosOptions(
            variant="at-least-once",
            hooks={0: Hook(at="after-flush", txn=2, action="kill")},
            name_suffix=suffix,
            seed=seed,
            values=3000,
            partitions=6,
            processors=3,
            find_hanging=False,
            drain_timeout_s=90.0,
            session_timeout_ms=6000,
        ),
        time_limit=16.0,
        seed=seed,
        nemesis="kill-processor,pause-processor",
        nemesis_interval=3.0,
        nemesis_duration=4.0,
    )
    run_dir = store / "report-browser" / suffix.lstrip("-")
    execute(cluster, options, run_dir, [ScheduledNemesis(options)])
    status = check_run_dir(run_dir)
    assert status == 1, f"the checkers did not find the broken variant invalid ({status})"
    return run_dir


@pytest.mark.cluster
def test_failure_report_in_chromium(kafka_cluster, harness_store) -> None:  # type: ignore[no-untyped-def]
    run_dir = broken_run(kafka_cluster, harness_store)
    report = write_report(run_dir)
    assert report.stat().st_size < MAX_REPORT_BYTES, f"{report}: {report.stat().st_size} bytes"

    page = check_page(
        report,
        run_dir / "report.png",
        selectors=[
            "#verdict.invalid",
            "#checkers tr.checker",
            "#anomalies details.example",
            "#anomalies p.anomaly-summary",
            "#journeys table.journey",
            "#journeys tr.fault",
            "img.fault-bands",
            "#faults tr.fault-row",
            "#files a",
        ],
    )
    assert page.errors == [], page.errors
    assert (run_dir / "report.png").stat().st_size > 10_000
    c = page.counts
    assert c["#verdict.invalid"] == 1, page.text[:400]
    assert c["#checkers tr.checker"] >= 2
    # The anomaly examples and the journeys of the values they name are on the page.
    assert c["#anomalies details.example"] >= 1
    assert "duplicate" in page.text
    # Each type found is explained by its one definition (checkers.anomalies).
    assert c["#anomalies p.anomaly-summary"] >= 1
    assert describe("duplicate", "duplicate") in page.text
    assert c["#journeys table.journey"] >= 1, "no journey of a flagged value"
    # Both figures show fault bands, and the faults are listed.
    assert c["img.fault-bands"] == 2
    assert c["#faults tr.fault-row"] >= 1
    assert "kill-processor" in page.text or "pause-processor" in page.text
    # The configuration and the way back to the run are there.
    assert "python -m harness run" in page.text and "--replay" in page.text
    assert "Kafka" in page.text and "history.jsonl" in page.text


def _synthetic_run(run_dir: Path, txns: int) -> str:
    """A run directory with a long eos-shaped history (3 processors, ``txns`` transactions
    each, a pause band) and a checker result flagging one value; returns that value."""
    import json

    run_dir.mkdir(parents=True)
    lines = [json.dumps({"history_format": 1, "kind": "merged", "meta": {}})]
    ops: list[tuple[int, Any, str, str, Any]] = []
    span_ns = 300 * 10**9
    for proc in range(3):
        for n in range(txns):
            t = (n * span_ns) // txns + proc * 1000
            v = f"v{proc}-{n:06d}"
            ops.append((t, proc, "invoke", "txn", {"txn": n, "inputs": [[proc, n, v]]}))
            out = {"txn": n, "outputs": [[proc, n, f"out-{v}", proc, n]]}
            ops.append((t + 5_000_000, proc, "ok", "txn", out))
    ops.append((60 * 10**9, "nemesis", "invoke", "start", {"kind": "pause-processor"}))
    start = {"kind": "pause-processor", "targets": [1], "why": "processor instance 1"}
    ops.append((60 * 10**9 + 1, "nemesis", "ok", "start", start))
    ops.append((90 * 10**9, "nemesis", "invoke", "stop", {"kind": "pause-processor"}))
    ops.append((90 * 10**9 + 1, "nemesis", "ok", "stop", {"kind": "pause-processor"}))
    ops.sort(key=lambda o: o[0])
    flagged = f"v1-{txns // 2:06d}"
    index_of = {}
    pindex: dict[Any, int] = {}
    for i, (t, proc, typ, f, value) in enumerate(ops):
        pindex[proc] = pindex.get(proc, -1) + 1
        op = {"index": i, "pindex": pindex[proc], "time": t, "process": proc}
        op |= {"wall": "2026-11-22T00:00:00Z"}
        op |= {"type": typ, "f": f, "value": value}
        if f == "txn" and value.get("inputs", [[0, 0, ""]])[0][2] == flagged:
            index_of[typ] = i
        lines.append(json.dumps(op))
    (run_dir / "history.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "config.json").write_text(json.dumps({"test_name": "synthetic", "seed": 1}))
    example = {"values": [flagged], "ops": [{"index": index_of["invoke"], "f": "txn"}]}
    results = {
        "valid": False,
        "checkers": {"duplicate": {"valid": False, "count": 1, "examples": [example]}},
    }
    (run_dir / "results.json").write_text(json.dumps(results))
    return flagged


def test_report_of_a_long_history_stays_small_and_keeps_flagged_ops(tmp_path: Path) -> None:
    """120k ops: the timeline is downsampled, the report stays small, the flagged value's
    journey and the fault band are still there."""
    run_dir = tmp_path / "run"
    flagged = _synthetic_run(run_dir, txns=20_000)
    report = write_report(run_dir)
    assert report.stat().st_size < MAX_REPORT_BYTES
    page = check_page(
        report,
        tmp_path / "report.png",
        height=3000,
        selectors=["#journeys table.journey", "img.fault-bands", "#faults tr.fault-row"],
    )
    assert page.errors == []
    assert "120004 ops" in page.text
    assert page.counts == {
        "#journeys table.journey": 1,
        "img.fault-bands": 2,
        "#faults tr.fault-row": 1,
    }
    assert flagged in page.text and "pause-processor" in page.text


def test_a_page_check_leaves_nothing_in_the_temp_dir(tmp_path: Path, monkeypatch: Any) -> None:
    """Chromium leaves a directory of its own in TMPDIR after every run; the check gives it
    one and removes it, so a day of report checks leaves no trail in /tmp."""
    import shutil
    import tempfile

    # Short: Chromium puts a Unix socket there, whose path may not exceed 107 bytes.
    scratch = Path(tempfile.mkdtemp(prefix="khb-"))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("TMPDIR", str(scratch))  # where Chromium would leave its own
    try:
        page = tmp_path / "page.html"
        page.write_text('<html><body><h1 id="x">a page</h1></body></html>')
        got = check_page(page, tmp_path / "page.png", selectors=["#x"])
        assert got.counts == {"#x": 1} and not got.errors
        assert list(scratch.iterdir()) == []
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
