"""What a matrix run leaves behind: ``matrix.json``, ``junit.xml`` and ``matrix.html``.

Why three files: ``matrix.json`` is the record trends are computed from (self-contained, so a
CI cache may keep only it); ``junit.xml`` is what CI systems display (one testcase per cell,
its failure naming the anomaly types and the report); ``matrix.html`` is for a human, a
versions x scenarios table linking every cell's own report.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from harness.kafka.versions import sort_versions

TEMPLATES = Path(__file__).resolve().parents[1] / "report" / "templates"
MATRIX_FORMAT = 1


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace ``path`` in one rename so a reader (or a killed run) never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def totals(cells: list[dict[str, Any]]) -> dict[str, int]:
    out = {"cells": len(cells), "pass": 0, "fail": 0, "error": 0}
    for c in cells:
        out[c["outcome"]] = out.get(c["outcome"], 0) + 1
    return out


def junit_xml(matrix: dict[str, Any]) -> str:
    """One testsuite, one testcase per cell (classname = Kafka version, name = scenario)."""
    cells = matrix["cells"]
    t = totals(cells)
    suite = ET.Element(
        "testsuite",
        name="kafka-eos-matrix",
        tests=str(t["cells"]),
        failures=str(t["fail"]),
        errors=str(t["error"]),
        time=f"{matrix.get('wall_s') or 0:.1f}",
        timestamp=str(matrix.get("started", "")),
    )
    for c in cells:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"kafka-{c['version']}",
            name=c["scenario"],
            time=f"{c.get('wall_s') or 0:.1f}",
        )
        if c["outcome"] == "fail":
            types = ", ".join(sorted(c["anomalies"])) or "no anomalies"
            el = ET.SubElement(case, "failure", message=c["message"], type=types)
            el.text = json.dumps(c["anomalies"])
        elif c["outcome"] == "error":
            ET.SubElement(case, "error", message=c["message"], type=c["verdict_source"])
        out = ET.SubElement(case, "system-out")
        out.text = f"report: {c.get('report') or c.get('run_dir')}\nlog: {c.get('log')}"
    ET.indent(suite)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    )


def grid(matrix: dict[str, Any]) -> tuple[list[str], list[str], dict[tuple[str, str], Any]]:
    """Rows (scenarios in run order), columns (versions, newest first), cell by (row, col)."""
    cells = matrix["cells"]
    versions = sort_versions(list(dict.fromkeys(c["version"] for c in cells)))
    scenarios = list(dict.fromkeys(c["scenario"] for c in cells))
    return scenarios, versions, {(c["scenario"], c["version"]): c for c in cells}


def matrix_html(matrix: dict[str, Any], out_dir: Path) -> str:
    scenarios, versions, by_key = grid(matrix)
    links = {
        c["id"]: os.path.relpath(c["report"], out_dir) if c.get("report") else None
        for c in matrix["cells"]
    }
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape())
    return env.get_template("matrix.html.j2").render(
        m=matrix,
        totals=totals(matrix["cells"]),
        scenarios=scenarios,
        versions=versions,
        by_key=by_key,
        links=links,
    )


def write_outputs(matrix: dict[str, Any], out_dir: Path, junit: Path | None = None) -> None:
    """Write the three files (``junit`` also to an extra path when asked)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    matrix["totals"] = totals(matrix["cells"])
    write_json_atomic(out_dir / "matrix.json", matrix)
    xml = junit_xml(matrix)
    (out_dir / "junit.xml").write_text(xml)
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_text(xml)
    (out_dir / "matrix.html").write_text(matrix_html(matrix, out_dir))
