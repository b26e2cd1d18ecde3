"""The process and Docker backends side by side, same machine, same run: 3-node ready and
teardown, and eos pipeline throughput.

Ready and teardown are measured as ``bench/cluster_startup.py`` measures them (ready: every
broker registered and a transaction through toxiproxy; teardown without the log-segment
dump, which is evidence collection and timed apart). Throughput is
``bench/eos_throughput.py``'s pipeline (input filled first, then processors until the
group's committed offsets reach the end), Python processors, transactions of 100. The
backends alternate run by run, so a machine that gets busier affects both alike. The
Docker figures exclude image builds (built once before the first run, and cached).

    .venv/bin/python bench/backends.py [--runs 3] [--values 10000] [--processors 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eos_throughput import one as eos_once

from harness.substrate.api import ClusterConfig
from harness.substrate.docker.cluster import DockerCluster
from harness.substrate.process.cluster import Cluster

BACKENDS = {"process": Cluster, "docker": DockerCluster}


def startup_once(backend: str, store: Path) -> tuple[float, float, float]:
    """(ready, teardown without the dump, dump) in seconds."""
    cluster: Any = BACKENDS[backend](ClusterConfig(nodes=3, store=store))
    t0 = time.monotonic()
    cluster.start()
    ready = time.monotonic() - t0
    cluster.stop()
    dump = cluster.timings["dump"] - cluster.timings["stop_nodes"]
    return ready, cluster.timings["teardown"] - dump, dump


def throughput_once(backend: str, root: Path, values: int, processors: int) -> float:
    """Records/s of one drained pipeline on a fresh cluster of ``backend``."""
    cfg = ClusterConfig(store=root / "c", dump_logs=False)
    with BACKENDS[backend](cfg) as c:
        return eos_once(c, root, "python", 100, True, values, processors)["records_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3, help="median of this many per backend")
    parser.add_argument("--values", type=int, default=10000)
    parser.add_argument("--processors", type=int, default=3)
    args = parser.parse_args()
    if args.runs < 1 or args.values < 1 or args.processors < 1:
        parser.error("--runs, --values and --processors must be positive")
    start: dict[str, list[tuple[float, float, float]]] = {b: [] for b in BACKENDS}
    rate: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for _ in range(args.runs):
        for backend in BACKENDS:
            with tempfile.TemporaryDirectory() as tmp:
                start[backend].append(startup_once(backend, Path(tmp)))
            with tempfile.TemporaryDirectory() as tmp:
                rate[backend].append(
                    throughput_once(backend, Path(tmp), args.values, args.processors)
                )
    print(
        f"{'backend':<8} {'ready_s':>8} {'teardown_s':>10} {'dump_s':>7} {'records/s':>10}"
        "  runs (ready/teardown/records/s)"
    )
    for backend in BACKENDS:
        rs = start[backend]
        runs = " ".join(
            f"{r[0]:.1f}/{r[1]:.2f}/{x:.0f}" for r, x in zip(rs, rate[backend], strict=True)
        )
        print(
            f"{backend:<8} {statistics.median(r[0] for r in rs):>8.1f} "
            f"{statistics.median(r[1] for r in rs):>10.2f} "
            f"{statistics.median(r[2] for r in rs):>7.1f} "
            f"{statistics.median(rate[backend]):>10.0f}  {runs}",
            flush=True,
        )


if __name__ == "__main__":
    main()
