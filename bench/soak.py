"""An hour-long run, watched: does the harness's memory stay flat, and how long does the
verdict take at the end?

Starts ``python -m harness run`` (by default ``--workload eos --nemesis all --time-limit
3600`` on the process backend) and every minute records the harness process's RSS, the Spark
JVM's RSS (the judge's session, started while the run goes), the harness's open files, and
the run directory's size. At the end: the verdict, and the time from the end of the load to
the verdict, and from the start of the checks to it (``timeline.json``). Prints one line per
sample and a summary, and writes ``soak.json`` into the run directory.

    .venv/bin/python bench/soak.py [--time-limit 3600] [--every 60] [-- extra run args...]
    .venv/bin/python bench/soak.py -- --client java
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def open_files(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """Every descendant of ``pid``."""
    by_parent: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        by_parent.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for c in by_parent.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def spark_jvm(pid: int) -> int | None:
    """The harness's Spark JVM (pyspark's gateway: a SparkSubmit child)."""
    for c in children(pid):
        try:
            cmd = Path(f"/proc/{c}/cmdline").read_bytes()
        except OSError:
            continue
        if b"org.apache.spark.deploy.SparkSubmit" in cmd:
            return c
    return None


def du_mib(path: Path) -> float:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return round(total / 2**20, 1)


def wall(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time-limit", type=float, default=3600.0)
    p.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    p.add_argument("--store", default="store/soak")
    p.add_argument("extra", nargs="*", help="more `harness run` arguments (after --)")
    args = p.parse_args()
    store = Path(args.store).resolve()
    cmd = [
        sys.executable, "-m", "harness", "run", "--workload", "eos", "--nemesis", "all",
        "--time-limit", str(args.time_limit), "--store", str(store), *args.extra,
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    run_dir: Path | None = None
    samples: list[dict[str, Any]] = []
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    buf = b""
    next_sample = t0 + args.every
    while proc.poll() is None:
        chunk = proc.stdout.read() or b""
        buf += chunk
        if run_dir is None:
            for line in buf.decode(errors="replace").splitlines():
                if line.startswith("run: ") and "(seed" in line:
                    run_dir = Path(line[5:].split(" (seed")[0])
        now = time.monotonic()
        if now >= next_sample:
            next_sample += args.every
            spark = spark_jvm(proc.pid)
            sample = {
                "minute": round((now - t0) / 60, 1),
                "harness_rss_mib": rss_mib(proc.pid),
                "spark_rss_mib": rss_mib(spark) if spark else None,
                "open_files": open_files(proc.pid),
                "run_dir_mib": du_mib(run_dir) if run_dir else None,
            }
            samples.append(sample)
            print(json.dumps(sample), flush=True)
        time.sleep(1.0)
    buf += proc.stdout.read() or b""
    tail = buf.decode(errors="replace").splitlines()
    verdict = next((ln for ln in reversed(tail) if ln.startswith("verdict:")), "verdict: ?")
    summary: dict[str, Any] = {
        "command": cmd,
        "exit": proc.returncode,
        "verdict": verdict.split(":", 1)[1].strip(),
        "wall_s": round(time.monotonic() - t0, 1),
        "samples": samples,
    }
    if run_dir is not None and (run_dir / "timeline.json").exists():
        phases = {
            ph["phase"]: wall(ph["wall"])
            for ph in json.loads((run_dir / "timeline.json").read_text())["phases"]
        }
        judged = phases.get("judged")
        stop = next((v for k, v in phases.items() if k.startswith("stopping")), None)
        if judged and stop:
            summary["load_end_to_verdict_s"] = round(judged - stop, 1)
        if judged and "checking" in phases:
            summary["checks_s"] = round(judged - phases["checking"], 1)
        summary["run_dir_mib"] = du_mib(run_dir)
        results = run_dir / "results.json"
        if results.exists():  # the whole verdict (the printed summary wraps long lines)
            judged_as = json.loads(results.read_text())
            summary["verdict"] = judged_as["valid"]
            summary["anomalies"] = judged_as.get("anomalies", {})
            summary["known_findings"] = [f["id"] for f in judged_as.get("known_findings") or []]
        (run_dir / "soak.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "samples"}))
    return 0 if proc.returncode in (0, 1) else 1


if __name__ == "__main__":
    raise SystemExit(main())
