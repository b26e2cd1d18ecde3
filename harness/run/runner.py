"""One test run: a fresh cluster, a workload, nemeses, a stored history and a verdict.

``python -m harness run --workload eos ...`` lands here. A run writes everything into
``<store>/<test-name>/<timestamp>/``: ``config.json`` (the full configuration), one history
file per process in ``processes/``, the merged ``history.jsonl``, processor logs in ``logs/``
and the cluster's evidence (node logs, ``evidence/logdump.jsonl``), and points
``<store>/latest`` (and ``<store>/<test-name>/latest``) at it.

Phases: set up topics, start the processors and wait for a stable group, start the nemeses,
feed the pipeline for the time limit, stop and heal the nemeses, drain, stop the processors,
record the final state, merge. The history is merged even when the run fails half-way, so
whatever happened is on disk for a human to read.

Nemeses plug in through :func:`build_nemeses` (``harness.run.nemesis``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import HarnessError
from harness.kafka.versions import DEFAULT_KAFKA_VERSION
from harness.run.options import WORKLOADS, Nemesis, RunContext, RunOptions
from harness.storefiles import new_unique_dir

if TYPE_CHECKING:
    from harness.substrate.api import Cluster
    from history import Op

log = logging.getLogger("harness.runner")


def build_nemeses(options: RunOptions) -> list[Nemesis]:
    """The run's fault injectors: one scheduled nemesis unless ``--nemesis none``."""
    from harness.run.nemesis import ScheduledNemesis, kinds_for

    # Validates the spec before a cluster exists.
    if options.replay is None and not kinds_for(options, netns=True):
        return []
    return [ScheduledNemesis(options)]


@dataclass
class RunResult:
    run_dir: Path
    history: Path
    summary: dict[str, Any]
    drained: bool
    stats: dict[str, Any]
    #: The checkers' verdict (``results.json``); set by :func:`run` once the cluster's
    #: evidence is on disk, or by a caller of :func:`execute` via ``harness.run.verdict.judge``.
    verdict: dict[str, Any] | None = None

    @property
    def summary_line(self) -> str:
        return summary_line(self.summary)


# --- the drain tally ---------------------------------------------------------------------


def drain_tally(ops: Iterable[Op]) -> dict[str, Any]:
    """A quick tally of the final drain, printed beside the verdict (never instead of it).

    Counts from the final read_committed drain of the output topic against the seeder's
    acknowledged values: outputs, distinct seeded inputs covered, inputs output more than
    once (same source partition+offset), seeded values missing, outputs of no seeded value.
    The verdict is the checkers' (``harness.run.verdict``), which also judge order, zombies,
    aborted reads, torn transactions and the broker logs.
    """
    from workloads.eos_config import H_SRC_OFFSET, H_SRC_PARTITION, input_of

    seeded: set[str] = set()
    sources: Counter[tuple[str | None, str | None]] = Counter()
    covered: set[str] = set()
    unexpected = 0
    outputs = 0
    complete = True
    for op in ops:
        value = op.get("value")
        if op["process"] == "seeder" and op["f"] == "send" and op["type"] in ("ok", "info"):
            seeded.update(v for v, _, offset in value["values"] if offset is not None)
        elif (
            op["process"] == "final"
            and op["f"] == "read"
            and op["type"] != "invoke"
            and value["isolation"] == "read_committed"
        ):
            complete = complete and op["type"] == "ok"
            for _offset, _key, out, headers in value["records"]:
                outputs += 1
                source = input_of(out)
                # Outputs of a client that writes no source headers (the Java copier) are
                # identified by their value, which is unique per seeded input.
                if H_SRC_OFFSET in headers:
                    sources[(headers.get(H_SRC_PARTITION), headers.get(H_SRC_OFFSET))] += 1
                else:
                    sources[("value", source or out)] += 1
                if source in seeded:
                    covered.add(source)
                else:
                    unexpected += 1
    duplicates = sum(n - 1 for n in sources.values() if n > 1)
    missing = len(seeded - covered)
    return {
        "seeded": len(seeded),
        "committed_outputs": outputs,
        "distinct_inputs": len(covered),
        "duplicates": duplicates,
        "missing": missing,
        "unexpected": unexpected,
        "complete_read": complete,
        "exactly_once": complete and duplicates == 0 and missing == 0 and unexpected == 0,
    }


def summary_line(s: dict[str, Any]) -> str:
    verdict = "exactly-once" if s["exactly_once"] else "NOT exactly-once"
    return (
        f"final drain: seeded={s['seeded']} "
        f"committed-outputs={s['committed_outputs']} distinct-inputs={s['distinct_inputs']} "
        f"duplicates={s['duplicates']} missing={s['missing']} unexpected={s['unexpected']}"
        f"{'' if s['complete_read'] else ' (final read incomplete)'} => {verdict}"
    )


def run_stats(ops: Iterable[Op]) -> dict[str, Any]:
    """Throughput of the processors: committed transactions and records per second of the
    span from the first transaction invoke to the last completion."""
    first = last = None
    txns = aborted = records = 0
    instances: set[Any] = set()
    for op in ops:
        if op["f"] != "txn" or not isinstance(op["process"], int):
            continue
        instances.add(op["process"])
        if op["type"] == "invoke":
            first = op["time"] if first is None else first
            continue
        last = op["time"]
        if op["type"] == "ok":
            txns += 1
            records += len(op["value"]["outputs"])
        else:
            aborted += 1
    span = (last - first) / 1e9 if first is not None and last is not None else 0.0
    return {
        "instances": len(instances),
        "txns_committed": txns,
        "txns_not_committed": aborted,
        "records_committed": records,
        "span_s": round(span, 3),
        "txns_per_s": round(txns / span, 1) if span else 0.0,
        "records_per_s": round(records / span, 1) if span else 0.0,
    }


# --- running ---------------------------------------------------------------------------


def new_run_dir(store: Path, test_name: str) -> Path:
    """``store/<test>/<timestamp>``, unique even for two runs within one second."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    return new_unique_dir(store.resolve() / test_name, stamp, "run directory")


def _link_latest(link: Path, target: Path) -> None:
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(os.path.relpath(target, link.parent))
        tmp.replace(link)
    except OSError as exc:
        log.warning("could not update %s: %s", link, exc)


def write_config(run_dir: Path, options: RunOptions, extra: dict[str, Any]) -> None:
    config = {
        **options.to_dict(),
        **extra,
        "argv": sys.argv,
        "python": sys.version.split()[0],
        "host": platform.node(),
        "written_wall": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (run_dir / "config.json").write_text(json.dumps(config, indent=2, default=str) + "\n")


def execute(
    cluster: Cluster,
    options: RunOptions,
    run_dir: Path,
    nemeses: list[Nemesis] | None = None,
) -> RunResult:
    """Run the workload on an already started cluster; the history lands in ``run_dir``.

    Tests call this with their session cluster (and unique topic names); ``run`` calls it
    with a fresh cluster whose evidence is stored in the same directory.
    """
    from history import load_history, merge_histories
    from workloads.eos import EosWorkload

    if options.workload not in WORKLOADS or options.eos is None:
        raise HarnessError(f"unknown workload {options.workload!r} (known: eos)")
    eos = options.eos
    eos.validate()
    nemeses = list(nemeses or [])
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "config.json").exists():
        write_config(run_dir, options, {"cluster_run_id": cluster.run_id})
    history_path = run_dir / "history.jsonl"
    drained = False
    completed = False
    with EosWorkload(eos, cluster, run_dir) as workload:
        ctx = RunContext(cluster, workload, options, run_dir)
        try:
            workload.setup()
            # Kafka's Java copier exits once it has copied what its partitions held when they
            # were assigned, so it is fed first and then copies while the faults run.
            java = eos.client == "java"
            if java:
                workload.seed(options.time_limit, threading.Event())
            workload.start_processors()
            if not java:
                workload.wait_stable(timeout=60 + eos.session_timeout_ms / 1000)
            started: list[Nemesis] = []
            try:
                for nemesis in nemeses:
                    nemesis.start(ctx)
                    started.append(nemesis)
                if not java:
                    workload.seed(options.time_limit, threading.Event())
            finally:
                _call_all(started, "stop", ctx)
                _call_all(started, "heal", ctx)
            drained = workload.finish()
            completed = True
        finally:
            workload.close()
            try:
                paths = sorted(ctx.processes_dir.glob("*.jsonl"))
                merge_histories(paths, history_path, meta=options.to_dict())
            except Exception as exc:
                if completed:
                    raise
                # Do not mask the failure that ended the run; the per-process files remain.
                log.warning("merging the history of a failed run failed: %s", exc)
    ops = load_history(history_path)
    summary = drain_tally(ops)
    stats = run_stats(ops)
    stats["seeded_seconds"] = round(workload.seed_result.seconds, 3) if workload.seed_result else 0
    (run_dir / "summary.json").write_text(
        json.dumps({"summary": summary, "stats": stats, "drained": drained}, indent=2) + "\n"
    )
    return RunResult(run_dir, history_path, summary, drained, stats)


def _call_all(nemeses: list[Nemesis], method: str, ctx: RunContext) -> None:
    """Call ``method`` on every nemesis even if one fails (a heal must never be skipped);
    the first failure is raised afterwards."""
    first: BaseException | None = None
    for nemesis in nemeses:
        try:
            getattr(nemesis, method)(ctx)
        except Exception as exc:
            log.error("nemesis %s: %s failed: %s", getattr(nemesis, "name", "?"), method, exc)
            first = first or exc
    if first is not None:
        raise first


def run(
    options: RunOptions,
    nemeses: list[Nemesis] | None = None,
    run_dir: Path | None = None,
    on_phase: Callable[[str], None] = lambda phase: None,
) -> RunResult:
    """One complete test on a fresh cluster whose evidence goes into the run directory,
    judged by the checkers once the cluster is gone (its log dumps are part of the evidence).
    """
    from harness.run.verdict import judge
    from harness.substrate.api import ClusterConfig
    from harness.substrate.backends import open_cluster

    if options.eos is None:
        raise HarnessError("no workload options")
    nemeses = build_nemeses(options) if nemeses is None else nemeses
    run_dir = run_dir or start_run_dir(options)
    cluster_config = ClusterConfig(
        nodes=options.nodes,
        kafka_version=options.kafka_version,
        transaction_version=options.transaction_version,
        broker_settings=dict(options.broker_settings),
        store=run_dir,
        network=options.network,
    )
    write_config(run_dir, options, {"cluster": _jsonable(asdict(cluster_config))})
    on_phase("starting the cluster")
    with open_cluster(cluster_config, options.backend) as cluster:
        on_phase("running")
        write_config(
            run_dir,
            options,
            {
                "cluster": _jsonable(asdict(cluster_config)),
                "run_id": cluster.run_id,
                "slot": cluster.slot.number if cluster.slot else None,
                "kafka_version_resolved": str(cluster.install.version) if cluster.install else None,
                "network_mode": "netns" if cluster.uses_netns else "loopback",
                "broker_settings_effective": cluster.settings,
                "bootstrap": cluster.bootstrap,
            },
        )
        result = execute(cluster, options, run_dir, nemeses)
        on_phase("stopping the cluster, dumping its logs")
    on_phase("checking")
    result.verdict = judge(run_dir)
    return result


def start_run_dir(options: RunOptions) -> Path:
    """A new run directory, pointed at by ``<store>/latest`` and ``<store>/<test>/latest``."""
    store = Path(options.store)
    run_dir = new_run_dir(store, options.test_name)
    _link_latest(store.resolve() / "latest", run_dir)
    _link_latest(run_dir.parent / "latest", run_dir)
    return run_dir


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in d.items()}


# --- the CLI -----------------------------------------------------------------------------


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``python -m harness run`` (the subparser itself lives in harness.cli)."""
    from workloads.eos_config import TXN_ID_STRATEGIES, VARIANTS

    p.add_argument("--workload", choices=WORKLOADS, default="eos")
    p.add_argument("--variant", choices=VARIANTS, default="eos")
    p.add_argument("--processors", type=int, default=3, metavar="K")
    p.add_argument("--partitions", type=int, default=6, metavar="P")
    p.add_argument("--values", type=int, default=5000, metavar="N", help="values to seed")
    p.add_argument("--time-limit", type=float, default=60.0, metavar="S", help="seeding time")
    p.add_argument("--seed", type=int, default=None, help="RNG seed (default: random)")
    p.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    p.add_argument("--transaction-version", type=int, choices=[0, 2], default=None)
    p.add_argument("--store", default="store", metavar="DIR")
    p.add_argument(
        "--nemesis",
        default="none",
        metavar="KINDS",
        help="none, all, or a comma list of: partition, client-cut, pause, kill, restart, "
        "slow, late-request, pause-processor, zombie, kill-processor, hijack",
    )
    p.add_argument("--nemesis-interval", type=float, default=10.0, metavar="S")
    p.add_argument("--nemesis-duration", type=float, default=10.0, metavar="S")
    p.add_argument(
        "--replay",
        default=None,
        metavar="SCHEDULE.json",
        help="replay the faults of a saved schedule.json",
    )
    p.add_argument("--txn-size", type=int, default=50, help="max inputs per transaction")
    p.add_argument("--commit-interval-ms", type=int, default=200)
    p.add_argument("--abort-probability", type=float, default=0.0)
    p.add_argument("--txn-id-strategy", choices=TXN_ID_STRATEGIES, default="unique")
    p.add_argument("--transaction-timeout-ms", type=int, default=10000)
    p.add_argument("--session-timeout-ms", type=int, default=10000)
    p.add_argument("--network", choices=["auto", "netns", "loopback"], default="auto")
    from harness.substrate.backends import add_backend_argument

    add_backend_argument(p)
    p.add_argument(
        "--sub-via",
        choices=["assign", "subscribe"],
        default="assign",
        help="queue workload: how consumers get partitions",
    )
    p.add_argument(
        "--no-txn",
        dest="txn",
        action="store_false",
        help="queue workload: plain sends and polls, no transactions",
    )
    p.add_argument(
        "--client",
        choices=["python", "java"],
        default="python",
        help="python: confluent-kafka processors; java: Kafka's TransactionalMessageCopier",
    )


def options_from_args(args: argparse.Namespace) -> RunOptions:
    from workloads.eos_config import EosOptions

    if args.time_limit <= 0:
        raise HarnessError("--time-limit must be positive")
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    eos = EosOptions(
        variant=args.variant,
        processors=args.processors,
        partitions=args.partitions,
        values=args.values,
        txn_size=args.txn_size,
        commit_interval_ms=args.commit_interval_ms,
        abort_probability=args.abort_probability,
        txn_id_strategy=args.txn_id_strategy,
        transaction_timeout_ms=args.transaction_timeout_ms,
        session_timeout_ms=args.session_timeout_ms,
        client=args.client,
        seed=seed,
    )
    eos.validate()
    options = RunOptions(
        workload=args.workload,
        time_limit=args.time_limit,
        seed=seed,
        kafka_version=args.kafka_version,
        transaction_version=args.transaction_version,
        network=args.network,
        store=Path(args.store),
        nemesis=args.nemesis,
        nemesis_interval=args.nemesis_interval,
        nemesis_duration=args.nemesis_duration,
        replay=Path(args.replay) if args.replay else None,
        eos=eos,
        backend=args.backend,
    )
    if args.workload == "queue":
        from harness.run.queue import queue_options_from_args

        options.queue = queue_options_from_args(args)
    build_nemeses(options)  # unknown names fail before a cluster is built
    return options


def _write_report(run_dir: Path) -> Path | None:
    """The HTML report; a failure to draw it must not hide the run's outcome."""
    from harness.report import write_report

    try:
        return write_report(run_dir)
    except Exception as exc:
        log.error("writing the report of %s failed: %s", run_dir, exc)
        return None


def run_command(args: argparse.Namespace) -> int:
    """``python -m harness run``: one test with live progress, then the checkers' verdict
    as a summary table and as the exit status (0 valid, 1 invalid, 2 cannot judge)."""
    from harness.run.progress import LiveProgress
    from harness.run.summary import print_summary
    from harness.run.verdict import exit_status

    options = options_from_args(args)
    t0 = time.monotonic()
    run_dir = start_run_dir(options)
    print(f"run: {run_dir} (seed {options.seed})", flush=True)
    stats: dict[str, Any] = {}
    tally: dict[str, Any] | None = None
    with LiveProgress(run_dir, options.time_limit) as progress:
        if options.workload == "queue":
            from harness.run.queue import run_queue_test

            verdict = run_queue_test(options, run_dir)
        else:
            result = run(options, run_dir=run_dir, on_phase=progress.set_phase)
            verdict = result.verdict or {"valid": "unknown", "anomalies": {}}
            stats, tally = result.stats, result.summary
            if not result.drained:
                stats = {**stats, "note": "the final drain timed out"}
    report = _write_report(run_dir)
    print_summary(verdict, run_dir, report, stats=stats, tally=tally, seconds=time.monotonic() - t0)
    return exit_status(verdict)
