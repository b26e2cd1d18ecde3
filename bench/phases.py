"""Where the main job's time goes, phase by phase, over several runs.

    .venv/bin/python bench/phases.py [--runs 3] [--time-limit 60] [--nemesis all]
        [--workload eos] [--seed 1] [--store DIR] [--json FILE]
    .venv/bin/python bench/phases.py --run-dir DIR [DIR ...] [--json FILE]

Runs the README's main job (``python -m harness run --workload eos --nemesis all``) ``--runs``
times, one after the other, with seeds ``--seed``, ``--seed`` + 1, ..., each in a fresh
interpreter as a user would, and reads each run's ``summary.json`` ``phases`` (the seconds of
each phase, written by the run itself; docs/reading-reports.md names them): the cluster's
start, the workload's setup, the load under faults, the heal, the drain, the final reads,
stopping the cluster and dumping its logs, the checks (and each checker suite on its own), and
drawing the report. It prints one table: per phase, in how many runs it appeared and its
minimum, median and maximum seconds; then the whole run's wall time, the time limit and how far
the run went over it. ``--run-dir`` reads stored runs instead of making new ones.

What the figures mean. The phases follow one another, so together they are the run, less the
interpreter's start and exit; the ``check:`` rows are the checker suites, which run side by
side, so each overlaps the others and lies inside ``checks``. A phase a run did not have (no
drain in a queue run, no report when the run was not drawn) is left out of that run's figures,
never counted as 0: the runs column says how many runs a row is made of. The whole run is the
command's wall time, interpreter included; for ``--run-dir`` it is the timeline's span from the
cluster's start to the verdict, plus the report. Timings on a 2-core machine are noisy, so the
machine's load average (1, 5 and 15 minutes) is printed under the table and kept per run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mainjob import run_main_job, timeline

#: Rows that are not phases of ``summary.json``: what the whole run took against its limit.
WHOLE, LIMIT, OVER = "whole run", "time limit", "over the time limit"


def read_run(run_dir: Path, whole_s: float | None = None) -> dict[str, Any]:
    """One run's figures: its phases (``summary.json``), its time limit (``config.json``) and
    its whole wall time (``whole_s``, measured by the caller, or else from its timeline)."""
    if not (run_dir / "summary.json").is_file():
        sys.exit(f"{run_dir}: no summary.json (the run failed before its end: see its logs)")
    summary = json.loads((run_dir / "summary.json").read_text())
    phases: dict[str, float] = summary.get("phases") or {}
    if not phases:
        sys.exit(f"{run_dir}: summary.json has no phases (a run of an older version?)")
    config = json.loads((run_dir / "config.json").read_text())
    if whole_s is None:
        moments = timeline(run_dir).values()
        whole_s = max(moments) - min(moments) + phases.get("report", 0.0)
    return {
        "run_dir": str(run_dir),
        "phases": phases,
        "whole_s": round(whole_s, 3),
        "time_limit_s": float(config["time_limit"]),
    }


def aggregate(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per row, over the runs that have it: how many runs, min, median, max. Phases come in
    the order the runs had them (a phase only some runs had goes where it first appeared),
    then the whole run, the time limit and the time over it."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for name, seconds in run["phases"].items():
            values.setdefault(name, []).append(seconds)
    for run in runs:
        values.setdefault(WHOLE, []).append(run["whole_s"])
        values.setdefault(LIMIT, []).append(run["time_limit_s"])
        values.setdefault(OVER, []).append(run["whole_s"] - run["time_limit_s"])
    return {
        name: {
            "runs": len(xs),
            "min": round(min(xs), 3),
            "median": round(statistics.median(xs), 3),
            "max": round(max(xs), 3),
        }
        for name, xs in values.items()
    }


def figures_table(figures: dict[str, dict[str, float]], load: tuple[float, ...]) -> Table:
    """The printed table: one row per phase, then the whole run against its limit."""
    table = Table(
        title="where the run's time went (seconds)",
        title_justify="left",
        caption="load average " + " / ".join(f"{x:.2f}" for x in load) + " (1, 5, 15 min)",
        caption_justify="left",
    )
    table.add_column("phase")
    for column in ("runs", "min", "median", "max"):
        table.add_column(column, justify="right")
    names = list(figures)
    last_phase = names[names.index(WHOLE) - 1] if WHOLE in names else None
    for name, f in figures.items():
        row = (str(f["runs"]), *(f"{f[k]:.1f}" for k in ("min", "median", "max")))
        table.add_row(name, *row, end_section=name == last_phase)  # a line above the whole run
    return table


def _make_runs(args: argparse.Namespace) -> list[dict[str, Any]]:
    store = Path(args.store or tempfile.mkdtemp(prefix="bench-phases-"))
    print(f"store: {store}", flush=True)
    runs = []
    for k in range(args.runs):
        run_dir, seconds, proc = run_main_job(
            store,
            time_limit=args.time_limit,
            seed=args.seed + k,
            workload=args.workload,
            nemesis=args.nemesis,
        )
        run = read_run(run_dir, seconds)
        run.update(seed=args.seed + k, exit=proc.returncode, load=os.getloadavg()[0])
        print(f"  {run_dir} (exit {proc.returncode}, {seconds:.0f} s)", flush=True)
        runs.append(run)
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="how many runs of the main job")
    ap.add_argument("--time-limit", type=float, default=60, metavar="S")
    ap.add_argument("--nemesis", default="all")
    ap.add_argument("--workload", default="eos")
    ap.add_argument("--seed", type=int, default=1, help="the first run's seed (then +1 each)")
    ap.add_argument("--store", default=None, metavar="DIR", help="default: a new temp dir")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the figures here")
    ap.add_argument(
        "--run-dir", nargs="+", default=None, metavar="DIR", help="read these stored runs"
    )
    args = ap.parse_args(argv)
    stored = [read_run(Path(d).resolve()) for d in args.run_dir or ()]
    runs = stored or _make_runs(args)
    figures = aggregate(runs)
    load = os.getloadavg()
    Console(highlight=False).print(figures_table(figures, load))
    if args.json:
        out = {"figures": figures, "runs": runs, "load_average": list(load)}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
