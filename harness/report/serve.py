"""Browse a store of runs: ``python -m harness serve`` and ``python -m harness index``.

A store holds one directory per run (``config.json`` marks it; ``results.json``,
``summary.json`` and ``report.html`` appear as the run finishes). The index page lists every
run, newest first, with its Kafka version, verdict and anomaly counts, and links to its report.
``serve`` renders the index afresh on each request (a run that finishes while the server is
up shows up on reload) and serves the store's files, so the links inside reports (history,
results, broker logs, log dumps) work. ``index`` writes the same page to ``STORE/index.html``
for browsing from disk or publishing the store as static files.

Only the standard library's HTTP server is used: this is a local tool for one reader, bound to
127.0.0.1 by default.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from checkers.anomalies import found
from common.errors import HarnessError
from harness.storefiles import read_json_dict

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: Directories a run keeps its own files in: never searched for further runs.
_RUN_SUBDIRS = {"processes", "logs", "nodes", "evidence"}


@dataclass
class RunRow:
    """One line of the index."""

    path: str  # relative to the store, with forward slashes
    name: str
    time: str
    kafka_version: str
    verdict: str  # "valid", "invalid", "unknown" or "none"
    verdict_text: str
    anomalies: dict[str, int] = field(default_factory=dict)
    report: str | None = None  # link relative to the store


def anomaly_counts(results: dict[str, Any]) -> dict[str, int]:
    """Anomaly type -> count over every checker (some report a ``count``, the others an
    ``anomalies`` map), zero counts left out."""
    counts: dict[str, int] = {}
    for _, kind, n in found(results):
        counts[kind] = max(counts.get(kind, 0), n)
    return dict(sorted(counts.items()))


def _verdict(results: dict[str, Any] | None) -> tuple[str, str]:
    """The checkers' verdict; without ``results.json`` there is none (the drain tally in
    ``summary.json`` is counts, not a verdict)."""
    if results is not None:
        valid = results.get("valid")
        if valid is True:
            return "valid", "valid"
        if valid is False:
            return "invalid", "INVALID"
        return "unknown", "unknown"
    return "none", "no verdict"


def read_run(store: Path, run_dir: Path) -> RunRow:
    """The index row of one run directory; missing files mean an unfinished run, not an error."""
    config = read_json_dict(run_dir / "config.json") or {}
    results = read_json_dict(run_dir / "results.json")
    rel = run_dir.relative_to(store).as_posix()
    verdict, text = _verdict(results)
    anomalies = anomaly_counts(results) if results is not None else {}
    when = config.get("written_wall")
    if not when:
        stamp = os.path.getmtime(run_dir / "config.json")
        when = _iso(stamp)
    return RunRow(
        path=rel,
        name=str(config.get("test_name") or run_dir.parent.name),
        time=str(when),
        kafka_version=str(
            config.get("kafka_version_resolved")
            or config.get("kafka_version")
            or (config.get("options") or {}).get("kafka_version")  # a run stored before the
            or "?"  # workload registry kept its options under "options"
        ),
        verdict=verdict,
        verdict_text=text,
        anomalies=anomalies,
        report=f"{rel}/report.html" if (run_dir / "report.html").is_file() else None,
    )


def _iso(stamp: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def find_runs(store: Path) -> list[RunRow]:
    """Every run directory under ``store``, newest first. Symlinks (``latest``) are not
    followed, so each run is listed once."""
    store = Path(store)
    rows = []
    for dirpath, dirnames, filenames in os.walk(store, followlinks=False):
        if "config.json" in filenames:
            rows.append(read_run(store, Path(dirpath)))
            dirnames.clear()  # a run's own subdirectories hold no runs
            continue
        dirnames[:] = sorted(d for d in dirnames if d not in _RUN_SUBDIRS)
    rows.sort(key=lambda r: (r.time, r.path), reverse=True)
    return rows


def render_index(store: Path) -> str:
    """The index page of ``store`` (links relative to the store's root)."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape())
    runs = find_runs(store)
    counts = {v: sum(1 for r in runs if r.verdict == v) for v in ("valid", "invalid", "none")}
    return env.get_template("index.html.j2").render(
        store=str(Path(store).resolve()), runs=runs, counts=counts
    )


def check_store(store: Path | str) -> Path:
    store = Path(store)
    if not store.is_dir():
        raise HarnessError(f"no store directory at {store}")
    return store


def write_index(store: Path | str) -> Path:
    """Write ``STORE/index.html`` and return its path."""
    store = check_store(store)
    out = store / "index.html"
    out.write_text(render_index(store))
    return out


class StoreHandler(SimpleHTTPRequestHandler):
    """Static files of the store, except ``/`` and ``/index.html``: the live index."""

    extensions_map = {  # noqa: RUF012 - the base class declares it as a class attribute
        **SimpleHTTPRequestHandler.extensions_map,
        ".jsonl": "text/plain; charset=utf-8",
        ".log": "text/plain; charset=utf-8",
        ".properties": "text/plain; charset=utf-8",
        ".json": "application/json",
    }

    def __init__(self, *args: Any, store: Path, quiet: bool = False, **kwargs: Any) -> None:
        self.store = store
        self.quiet = quiet
        super().__init__(*args, directory=str(store), **kwargs)

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] in ("/", "/index.html"):
            body = render_index(self.store).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        if not self.quiet:
            super().log_message(format, *args)


def make_server(
    store: Path | str, host: str = "127.0.0.1", port: int = 8000, *, quiet: bool = False
) -> ThreadingHTTPServer:
    """A server for ``store`` bound to ``host:port`` (port 0: a free one; see
    ``server.server_address``). Call ``serve_forever()``; ``shutdown()`` stops it."""
    store = check_store(store).resolve()
    handler = partial(StoreHandler, store=store, quiet=quiet)
    try:
        return ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        raise HarnessError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default="store", metavar="DIR")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--host", default="127.0.0.1")


def serve_command(args: argparse.Namespace) -> int:
    """``python -m harness serve``: serve until Ctrl-C."""
    server = make_server(args.store, args.host, args.port)
    host, port = server.server_address[:2]
    print(f"serving {Path(args.store).resolve()} at http://{host}:{port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0


def index_command(args: argparse.Namespace) -> int:
    """``python -m harness index``: write ``STORE/index.html``."""
    print(write_index(args.store))
    return 0
