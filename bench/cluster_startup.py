"""Bring-up and teardown time of real clusters, 3 and 5 nodes, median of 3 runs each.

Ready means what ``Cluster.start`` means: every broker registered and unfenced, and a
replicated transactional write + read_committed read through toxiproxy succeeded.
Teardown is the time from leaving the ``with`` block to everything being gone (processes,
namespaces, bridge); the log-segment dump, which is evidence collection, is timed apart.

    .venv/bin/python bench/cluster_startup.py [--runs 3] [--nodes 3 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from harness.substrate.api import ClusterConfig
from harness.substrate.process.cluster import Cluster


def one_run(nodes: int, store: Path) -> tuple[float, float, float]:
    cluster = Cluster(ClusterConfig(nodes=nodes, store=store))
    t0 = time.monotonic()
    cluster.start()
    ready = time.monotonic() - t0
    cluster.stop()
    dump = cluster.timings["dump"] - cluster.timings["stop_nodes"]
    teardown = cluster.timings["teardown"] - dump
    return ready, teardown, dump


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, nargs="+", default=[3, 5])
    args = parser.parse_args()
    print(f"{'nodes':>5} {'ready_s':>8} {'teardown_s':>10} {'dump_s':>7}  runs (ready/teardown)")
    for n in args.nodes:
        results = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                results.append(one_run(n, Path(tmp)))
        ready = statistics.median(r[0] for r in results)
        down = statistics.median(r[1] for r in results)
        dump = statistics.median(r[2] for r in results)
        runs = " ".join(f"{r[0]:.1f}/{r[1]:.2f}" for r in results)
        print(f"{n:>5} {ready:>8.1f} {down:>10.2f} {dump:>7.1f}  {runs}", flush=True)


if __name__ == "__main__":
    main()
