"""How the broker-log checks scale: Spark (``local[2]``) against the pure-Python reference.

    .venv/bin/python bench/checker_scale.py [--sizes 1000000,10000000] [--impl spark,python]
                                            [--dir DIR] [--keep]

For each size a synthetic, valid log dump (three replicas, transactional producers writing
TV2-style transactions, a transaction log) is streamed to disk, never held in memory. Each
check then runs in a child process, so its peak memory can be read with ``getrusage``: the
Python process's own peak, and (for Spark) the JVM's, which the child reaps before exiting.
Spark is timed twice: cold (JSONL converted to the Parquet cache) and warm (cache reused).

Targets: 10M records in <= 60 s, time(10M)/time(1M) <= 12, Spark >= 2x faster than Python
at 10M. Results are printed as a table and as JSON (``--json FILE``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

_DATA = (
    '{{"node":{node},"topic":"t","partition":{p},"baseOffset":{o},"lastOffset":{o},"count":1,'
    '"baseSequence":{seq},"lastSequence":{seq},"producerId":{pid},"producerEpoch":{e},'
    '"partitionLeaderEpoch":0,"isTransactional":true,"isControl":false,"offset":{o},'
    '"sequence":{seq},"create_time":{ts},"header_keys":[],"key":"k{pid}",'
    '"payload":"v-{pid}-{e}-{seq}","segment":"00000000000000000000.log","kind":"data"}}\n'
)
_MARKER = (
    '{{"node":{node},"topic":"t","partition":{p},"baseOffset":{o},"lastOffset":{o},"count":1,'
    '"baseSequence":-1,"lastSequence":-1,"producerId":{pid},"producerEpoch":{e},'
    '"partitionLeaderEpoch":0,"isTransactional":true,"isControl":true,"offset":{o},'
    '"sequence":-1,"create_time":{ts},"header_keys":[],"marker":"{m}","coordinator_epoch":0,'
    '"segment":"00000000000000000000.log","kind":"data"}}\n'
)


def _partition_lines(node: int, p: int, n: int, seed: int) -> Any:
    """One replica's records of partition ``p``: ~n records, the same on every node."""
    rng = random.Random(seed * 1_000_003 + p)
    epochs: dict[int, int] = {}
    o, ts = 0, 1_700_000_000_000
    while o < n:
        pid = 1000 + rng.randrange(16)
        e = epochs.get(pid, 0)
        for seq in range(rng.randint(1, 8)):
            yield _DATA.format(node=node, p=p, o=o, seq=seq, pid=pid, e=e, ts=ts)
            o += 1
            ts += 1
        m = "COMMIT" if rng.random() < 0.9 else "ABORT"
        yield _MARKER.format(node=node, p=p, o=o, pid=pid, e=e + 1, ts=ts, m=m)
        o += 1
        epochs[pid] = e + 1


def generate(path: Path, records: int, *, partitions: int = 12, seed: int = 1) -> int:
    """Stream a dump of about ``records`` records (all replicas) to ``path``; returns lines."""
    per_part = records // (3 * partitions)
    n = 0
    with open(path, "w", buffering=1 << 20) as fh:
        fh.write('{"logdump_format": 1, "nodes": 3}\n')
        for node in (1, 2, 3):
            for p in range(partitions):
                for line in _partition_lines(node, p, per_part, seed):
                    fh.write(line)
                    n += 1
    return n


_SPARK_CHILD = """
import json, os, resource, sys, time
from checkers.log_evidence import evidence_checks
from checkers.spark import start_spark, stop_spark
t0 = time.monotonic()
spark = start_spark("local[2]")
t1 = time.monotonic()
res = evidence_checks(spark, sys.argv[1])
t2 = time.monotonic()
stop_spark()
print(json.dumps({"startup": t1 - t0, "check": t2 - t1, "valid": res["valid"],
    "records": res["stats"]["records"], "cache_reused": res["stats"]["parquet_cache_reused"],
    "py_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "jvm_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""

_PY_CHILD = """
import json, resource, sys, time
from checkers.pyref import check_logdump
t0 = time.monotonic()
res = check_logdump(sys.argv[1])
t1 = time.monotonic()
print(json.dumps({"check": t1 - t0, "valid": res["valid"], "records": res["stats"]["records"],
    "py_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _child(code: str, arg: str, env: dict[str, str]) -> dict[str, Any]:
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", code, arg], cwd=ROOT, capture_output=True, text=True, env=env
    )
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"child failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--impl", default="spark,python")
    ap.add_argument("--dir", default=None, help="where to write dumps (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated dumps")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write results here")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    impls = args.impl.split(",")
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kh-bench-"))
    env = dict(os.environ)
    env.setdefault("KAFKA_HARNESS_SPARK_DRIVER_MEMORY", "4g")
    results: list[dict[str, Any]] = []
    try:
        for size in sizes:
            run = base / f"run-{size}"
            (run / "evidence").mkdir(parents=True, exist_ok=True)
            dump = run / "evidence" / "logdump.jsonl"
            t0 = time.monotonic()
            lines = generate(dump, size)
            gen = time.monotonic() - t0
            row: dict[str, Any] = {
                "records": lines,
                "bytes": dump.stat().st_size,
                "generate_s": round(gen, 1),
            }
            print(
                f"generated {lines} records ({row['bytes'] / 1e9:.2f} GB) in {gen:.0f}s", flush=True
            )
            if "spark" in impls:
                shutil.rmtree(run / ".parquet", ignore_errors=True)
                cold = _child(_SPARK_CHILD, str(run), env)
                warm = _child(_SPARK_CHILD, str(run), env)
                assert cold["valid"] is True and warm["cache_reused"] is True, (cold, warm)
                row["spark_cold"] = cold
                row["spark_warm"] = warm
                print(f"  spark cold {cold['check']:.1f}s warm {warm['check']:.1f}s", flush=True)
            if "python" in impls:
                py = _child(_PY_CHILD, str(dump), env)
                assert py["valid"] is True, py
                row["python"] = py
                print(f"  python {py['check']:.1f}s, peak {py['py_rss_mb']:.0f} MB", flush=True)
            results.append(row)
            if not args.keep:
                shutil.rmtree(run, ignore_errors=True)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    _report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _report(results: list[dict[str, Any]]) -> None:
    print()
    print(
        f"{'records':>11} {'spark cold s':>12} {'spark warm s':>12} {'python s':>9} "
        f"{'py/spark(warm)':>14} {'spark drv MB':>12} {'JVM MB':>7} {'python MB':>9}"
    )
    for r in results:
        sc, sw, py = r.get("spark_cold"), r.get("spark_warm"), r.get("python")
        ratio = f"{py['check'] / sw['check']:.2f}" if sw and py else "-"
        print(
            f"{r['records']:>11} {sc['check'] if sc else float('nan'):>12.1f} "
            f"{sw['check'] if sw else float('nan'):>12.1f} "
            f"{py['check'] if py else float('nan'):>9.1f} {ratio:>14} "
            f"{sw['py_rss_mb'] if sw else float('nan'):>12.0f} "
            f"{max(sc['jvm_rss_mb'], sw['jvm_rss_mb']) if sw and sc else float('nan'):>7.0f} "
            f"{py['py_rss_mb'] if py else float('nan'):>9.0f}"
        )
    if len(results) >= 2:
        a, b = results[0], results[-1]
        for impl in ("spark_warm", "spark_cold", "python"):
            if impl in a and impl in b:
                print(
                    f"{impl}: {b['records']}/{a['records']} records -> "
                    f"{b[impl]['check'] / a[impl]['check']:.1f}x time"
                )
    _ = resource  # peak RSS is measured in the children with resource.getrusage


if __name__ == "__main__":
    raise SystemExit(main())
