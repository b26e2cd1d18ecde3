"""``python -m harness serve`` / ``index``: the runs index over a store, and its links.

The store is made of small run directories shaped like real ones (config, results, summary,
report): a failed run checked by the checkers, a passed one, an unfinished run with nothing but
its config, and the ``latest`` symlink a real store has.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.report.serve import find_runs, make_server, write_index


def _run(store: Path, rel: str, config: dict, **files: object) -> Path:
    run_dir = store / rel
    (run_dir / "processes").mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config))
    for name, content in files.items():
        path = run_dir / name.replace("_", ".")
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return run_dir


@pytest.fixture
def store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    failed = _run(
        store,
        "eos-at-least-once-kill-processor/20261122T010000",
        {
            "test_name": "eos-at-least-once-kill-processor",
            "kafka_version": "4.3.1",
            "kafka_version_resolved": "4.3.1",
            "written_wall": "2026-11-22T01:00:00Z",
        },
        results_json={
            "valid": False,
            "anomalies": {},
            "checkers": {
                "duplicate": {"valid": False, "count": 7, "examples": []},
                "lost": {"valid": True, "count": 0, "examples": []},
                "epoch_violation": {"valid": True, "anomalies": {"duplicate-marker": 2}},
            },
        },
        summary_json={"summary": {"duplicates": 7, "missing": 0}},
        report_html="<html><body><h1 id='verdict'>INVALID report</h1></body></html>",
    )
    _run(
        store,
        "eos/20261122T020000",
        {"test_name": "eos", "kafka_version": "3.9.1", "written_wall": "2026-11-22T02:00:00Z"},
        results_json={"valid": True, "anomalies": {}, "checkers": {}},
        summary_json={"summary": {"duplicates": 0, "missing": 0}},
        report_html="<html><body>valid report</body></html>",
    )
    _run(
        store,
        "pytest/session-1/scenarios/partition-abc123",
        {"test_name": "eos-partition", "written_wall": "2026-11-22T03:00:00Z"},
    )
    (store / "latest").symlink_to(failed.relative_to(store))
    return store


class _Rows(HTMLParser):
    """The index table's rows: verdict, path and links of each."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, object]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and a.get("class") == "run":
            self.rows.append({"verdict": a["data-verdict"], "path": a["data-path"], "links": {}})
        elif tag == "a" and self.rows:
            self.rows[-1]["links"][a.get("class")] = a["href"]  # type: ignore[index]


@pytest.fixture
def server(store: Path) -> Iterator[str]:
    srv = make_server(store, "127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/"
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)
        assert not thread.is_alive()


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it (in-process, pytest's captured stdio has no file number)."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _get(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()


def test_index_lists_every_run_once_newest_first(store: Path) -> None:
    rows = find_runs(store)
    assert [r.path for r in rows] == [
        "pytest/session-1/scenarios/partition-abc123",
        "eos/20261122T020000",
        "eos-at-least-once-kill-processor/20261122T010000",
    ]
    unfinished, passed, failed = rows
    assert (unfinished.verdict_text, unfinished.report, unfinished.anomalies) == (
        "no verdict",
        None,
        {},
    )
    assert passed.verdict == "valid" and passed.kafka_version == "3.9.1"
    assert failed.verdict == "invalid" and failed.verdict_text == "INVALID"
    assert failed.anomalies == {"duplicate": 7, "duplicate-marker": 2}


def test_served_index_links_to_reports_and_files(server: str, store: Path) -> None:
    status, ctype, html = _get(server)
    assert status == 200 and ctype.startswith("text/html")
    parser = _Rows()
    parser.feed(html)
    by_path = {r["path"]: r for r in parser.rows}
    assert len(parser.rows) == 3, html
    failed = by_path["eos-at-least-once-kill-processor/20261122T010000"]
    assert failed["verdict"] == "invalid"
    assert by_path["eos/20261122T020000"]["verdict"] == "valid"
    assert by_path["pytest/session-1/scenarios/partition-abc123"]["verdict"] == "none"
    assert "no verdict" in html and "duplicate: 7" in html and "4.3.1" in html
    assert "report" not in by_path["pytest/session-1/scenarios/partition-abc123"]["links"]

    # Follow the report link, and fetch a file the report would link to.
    report_url = server + failed["links"]["report"]  # type: ignore[index]
    status, _, report = _get(report_url)
    assert status == 200 and "INVALID report" in report
    status, ctype, results = _get(report_url.replace("report.html", "results.json"))
    assert status == 200 and json.loads(results)["valid"] is False

    # A run that finishes while the server is up appears on the next request.
    (store / "pytest/session-1/scenarios/partition-abc123/results.json").write_text(
        json.dumps({"valid": True, "anomalies": {}, "checkers": {}})
    )
    assert "no verdict" not in _get(server)[2]


def test_a_drain_tally_alone_is_no_verdict(tmp_path: Path) -> None:
    """The drain counts are printed beside the checkers' verdict, never instead of it: a run
    not checked yet has no verdict and no anomalies, whatever its summary.json counts."""
    store = tmp_path / "store"
    _run(
        store,
        "eos/20261122T040000",
        {"test_name": "eos", "written_wall": "2026-11-22T04:00:00Z"},
        summary_json={"summary": {"duplicates": 3, "missing": 1}, "drained": True},
    )
    (row,) = find_runs(store)
    assert (row.verdict, row.verdict_text, row.anomalies) == ("none", "no verdict", {})


def test_index_command_writes_a_static_page(store: Path) -> None:
    proc = _harness("index", "--store", str(store))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(store / "index.html")
    page = (store / "index.html").read_text()
    assert 'href="eos-at-least-once-kill-processor/20261122T010000/report.html"' in page
    assert write_index(store) == store / "index.html"


@pytest.mark.parametrize("command", ["serve", "index"])
def test_bad_store_is_one_line_exit_2(tmp_path: Path, command: str) -> None:
    proc = _harness(command, "--store", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no store directory" in proc.stderr, proc.stderr


def test_port_in_use_is_one_line_exit_2(server: str, store: Path) -> None:
    port = server.rsplit(":", 1)[1].strip("/")
    proc = _harness("serve", "--store", str(store), "--port", port)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: cannot listen on 127.0.0.1:"), proc.stderr
    assert proc.stderr.count("\n") == 1
