"""How the checkers scale: Spark (``local[2]``) against the single-process Python reference.

    .venv/bin/python bench/checker_scale.py [--mode eos|logdump] [--sizes 1000000,10000000]
        [--impl spark,python] [--dir DIR] [--keep] [--json FILE]
        [--py-mem-gb 12] [--py-timeout SECONDS]

``--mode eos`` (default): the eos history checks (``checkers.eos.run.check_eos``, what
``python -m checkers RUN_DIR`` runs for ``history.jsonl``) against ``checkers.eos.pyref``, on
synthetic valid eos histories of SIZE ops (:mod:`history.synthetic_eos`). ``--mode logdump``: the
broker-log checks on synthetic log dumps of SIZE records (:mod:`history.synthetic_logdump`).

Every measurement runs in a child process so its peak memory can be read with ``getrusage``:
the Python process's own peak and, for Spark, the JVM's (the child reaps it before exiting).
Spark is timed cold (no ``.parquet`` cache beside the run: JSON converted and, for eos, the
views parsed and stored) and warm (cache present). The Python child runs under an address
space limit (``--py-mem-gb``) so a reference that outgrows the machine fails with
``MemoryError`` instead of waking the OOM killer on a shared machine. The load average is
recorded with every figure: timings on a busy 2-core machine are noisy.

Targets (issue #5): 10M in <= 60 s, time(10M)/time(1M) <= 12, Spark >= 2x Python at 10M.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_EOS_SPARK = """
import json, resource, sys, time
from checkers.eos.run import check_eos
from checkers.spark import start_spark, stop_spark
t0 = time.monotonic()
spark = start_spark("local[2]")
t1 = time.monotonic()
res = check_eos(sys.argv[1], spark=spark)
t2 = time.monotonic()
stop_spark()
print(json.dumps({"startup": t1 - t0, "check": t2 - t1, "valid": res["valid"],
    "live": res["liveness"]["valid"],
    "counts": {k: r.get("count") for k, r in res["checkers"].items()},
    "py_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "jvm_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""

_EOS_PY = """
import json, resource, sys, time
limit = int(float(sys.argv[2]) * (1 << 30))
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from checkers.eos.pyref import check_eos_py
t0 = time.monotonic()
try:
    res = check_eos_py(sys.argv[1])
    out = {"valid": res["valid"], "live": res["liveness"]["valid"],
           "counts": {k: r.get("count") for k, r in res["checkers"].items()}}
except MemoryError:
    out = {"valid": None, "error": "MemoryError"}
out["check"] = time.monotonic() - t0
out["py_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""

_LOG_SPARK = """
import json, resource, sys, time
from checkers.logs.run import evidence_checks
from checkers.spark import start_spark, stop_spark
t0 = time.monotonic()
spark = start_spark("local[2]")
t1 = time.monotonic()
res = evidence_checks(spark, sys.argv[1])
t2 = time.monotonic()
stop_spark()
print(json.dumps({"startup": t1 - t0, "check": t2 - t1, "valid": res["valid"],
    "records": res["stats"]["records"],
    "py_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "jvm_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""

_LOG_PY = """
import json, resource, sys, time
limit = int(float(sys.argv[2]) * (1 << 30))
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from checkers.logs.pyref import check_logdump
t0 = time.monotonic()
try:
    res = check_logdump(sys.argv[1])
    out = {"valid": res["valid"], "records": res["stats"]["records"]}
except MemoryError:
    out = {"valid": None, "error": "MemoryError"}
out["check"] = time.monotonic() - t0
out["py_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def _child(code: str, args: list[str], env: dict[str, str], timeout: float | None) -> dict:
    """Run one measurement in a fresh interpreter; returns its JSON line plus wall and load."""
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    try:
        r = subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f}s", "check": None, "load": load0}
    wall = time.monotonic() - t0
    if r.returncode != 0:
        return {"error": f"exit {r.returncode}: {r.stderr.strip()[-500:]}", "check": None}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    out["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return out


def _measure(args: argparse.Namespace, run: Path, target: str, env: dict[str, str]) -> dict:
    """Spark cold, Spark warm and Python on one generated input."""
    spark_code, py_code = (_EOS_SPARK, _EOS_PY) if args.mode == "eos" else (_LOG_SPARK, _LOG_PY)
    row: dict[str, Any] = {}
    if "spark" in args.impl:
        shutil.rmtree(run / ".parquet", ignore_errors=True)
        row["spark_cold"] = _child(spark_code, [str(run)], env, args.spark_timeout)
        print(f"  spark cold {_fmt(row['spark_cold'])}", flush=True)
        row["spark_warm"] = _child(spark_code, [str(run)], env, args.spark_timeout)
        if row["spark_cold"].get("error") or row["spark_cold"].get("valid") == "unknown":
            # A cold check that failed published no cache: the "warm" one built it.
            row["spark_warm"]["note"] = "cold check failed: this one built the cache"
        print(f"  spark warm {_fmt(row['spark_warm'])}", flush=True)
    if "python" in args.impl:
        row["python"] = _child(py_code, [target, str(args.py_mem_gb)], env, args.py_timeout)
        print(f"  python     {_fmt(row['python'])}", flush=True)
    return row


def _fmt(m: dict[str, Any]) -> str:
    if m.get("check") is None or m.get("error"):
        return f"FAILED ({m.get('error')}) load {m.get('load')}"
    extra = f" JVM {m['jvm_rss_mb']:.0f} MB" if "jvm_rss_mb" in m else ""
    return (
        f"{m['check']:.1f}s valid={m.get('valid')} counts={m.get('counts', '-')} "
        f"py {m['py_rss_mb']:.0f} MB{extra} load {m.get('load')}"
    )


def _generate(mode: str, run: Path, size: int) -> tuple[Path, dict[str, Any]]:
    if mode == "eos":
        from history.synthetic_eos import generate

        target = run / "history.jsonl"
        run.mkdir(parents=True, exist_ok=True)
        stats = generate(target, size)
    else:
        from history.synthetic_logdump import generate as generate_dump

        (run / "evidence").mkdir(parents=True, exist_ok=True)
        target = run / "evidence" / "logdump.jsonl"
        stats = {"records": generate_dump(target, size)}
    return target, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--mode", choices=("eos", "logdump"), default="eos")
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--impl", default="spark,python")
    ap.add_argument("--dir", default=None, help="where to write inputs (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated inputs")
    ap.add_argument("--reuse", action="store_true", help="reuse inputs already in --dir")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write results here")
    ap.add_argument("--py-mem-gb", type=float, default=12.0, help="Python child memory cap")
    ap.add_argument("--py-timeout", type=float, default=None, help="Python child time cap (s)")
    ap.add_argument("--spark-timeout", type=float, default=None, help="Spark child time cap (s)")
    args = ap.parse_args(argv)
    args.impl = args.impl.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kh-bench-"))
    env = dict(os.environ)
    results: list[dict[str, Any]] = []
    try:
        for size in sizes:
            run = base / f"{args.mode}-{size}"
            existing = run / ("history.jsonl" if args.mode == "eos" else "evidence/logdump.jsonl")
            t0 = time.monotonic()
            if args.reuse and existing.is_file():
                target, stats = existing, {"reused": True}
            else:
                target, stats = _generate(args.mode, run, size)
            row: dict[str, Any] = {
                "mode": args.mode,
                "size": size,
                "input": stats,
                "bytes": target.stat().st_size,
                "generate_s": round(time.monotonic() - t0, 1),
            }
            print(f"{args.mode} {size}: {stats}, {row['bytes'] / 1e9:.2f} GB", flush=True)
            row |= _measure(args, run, str(target), env)
            results.append(row)
            if not args.keep:
                shutil.rmtree(run, ignore_errors=True)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    print()
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _t(m: dict[str, Any] | None) -> float | None:
    return None if not m or m.get("error") else m.get("check")


def _s(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def report(results: list[dict[str, Any]]) -> str:
    """The figures as a table: time, peak memory, growth 1st->last size, Spark speedup."""
    lines = [
        f"{'size':>10} {'impl':>11} {'check s':>8} {'py MB':>7} {'JVM MB':>7} "
        f"{'load':>11} {'x first':>8} {'py/spark':>8}"
    ]
    first = results[0] if results else {}
    for r in results:
        py = _t(r.get("python"))
        for impl in ("spark_cold", "spark_warm", "python"):
            m = r.get(impl)
            if m is None:
                continue
            t = _t(m)
            t0 = _t(first.get(impl))
            grow = t / t0 if t is not None and t0 and r is not first else None
            speed = py / t if py is not None and t is not None and impl != "python" else None
            load = m.get("load")
            load_s = (
                "-"
                if load is None
                else "/".join(str(x) for x in load)
                if isinstance(load, list)
                else str(load)
            )
            err = f"  {m['error'][:60]}" if m.get("error") else ""
            err += f"  ({m['note']})" if m.get("note") else ""
            lines.append(
                f"{r['size']:>10} {impl:>11} {_s(t):>8} {_s(m.get('py_rss_mb'), '.0f'):>7} "
                f"{_s(m.get('jvm_rss_mb'), '.0f'):>7} {load_s:>11} {_s(grow, '.2f'):>8} "
                f"{_s(speed, '.2f'):>8}{err}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
