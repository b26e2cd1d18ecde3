"""How long a user waits for a run's verdict once its load is over, on Spark and on the reference.

    .venv/bin/python bench/verdict_latency.py [--time-limit 60] [--seed 3] [--store DIR]
        [--run-dir DIR] [--json FILE]

Runs the README's main job (``python -m harness run --workload eos --nemesis all``) once, then
reads from that one run:

* the **verdict latency of the run**: from the end of the final drain (the wall time of the
  history's last op) to the verdict (``timeline.json``'s ``judged``). It includes stopping the
  cluster and dumping its logs, and, inside the run, Spark warmed up during the load and the
  history converted while the logs were dumped (:mod:`checkers.warm`, :mod:`checkers.judge`);
  a run under ``checkers.judge.PYTHON_MAX_BYTES`` is judged on the Python engines there, so
  for it this is the Python figure with the harness's own wait (the results' ``engines``);
* the **verdict latency on the Python reference**: the same wait for the logs, plus the eos and
  broker-log reference checks (:mod:`checkers.eos.pyref`, :mod:`checkers.logs.pyref`) of the
  stored run, timed in a fresh interpreter;
* for comparison, a **cold re-check on Spark** (``python -m checkers RUN_DIR --engine spark``
  in a fresh interpreter, the Parquet caches removed): what every run paid before the warm-up;
* the run's whole wall time against its time limit, and where it went (``timeline.json``).

``--run-dir`` measures an existing run instead of starting one (latency figures need a run made
by this version, which writes ``timeline.json``). Timings on a 2-core machine are noisy: the
load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mainjob import ROOT, run_main_job, timed, timeline, wall

_REFERENCE = """
import json, sys, time
from checkers.eos.pyref import check_eos_py
from checkers.logs.pyref import check_logdump
t0 = time.monotonic()
eos = check_eos_py(sys.argv[1])
log = check_logdump(sys.argv[1] + "/evidence/logdump.jsonl")
print(json.dumps({"seconds": time.monotonic() - t0, "valid": eos["valid"] is True
    and log["valid"] is True}))
"""


def _last_op_wall(history: Path) -> float:
    with open(history, "rb") as fh:
        fh.seek(max(0, history.stat().st_size - (1 << 20)))
        last = fh.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return wall(json.loads(last)["wall"])


def _run(args: argparse.Namespace) -> tuple[Path, float]:
    run_dir, seconds, proc = run_main_job(
        Path(args.store), time_limit=args.time_limit, seed=args.seed
    )
    if proc.returncode not in (0, 1):
        sys.exit(f"the run could not be judged (exit {proc.returncode}): {proc.stderr[-400:]}")
    return run_dir, seconds


def measure(run_dir: Path, run_wall: float | None, time_limit: float | None) -> dict[str, Any]:
    phases = timeline(run_dir)
    drained = _last_op_wall(run_dir / "history.jsonl")
    logs_ready = phases["checking"]
    out: dict[str, Any] = {
        "run_dir": str(run_dir),
        "verdict": json.loads((run_dir / "results.json").read_text())["valid"],
        "phases_s": {
            "cluster start": phases["running"] - phases["starting the cluster"],
            "load, drain and final reads": drained - phases["running"],
            "stop and log dump (from the drain's end)": logs_ready - drained,
            "checks after the dump": phases["judged"] - logs_ready,
        },
        "spark_latency_s": phases["judged"] - drained,
        "load": os.getloadavg()[0],
    }
    if run_wall is not None:
        out["run_wall_s"] = run_wall
        out["time_limit_s"] = time_limit
    ref_s, proc = timed([sys.executable, "-c", _REFERENCE, str(run_dir)])
    if proc.returncode != 0:
        sys.exit(f"the reference failed: {proc.stderr.strip()[-400:]}")
    ref = json.loads(proc.stdout.strip().splitlines()[-1])
    out["reference_check_s"] = ref["seconds"]
    out["reference_process_s"] = ref_s
    out["reference_latency_s"] = (logs_ready - drained) + ref_s
    out["reference_verdict"] = ref["valid"]
    cold_dir = run_dir.parent / f".{run_dir.name}-cold"
    shutil.rmtree(cold_dir, ignore_errors=True)
    shutil.copytree(run_dir, cold_dir, ignore=shutil.ignore_patterns(".parquet", "results.json"))
    try:
        cold_s, proc = timed([sys.executable, "-m", "checkers", str(cold_dir), "--engine", "spark"])
    finally:
        shutil.rmtree(cold_dir, ignore_errors=True)
    out["cold_spark_check_s"] = cold_s
    out["cold_spark_latency_s"] = (logs_ready - drained) + cold_s
    return out


def _print(m: dict[str, Any]) -> None:
    print(f"run: {m['run_dir']} (verdict {m['verdict']}, load {m['load']:.2f})")
    if "run_wall_s" in m:
        print(
            f"  whole run          {m['run_wall_s']:6.1f} s  "
            f"(time limit {m['time_limit_s']:.0f} s: "
            f"limit + {m['run_wall_s'] - m['time_limit_s']:.1f} s)"
        )
    for name, s in m["phases_s"].items():
        print(f"    {name:42s} {s:6.1f} s")
    print(f"  verdict latency, Spark (warm, prepared)   {m['spark_latency_s']:6.1f} s")
    print(
        f"  verdict latency, Python reference         {m['reference_latency_s']:6.1f} s  "
        f"(checks {m['reference_check_s']:.1f} s, interpreter {m['reference_process_s']:.1f} s)"
    )
    print(
        f"  verdict latency, Spark cold re-check      {m['cold_spark_latency_s']:6.1f} s  "
        f"(python -m checkers RUN_DIR: {m['cold_spark_check_s']:.1f} s)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--store", default=str(ROOT / "store" / "bench-verdict"))
    ap.add_argument("--run-dir", default=None, help="measure this stored run instead")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the figures here")
    args = ap.parse_args(argv)
    if args.run_dir:
        m = measure(Path(args.run_dir).resolve(), None, None)
    else:
        run_dir, wall = _run(args)
        m = measure(run_dir, wall, args.time_limit)
    _print(m)
    if args.json:
        Path(args.json).write_text(json.dumps(m, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
