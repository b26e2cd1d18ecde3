"""Small helpers for the files a store holds: reading a run's JSON files and making a new,
uniquely named directory for a run (or a matrix) in it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from common.errors import HarnessError


def read_json_dict(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when the file is missing, unreadable, not JSON or
    not an object (a run that died leaves such files behind)."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def new_unique_dir(base: Path, name: str, what: str = "directory") -> Path:
    """Create and return ``base/<name>``, or ``base/<name>-1``, ``-2``, ... when that is taken
    (two runs started within one second share a timestamp ``name``). ``what`` names the
    directory in the error raised when no free name is found."""
    for n in range(100):
        path = base / (name if n == 0 else f"{name}-{n}")
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path
    raise HarnessError(f"cannot create a {what} under {base}")
