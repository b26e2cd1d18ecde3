"""The Jepsen-style ``queue`` workload: supervisor, final drain, and ``run_queue``.

The clients are separate OS processes (:mod:`workloads.queue.client`, or another registered
client's queue process, its manifest's ``start.queue``: the Java twin from ``workloads/java``
writes the same ops), one Jepsen process each, spawned in their own sessions with the cluster's
environment so the reaper can find them if the harness dies. The supervisor keeps ``clients`` of
them running until the time limit: when one exits (a ``crash`` op, an op with an unknown
outcome, a SIGKILL from a nemesis) a fresh process with a new process id takes its slot, as
Jepsen replaces a crashed client.

At the end, as in Jepsen's final-poll phase, a fresh read_committed consumer assigned to every
key reads each partition from the beginning to its end, and its reads are recorded as ``ok``
polls of one more process; without that, ``unseen`` and ``lost-write`` would be judged on
whatever the clients happened to poll. Transactions left open by clients that died are
fenced first (``init_transactions`` with their transactional id), so the drain does not wait
a transaction timeout for the last stable offset to move. Finally all per-process files are
merged into ``history.jsonl``.

Layout of a run directory: ``processes/<process>.jsonl`` (clients and the final reader),
``processes/supervisor.jsonl`` (spawns, exits, fencing), ``logs/client-<process>.log``
(client stderr) and the merged ``history.jsonl``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from time import monotonic_ns
from typing import IO, TYPE_CHECKING, Any

from common.errors import HarnessError
from common.kafkaconf import secured
from common.waits import WaitTimeout, wait_for
from history import Recorder, merge_histories
from workloads import client_registry
from workloads.clients import (
    CLIENT_KNOBS,
    group_broker_settings,
    group_protocol_needs,
)
from workloads.processes import Child, Supervisor, child_env, spawn_command
from workloads.queue.config import (
    CLEAN_EXITS,
    SUB_VIAS,
)
from workloads.queue.final import read_to_end
from workloads.queue.options import QueueOptions
from workloads.spec import Figures, Option, Variant, WorkloadSpec

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster

log = logging.getLogger("workloads.queue.supervisor")

#: A client that dies sooner than this after its start delays its successor by as much, so a
#: client that cannot start (broker unreachable) does not spin the CPU.
MIN_LIFETIME_S = 1.0
#: Do not start a successor with less than this left before the end: it could not do anything.
MIN_REMAINING_S = 1.0
MONITOR_INTERVAL_S = 0.1
HISTORY_NAME = "history.jsonl"


class QueueWorkload(Supervisor):
    """One queue run's client side. Use as a context manager so no client outlives it.

    As faults see it (``workloads.queue.control``) a client process is a "processor", so the
    same process-level faults as for the eos workload (pause, kill, hijack) apply to it.
    """

    min_lifetime_s = MIN_LIFETIME_S
    monitor_interval_s = MONITOR_INTERVAL_S

    def __init__(
        self, options: QueueOptions, cluster: Cluster, run_dir: Path, time_limit: float
    ) -> None:
        options.validate()
        self.options = options
        self.cluster = cluster
        #: The run's time limit (seconds of load), held by the run's options, not these.
        self.time_limit = time_limit
        super().__init__(run_dir)
        #: When the load ends (``time.monotonic_ns``), set by :meth:`start`.
        self.end_ns: int | None = None
        self.final_complete: bool | None = None
        #: The client's command line (its manifest's ``start.queue``), resolved before the
        #: first spawn: building a client may fail, and must not fail half-way into a spawn.
        self._client_command: list[str] | None = None

    def kill_client(self, process: int) -> None:
        """SIGKILL a client: a crash. The supervisor starts a successor with a new id."""
        with self._lock:
            client = self._children.get(process)
        if client is None or client.proc.poll() is not None:
            raise HarnessError(f"client process {process} is not running")
        os.kill(client.proc.pid, signal.SIGKILL)

    def processes(self) -> list[int]:
        """Every client process id started so far, in order."""
        with self._lock:
            return sorted(self._children)

    def history_path(self, process: int | str) -> Path:
        return self.processes_dir / f"{process}.jsonl"

    # --- set-up and clients --------------------------------------------------------------

    def setup(self) -> None:
        """The topic: one partition per key, the cluster's replication factor and min ISR
        (the run's ``--replication-factor`` and ``--min-insync-replicas``)."""
        o = self.options
        self.cluster.ensure_topic(o.topic, o.keys, timeout=60)

    def _supervisor_meta(self) -> dict[str, Any]:
        return {"workload": "queue", "role": "supervisor"}

    def _spawn(self, slot: int, replaces: int | None = None) -> Child:
        with self._lock:
            process = self._allocate_process()
            end = self.end_ns if self.end_ns is not None else monotonic_ns()
            cfg = self.options.process_config(
                process, self.cluster.bootstrap, self.history_path(process), end
            )
            cfg.meta = {"slot": slot, "replaces": replaces}
            env = child_env(self.cluster.env)

            def start(logf: IO[bytes], gid: int | None) -> subprocess.Popen[bytes]:
                assert self._client_command is not None
                argv = [*self._client_command, "--config", cfg.to_json()]
                return spawn_command(argv, env, logf, gid)

            log_path = self.logs_dir / f"client-{process}.log"
            return self._launch(slot, process, replaces, cfg.transactional_id, log_path, start)

    def start(self) -> None:
        """Start ``clients`` processes and the thread that replaces the ones that exit."""
        if self._monitor is not None:
            raise HarnessError("clients already started")
        manifest = client_registry.get(self.options.client)
        python = self.options.client_python
        self._client_command = client_registry.command(manifest, "queue", self.cluster, python)
        self.end_ns = monotonic_ns() + int(self.time_limit * 1e9)
        self._start_children(self.options.clients, "queue-supervisor")

    def _remaining(self) -> float:
        return 0.0 if self.end_ns is None else (self.end_ns - monotonic_ns()) / 1e9

    def _may_respawn(self) -> bool:
        return self._remaining() >= MIN_REMAINING_S

    def wait_until_end(self, stop: threading.Event | None = None) -> None:
        """Let the clients run until the time limit (or until ``stop`` is set)."""
        event = stop or threading.Event()
        event.wait(max(0.0, self._remaining()))

    def stop_clients(
        self, grace: float | None = None, *, at_end: bool = True
    ) -> dict[int, int | None]:
        """Stop replacing clients and stop the live ones; returns their exit codes.

        With ``at_end`` the clients end by themselves at the time limit after finishing their
        last op; one still running ``grace`` seconds later is stuck, gets SIGUSR1 (a stack dump
        into its log) and SIGTERM. Without ``at_end`` (the run is cut short) every client gets
        SIGTERM at once, finishes its op and exits. Either way SIGCONT comes first, in case a
        nemesis left a client paused, and SIGKILL ends whatever is left ``grace`` seconds later.
        """
        self._stop_watching()
        grace = 2 * self.options.op_timeout_s + 5 if grace is None else grace
        live = self._unreaped()
        if not live:
            return {}
        for c in live:
            if c.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(c.proc.pid, signal.SIGCONT)
        if at_end:
            self._wait_exit(live, time.monotonic() + max(0.0, self._remaining()) + grace)
        stragglers = [c for c in live if c.proc.poll() is None]
        for c in stragglers:
            with contextlib.suppress(ProcessLookupError):
                if at_end:
                    log.warning("queue client %d still running after the time limit", c.process)
                    os.kill(c.proc.pid, signal.SIGUSR1)  # stack dump into its log
                os.kill(c.proc.pid, signal.SIGTERM)
        self._wait_exit(stragglers, time.monotonic() + (10.0 if at_end else grace))
        for c in stragglers:
            if c.proc.poll() is None:
                log.warning("queue client %d ignored SIGTERM; SIGKILL", c.process)
                c.proc.kill()
                c.proc.wait(timeout=10)
        with self._lock:
            for c in live:
                self._reap(c)
        return {c.process: c.proc.returncode for c in live}

    @staticmethod
    def _wait_exit(clients: list[Child], deadline: float) -> None:
        for c in clients:
            try:
                c.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                continue

    # --- the end of a run ------------------------------------------------------------

    def fence_leftovers(self) -> list[str]:
        """Abort transactions that clients left open by dying (killed, or exited after an op
        with an unknown outcome): ``init_transactions`` with their id makes the coordinator
        finish any commit already requested and abort the rest, so the final drain need not
        wait out ``transaction.timeout.ms`` for the last stable offset to move."""
        from confluent_kafka import Producer

        with self._lock:
            tids = [
                c.transactional_id
                for c in self._children.values()
                if c.transactional_id is not None
                and c.proc.poll() is not None
                and c.proc.returncode not in CLEAN_EXITS
            ]
        if not tids:
            return []
        self._record("invoke", "fence", {"transactional_ids": tids})
        failed: list[list[str]] = []
        for tid in tids:
            producer = Producer(
                secured(
                    {
                        "bootstrap.servers": self.cluster.bootstrap,
                        "transactional.id": tid,
                        "transaction.timeout.ms": self.options.transaction_timeout_ms,
                        "log_level": 0,
                    }
                )
            )
            try:
                producer.init_transactions(self.options.op_timeout_s)
            except Exception as exc:
                failed.append([tid, str(exc)])
            finally:
                producer.flush(1)
        if failed:
            self._record(
                "info", "fence", {"transactional_ids": tids}, {"code": "FENCE", "failed": failed}
            )
        else:
            self._record("ok", "fence", {"transactional_ids": tids})
        return tids

    def end_offsets(self, committed: bool) -> dict[int, int]:
        """Per key: the last stable offset (``committed``) or the high watermark.

        A fresh admin client each time, through the brokers' internal listeners: after a
        broker restart a long-lived client's cached leader epochs made ListOffsets fail with
        FENCED_LEADER_EPOCH for as long as we retried (seen with confluent-kafka 2.16).
        """
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        o = self.options
        admin = AdminClient(
            secured(
                {
                    "bootstrap.servers": self.cluster.internal_bootstrap,
                    "log_level": 0,
                    "socket.timeout.ms": 5000,
                }
            )
        )
        request = {TopicPartition(o.topic, p): OffsetSpec.latest() for p in range(o.keys)}
        futures = admin.list_offsets(request, isolation_level=level, request_timeout=10)
        return {tp.partition: fut.result(timeout=15).offset for tp, fut in futures.items()}

    def wait_settled(self, timeout: float) -> dict[int, int]:
        """Wait until no transaction is open on any key (last stable offset = high watermark)
        and return those end offsets: everything below them is decided."""
        self._record("invoke", "settle", None)
        ends: dict[int, int] = {}

        def settled() -> bool:
            hw = self.end_offsets(committed=False)
            lso = self.end_offsets(committed=True)
            ends.clear()
            ends.update(hw)
            return hw == lso

        try:
            wait_for(settled, timeout=timeout, interval=0.2, what="open transactions to end")
        except WaitTimeout as exc:
            value = sorted([k, v] for k, v in ends.items())
            self._record("info", "settle", value, {"code": "TIMED_OUT", "message": str(exc)})
            raise
        self._record("ok", "settle", sorted([k, v] for k, v in ends.items()))
        return dict(ends)

    def final_reads(self, ends: Mapping[int, int | None], timeout: float) -> bool:
        """Jepsen's final polls: a fresh read_committed consumer, under a new process id,
        assigned to every key from the beginning, polls until it reached each key's end.
        Returns False if the deadline came first (``unseen`` may then be spurious)."""
        process = self._allocate_process()
        with Recorder(
            self.history_path(process),
            process,
            meta={"workload": "queue", "role": "final", "ends": sorted(ends.items())},
        ) as rec:
            complete = read_to_end(
                rec,
                self.cluster.bootstrap,
                self.options.topic,
                ends,
                f"{self.options.effective_group_id}-final-{process}",
                timeout,
            )
        self.final_complete = complete
        return complete

    def finish(self) -> bool:
        """After :meth:`stop_clients`: fence leftovers, wait for open transactions to end,
        read every key to its end. False if any of that timed out."""
        deadline = time.monotonic() + self.options.final_timeout_s
        if self.options.txn:
            self.fence_leftovers()
        settle_for = self.options.transaction_timeout_ms / 1000 + 15
        try:
            ends = self.wait_settled(min(settle_for, max(1.0, deadline - time.monotonic())))
            settled = True
        except WaitTimeout:
            log.warning("transactions still open at the end of the run; reading what is stable")
            settled = False
            try:
                ends = self.end_offsets(committed=True)
            except Exception as exc:
                log.warning("end offsets unknown (%s); reading each key to its first end", exc)
                ends = dict.fromkeys(range(self.options.keys))
        complete = self.final_reads(ends, max(5.0, deadline - time.monotonic()))
        return settled and complete

    def merge(self, meta: dict[str, Any] | None = None) -> Path:
        """Merge every per-process file into ``history.jsonl`` and return its path."""
        with self._lock:
            if self._supervisor is not None:
                self._supervisor.close()
        paths = sorted(self.processes_dir.glob("*.jsonl"))
        out = self.run_dir / HISTORY_NAME
        summary = merge_histories(
            paths,
            out,
            meta={
                "workload": "queue",
                "options": self.options.to_dict(),
                "final_complete": self.final_complete,
                **(meta or {}),
            },
        )
        for note in summary.warnings:
            log.warning("merge: %s", note)
        return out

    def close(self) -> None:
        """Idempotent: no client outlives the workload, every file is closed."""
        self.stop_clients(grace=5.0, at_end=False)
        self._close_files()


def run_phases(
    workload: QueueWorkload,
    faults: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    stop: threading.Event | None = None,
) -> bool:
    """The phases of one queue run on a set-up workload: start the clients, hold ``faults``
    open until the time limit (or ``stop``), stop the clients, then (on a healed cluster)
    fence, settle and read every key to its end. False if the final phase was incomplete."""
    workload.setup()
    workload.start()
    try:
        with faults():
            workload.wait_until_end(stop)
    finally:
        codes = workload.stop_clients(at_end=stop is None or not stop.is_set())
        log.info("queue clients stopped: %s", codes)
    complete = workload.finish()
    if not complete:
        log.warning("queue final phase incomplete; see %s", workload.run_dir)
    return complete


def run_queue(
    cluster: Cluster,
    store_dir: Path,
    options: QueueOptions | Mapping[str, Any],
    *,
    time_limit: float = 30.0,
    during: Callable[[QueueWorkload], Any] | None = None,
    stop: threading.Event | None = None,
) -> Path:
    """Run the whole queue workload on a started cluster and return the merged history.

    ``during`` (optional) is called once the clients run, with the workload, in this thread;
    it is how a caller injects faults or watches progress (it may return early; the run lasts
    the time limit either way, unless ``stop`` is set). The history is merged even if a phase
    fails, so whatever happened is on disk. ``store_dir`` must not hold an earlier run: history
    files are created exclusively, so two runs can never be mixed into one history.
    """
    opts = options if isinstance(options, QueueOptions) else QueueOptions.from_dict(options)
    store = Path(store_dir)
    store.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with QueueWorkload(opts, cluster, store, time_limit) as workload:

        @contextlib.contextmanager
        def faults() -> Any:
            if during is not None:
                during(workload)
            yield

        try:
            run_phases(workload, faults, stop)
        finally:
            path = workload.merge({"seconds": round(time.monotonic() - t0, 3)})
    return path


# --- the workload's declaration (harness.run.workloads composes it with its driver) -----


def _micro_ops(op: Mapping[str, Any], kinds: tuple[str, ...]) -> list[list[Any]] | None:
    value = op.get("value")
    if op["f"] not in kinds or not isinstance(value, list):
        return None
    return [m for m in value if isinstance(m, list) and m and m[0] in ("send", "poll")]


def _first_polls() -> Callable[[Mapping[str, Any]], int | None]:
    """Values polled for the first time: consumers share keys and the final reader reads
    everything again, so counting every record polled would exceed what was ever sent."""
    seen: set[Any] = set()

    def count(op: Mapping[str, Any]) -> int | None:
        micro = _micro_ops(op, ("poll", "txn"))
        if micro is None:
            return None
        polls = [m[1] for m in micro if m[0] == "poll" and len(m) > 1 and isinstance(m[1], dict)]
        values = {
            (key, rec[1])
            for result in polls
            for key, records in result.items()
            for rec in records
            if isinstance(rec, list) and len(rec) > 1
        }
        new = values - seen
        seen.update(new)
        return len(new)

    return count


def _sent(op: Mapping[str, Any]) -> int | None:
    micro = _micro_ops(op, ("send", "txn"))
    return None if micro is None else sum(1 for m in micro if m[0] == "send")


SPEC = WorkloadSpec(
    name="queue",
    description="Jepsen's queue workload: sends and polls, in transactions or not",
    options_type=QueueOptions,
    cli=(
        Option("--sub-via", "sub_via", "how consumers get partitions", choices=SUB_VIAS),
        Option("--processors", "clients", "client processes kept alive", int),
        Option("--no-txn", "txn", "plain sends and polls, no transactions", action="store_false"),
        Option("--transaction-timeout-ms", "transaction_timeout_ms", type=int, metavar="MS"),
        Option("--session-timeout-ms", "session_timeout_ms", type=int, metavar="MS"),
        *CLIENT_KNOBS,
        Option(
            "--client",
            "client",
            "the client under test (its manifest: workloads/manifests/CLIENT.toml)",
            choices=client_registry.names("queue"),
        ),
    ),
    checker_suites=("queue",),
    isolate=lambda tag: {"topic": f"queue-{tag}"},
    broker_settings=lambda o: group_broker_settings(o.group_protocol, o.session_timeout_ms),
    needs_kafka=lambda o: group_protocol_needs(o.group_protocol),
    figures=Figures(
        throughput=_first_polls,
        fed=lambda: _sent,
        latency_fs=("send", "poll", "txn"),
        throughput_label="values/s\nfirst polled",
        latency_label="op latency (s)\n(send, poll, txn)",
        backlog_label="backlog\n(sent - polled)",
        title="values polled, op latency and backlog (sent, not yet polled), with fault bands",
    ),
    variants=(Variant("queue"),),
    load_started=lambda op: isinstance(op["process"], int) and op["f"] in ("send", "poll", "txn"),
)
