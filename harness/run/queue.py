"""``python -m harness run --workload queue``: the Jepsen-style queue test, end to end.

A fresh cluster, the queue workload's clients (``workloads.queue``), the scheduled nemeses
acting on them, then Jepsen's queue checks (``checkers.queue``) on the merged history. The
verdict is the exit status: 0 valid, 1 invalid.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import HarnessError

if TYPE_CHECKING:
    from harness.run.options import RunOptions

log = logging.getLogger("harness.queue")


def run_queue_test(options: RunOptions, run_dir: Path) -> dict[str, Any]:
    """Run one queue test in ``run_dir``; returns the checker's result (also results.json)."""
    from checkers.queue import check_queue
    from harness.run.nemesis import plan
    from harness.substrate.api import ClusterConfig
    from harness.substrate.backends import open_cluster
    from history import load_history
    from nemeses.engine import Nemesis as Engine
    from nemeses.targets import FaultContext
    from workloads.queue import QueueOptions, run_queue

    q = options.queue or {}
    qopts = QueueOptions.from_dict({"time_limit": options.time_limit, "seed": options.seed, **q})
    cfg = ClusterConfig(
        nodes=options.nodes,
        kafka_version=options.kafka_version,
        transaction_version=options.transaction_version,
        broker_settings=dict(options.broker_settings),
        store=run_dir,
        network=options.network,
    )
    engine: Engine | None = None
    recorder: Any = None
    with open_cluster(cfg, options.backend) as cluster:
        (run_dir / "config.json").write_text(
            json.dumps(
                {
                    "options": options.to_dict(),
                    "queue": asdict(qopts),
                    "run_id": cluster.run_id,
                    "slot": cluster.slot.number if cluster.slot else None,
                    "bootstrap": cluster.bootstrap,
                },
                indent=2,
                default=str,
            )
            + "\n"
        )
        schedule = plan(options, cluster.uses_netns)

        def during(workload: Any) -> None:
            nonlocal engine, recorder
            if not schedule.events:
                return
            from history import Recorder

            recorder = Recorder(
                workload.processes_dir / "nemesis.jsonl",
                "nemesis",
                {"schedule": schedule.to_json()},
            )
            engine = Engine(FaultContext(cluster, workload), schedule, recorder)
            engine.start()

        try:
            history = run_queue(cluster, run_dir / "queue", qopts, during=during)
        finally:
            if engine is not None:
                engine.stop()
                schedule.save(run_dir / "schedule.json", executed=engine.executed)
            if recorder is not None:
                recorder.close()
    ops = load_history(history)
    t0 = time.monotonic()
    result = check_queue(ops, sub_via=qopts.sub_via)
    result["check_seconds"] = round(time.monotonic() - t0, 3)
    result["history"] = str(history)
    (run_dir / "results.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


def queue_options_from_args(args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"clients": args.processors, "sub_via": args.sub_via, "txn": args.txn}
    if args.processors < 1:
        raise HarnessError("--processors must be at least 1")
    return out
