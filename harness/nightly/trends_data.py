"""Loading stored matrix runs, and what earlier runs have already shown (no Spark here).

Why apart from :mod:`harness.nightly.trends`: the matrix needs one fact from the history of earlier
runs -- which safety anomaly types each version+scenario has already shown -- to decide
whether tonight's are new, and it must not pay for a Spark JVM to learn that. Trends (on
Spark) and the matrix read the same stored ``matrix.json`` files through :func:`matrix_files`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any


def matrix_root(store: Path) -> Path:
    return Path(store) / "matrix"


def matrix_files(store: Path, exclude: Path | None = None) -> list[Path]:
    """Every stored ``matrix.json`` (oldest first by directory name, a UTC timestamp)."""
    root = matrix_root(store)
    if not root.is_dir():
        return []
    skip = exclude.resolve() if exclude is not None else None
    return [
        p for p in sorted(root.glob("*/matrix.json")) if skip is None or p.parent.resolve() != skip
    ]


def load_matrix(path: Path) -> dict[str, Any] | None:
    """A stored matrix, or None if it is unreadable (a killed run may leave none)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("cells"), list) else None


def seen_safety_types(store: Path, exclude: Path | None = None) -> dict[tuple[str, str], set[str]]:
    """(version, scenario) -> safety anomaly types any earlier matrix run reported for it."""
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in matrix_files(store, exclude):
        m = load_matrix(path)
        for c in (m or {}).get("cells", []):
            seen[(c["version"], c["scenario"])].update(c.get("safety_anomaly_types") or [])
    return dict(seen)


def new_safety_anomalies(
    cells: list[dict[str, Any]], seen: dict[tuple[str, str], set[str]]
) -> list[dict[str, Any]]:
    """Safety anomaly types of cells expected valid that no earlier run showed for the same
    version and scenario. Broken-on-purpose cells are excluded: their anomalies are the point."""
    out = []
    for c in cells:
        if c["expected"] != "valid":
            continue
        new = sorted(
            set(c.get("safety_anomaly_types") or [])
            - seen.get((c["version"], c["scenario"]), set())
        )
        if new:
            out.append(
                {"version": c["version"], "scenario": c["scenario"], "types": new, "cell": c["id"]}
            )
    return out
