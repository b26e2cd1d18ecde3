"""Real runs kept small under ``tests/data`` (a finding's history, its config, and where the
finding needs it the log dump): unpacked into a run directory, and their report pages."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any


def unpack(data: Path, into: Path) -> Path:
    """``data``'s config, history and (if kept) log dump as the run directory ``into``."""
    into.mkdir(parents=True)
    shutil.copy(data / "config.json", into / "config.json")
    for name, dest in (("history", "history.jsonl"), ("logdump", "evidence/logdump.jsonl")):
        packed = data / f"{name}.jsonl.gz"
        if packed.is_file():
            (into / dest).parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(packed, "rb") as src:
                (into / dest).write_bytes(src.read())
    return into


def report_page(run: Path, config: dict[str, Any], result: dict[str, Any]) -> str:
    """The report page of a run directory ``run`` holding only ``config`` and ``result``."""
    from harness.report import write_report

    run.mkdir(exist_ok=True)
    (run / "config.json").write_text(json.dumps(config))
    (run / "results.json").write_text(json.dumps(result))
    return write_report(run).read_text()
