"""Throughput of the eos pipeline: Python processors, the project's Java processors and Kafka's
Java copier, same cluster.

For each configuration the input topic is filled first (N values, 6 partitions), then K
processors start and the clock runs until the group's committed offsets reach the end of
every input partition: records/s = N / that time (start-up included, the same for both
clients), median of --repeats runs. Transactions/s counts committed transactions from the
histories where they are recorded, else N / transaction size. The recording cost is the
same pipeline run with history recording switched off.

    .venv/bin/python bench/eos_throughput.py [--values 30000] [--processors 3] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from harness.substrate.api import ClusterConfig
from harness.substrate.process.cluster import Cluster
from history import Recorder, read_process_file
from workloads.eos.config import EosOptions
from workloads.eos.supervisor import EosWorkload


def one(
    cluster: Cluster,
    root: Path,
    client: str,
    txn_size: int,
    record: bool,
    values: int,
    processors: int,
) -> dict[str, float]:
    suffix = f"-b{uuid.uuid4().hex[:6]}"
    opts = EosOptions(
        name_suffix=suffix,
        client=client,
        values=values,
        partitions=6,
        processors=processors,
        txn_size=txn_size,
        poison_every=0,
        find_hanging=False,
        record_history=record,
        drain_timeout_s=600,
        commit_interval_ms=100,
    )
    run_dir = root / suffix.lstrip("-")
    with EosWorkload(opts, cluster, run_dir) as wl:
        wl.setup()
        wl.seed(0.0)
        t0 = time.monotonic()
        wl.start_processors()
        with Recorder(run_dir / "bench.jsonl", "bench") as rec:
            drained = wl.drain(rec, timeout=600)
        elapsed = time.monotonic() - t0
        wl.stop_processors()
    assert drained, "the pipeline did not drain"
    txns = 0
    for path in (run_dir / "processes").glob("[0-9]*.jsonl"):
        _h, ops, _w = read_process_file(path)
        txns += sum(1 for op in ops if op["f"] == "txn" and op["type"] == "ok")
    estimated = txns == 0
    if estimated:
        txns = -(-values // txn_size)
    return {
        "seconds": elapsed,
        "records_per_s": values / elapsed,
        "txns_per_s": txns / elapsed,
        "txns_estimated": estimated,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--values", type=int, default=30000)
    parser.add_argument("--processors", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="median of this many runs")
    args = parser.parse_args()
    configs = [
        ("python", 100, True),
        ("java", 100, True),
        ("copier", 100, True),
        ("python", 100, False),
        ("java", 100, False),
        ("python", 1000, True),
        ("java", 1000, True),
        ("copier", 1000, True),
        ("python", 1000, False),
    ]
    results: dict[tuple[str, int, bool], dict[str, float]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        Cluster(ClusterConfig(store=Path(tmp) / "c", dump_logs=False)) as c,
    ):
        print(
            f"{'client':<7} {'txn':>5} {'record':>6} {'seconds':>8} {'records/s':>10} {'txns/s':>8}"
        )
        for client, size, record in configs:
            runs = [
                one(c, Path(tmp), client, size, record, args.values, args.processors)
                for _ in range(args.repeats)
            ]
            r = sorted(runs, key=lambda x: x["records_per_s"])[len(runs) // 2]
            results[(client, size, record)] = r
            est = "~" if r["txns_estimated"] else " "
            print(
                f"{client:<7} {size:>5} {record!s:>6} {r['seconds']:>8.1f} "
                f"{r['records_per_s']:>10.0f} {est}{r['txns_per_s']:>7.1f}",
                flush=True,
            )
    for size in (100, 1000):
        py = results[("python", size, True)]["records_per_s"]
        java = results[("java", size, True)]["records_per_s"]
        copier = results[("copier", size, True)]["records_per_s"]
        bare = results[("python", size, False)]["records_per_s"]
        print(
            f"txn size {size}: python/java = {py / java:.2f}x; python/copier = "
            f"{py / copier:.2f}x; python recording overhead = {(1 - py / bare) * 100:+.1f}%"
        )


if __name__ == "__main__":
    main()
