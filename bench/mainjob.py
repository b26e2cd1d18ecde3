"""What the benchmarks of the main job share: running it, timing a command, reading a run's clock.

The main job is the README's ``python -m harness run --workload eos --nemesis all``;
``bench/verdict_latency.py`` and ``bench/phases.py`` both run it in a fresh interpreter (as a
user would) and read what it left in its run directory. Not a package module: the scripts put
``bench/`` on ``sys.path`` and import it by name.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The first line ``python -m harness run`` prints: where its run directory is.
_RUN_LINE = re.compile(r"^run: (?P<dir>.+) \(seed -?\d+\)$", re.M)


def wall(text: str) -> float:
    """A history or timeline ``wall`` field (UTC, ``Z``) as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def timeline(run_dir: Path) -> dict[str, float]:
    """When each phase of the run began (``timeline.json``'s phases, without the marks)."""
    data = json.loads((run_dir / "timeline.json").read_text())
    return {p["phase"]: wall(p["wall"]) for p in data["phases"]}


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run ``cmd`` from the project's root; its wall seconds and its outcome."""
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    return time.monotonic() - t0, proc


def run_main_job(
    store: Path,
    *,
    time_limit: float,
    seed: int,
    workload: str = "eos",
    nemesis: str = "all",
) -> tuple[Path, float, subprocess.CompletedProcess[str]]:
    """One run in a fresh interpreter: its run directory, the command's wall seconds (the
    interpreter's start and exit included: what a user waits) and its outcome. Exits the
    script if the run made no run directory."""
    cmd = [sys.executable, "-m", "harness", "run", "--workload", workload, "--nemesis", nemesis]
    cmd += ["--time-limit", str(time_limit), "--seed", str(seed), "--store", str(store)]
    print("running:", " ".join(cmd[1:]), flush=True)
    seconds, proc = timed(cmd)
    found = _RUN_LINE.search(proc.stdout)
    if found is None:
        sys.exit(f"the run made no run directory (exit {proc.returncode}): {proc.stderr[-400:]}")
    return Path(found["dir"]), seconds, proc
