"""A consume-transform-produce pipeline's supervisor: what the eos and streams workloads share.

Both run K processors of one consumer group (an eos processor, a Kafka Streams instance), fed
by the seeder (``workloads.seeder``), each an OS process of its own in its own session,
spawned with the cluster's environment so the reaper can find it if the harness dies.
:class:`PipelineWorkload` owns that common life: the seeder, the processors kept alive per
slot, the wait for a stable group, the signals faults and tests send them, the drain and the
final reads. What a processor is (its command line and config) and what the final reads
cover besides the output are the subclass's.

Keeping K alive is what makes a processor crash a realistic fault: when an instance exits
(fenced, killed, crashed) a fresh instance with a new process id takes its slot, exactly as
a stream-processing framework would restart a failed task. Spawns and exits are recorded
under process ``"supervisor"``; the final observations go under ``"final"``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from common.errors import HarnessError
from common.procfs import process_state
from common.waits import WaitTimeout, wait_for
from history import Recorder
from workloads import finalreads
from workloads.drive import Outcome
from workloads.processes import NotAuthorized, Supervisor
from workloads.seeder import SeedResult, seed_in_child

if TYPE_CHECKING:
    from history.clientcontrol import ClientControl
    from workloads.base import ClusterAccess as Cluster
    from workloads.drive import Drive

log = logging.getLogger("workloads.pipeline")

#: An instance that dies sooner than this after its start delays its successor by as much,
#: so a processor that cannot start (bad config, broker gone) does not spin the CPU.
MIN_LIFETIME_S = 2.0
MONITOR_INTERVAL_S = 0.2


class PipelineOptions(Protocol):
    """What the shared supervisor reads of a pipeline workload's options."""

    @property
    def processors(self) -> int: ...
    @property
    def partitions(self) -> int: ...
    @property
    def values(self) -> int: ...
    @property
    def seed_batch(self) -> int: ...
    @property
    def poison_every(self) -> int: ...
    @property
    def poison_batch(self) -> int: ...
    @property
    def transaction_timeout_ms(self) -> int: ...
    @property
    def drain_timeout_s(self) -> float: ...
    @property
    def stop_timeout_s(self) -> float: ...
    @property
    def find_hanging(self) -> bool: ...
    @property
    def input_topic(self) -> str: ...
    @property
    def output_topic(self) -> str: ...
    @property
    def group_id(self) -> str: ...
    @property
    def txn_id_prefix(self) -> str: ...
    def validate(self) -> None: ...
    def to_dict(self) -> dict[str, Any]: ...


OptionsT = TypeVar("OptionsT", bound=PipelineOptions)


class PipelineWorkload(Supervisor, Generic[OptionsT]):
    """One pipeline run's client side. Use as a context manager so processors never outlive it.

    Subclasses set :attr:`workload_name`, implement ``_spawn`` and :meth:`_processor_command`,
    and say what the final reads cover (:meth:`_written_topics`, :attr:`read_input`).
    """

    #: Whether the final reads include the input topic (what the processors consumed).
    read_input: ClassVar[bool] = False
    id_key = "instance"
    exit_f = "processor-exit"
    min_lifetime_s = MIN_LIFETIME_S
    monitor_interval_s = MONITOR_INTERVAL_S

    def __init__(self, options: OptionsT, cluster: Cluster, run_dir: Path) -> None:
        options.validate()
        if cluster.dir is None:
            raise HarnessError("the cluster must be started before the workload")
        self.options = options
        self.cluster = cluster
        super().__init__(run_dir)
        self.seed_result: SeedResult | None = None
        #: The processor's command line, resolved before the first spawn (None: the
        #: subclass spawns a Python module): building a client may fail, and must not fail
        #: half-way into a spawn.
        self._client_command: list[str] | None = None

    # --- feeding -----------------------------------------------------------------------

    def seed(self, seconds: float, stop: threading.Event | None = None) -> SeedResult:
        """Run the seeder (its own OS process), its sends spread over ``seconds``; wait for it."""
        self.seed_result = seed_in_child(
            self.cluster, self.processes_dir, self.logs_dir, self.options, seconds, stop
        )
        return self.seed_result

    # --- processors ------------------------------------------------------------------

    def _processor_command(self) -> list[str] | None:
        """The processor's command line (its ``--config`` is added per spawn), or None when
        ``_spawn`` starts a Python module itself."""
        raise NotImplementedError

    def start_processors(self) -> None:
        """Start K instances (slots 0..K-1) and the thread that keeps K alive."""
        if self._monitor is not None:
            raise HarnessError("processors already started")
        self._client_command = self._processor_command()
        self._start_children(self.options.processors, f"{self.workload_name}-supervisor")

    def wait_stable(self, timeout: float = 60.0) -> None:
        """Wait until the group is Stable with one member per slot: the pipeline is ready."""
        self._wait_group_stable(self.options.processors, timeout)

    def _wait_group_stable(self, want: int, timeout: float) -> None:
        """Wait until the group is Stable with ``want`` members."""
        group = self.options.group_id

        def stable() -> bool:
            self.check_refused()
            try:
                state, members = finalreads.group_state(self.cluster, group)
            except finalreads.ReaderCrashed:
                return False
            return state == "STABLE" and members == want

        wait_for(
            stable,
            timeout=timeout,
            what=f"group {group} stable with {want} members",
            fatal=(NotAuthorized,),
        )

    def processors(self) -> dict[int, subprocess.Popen[bytes]]:
        """The live instances by process id (history process id = instance number)."""
        return {i: inst.proc for i, inst in self._live().items()}

    def _signal(self, instance: int, sig: signal.Signals) -> subprocess.Popen[bytes]:
        with self._lock:
            inst = self._children.get(instance)
        if inst is None:
            raise HarnessError(f"no processor instance {instance}")
        if inst.proc.poll() is not None:
            raise HarnessError(f"processor instance {instance} has already exited")
        os.kill(inst.proc.pid, sig)
        return inst.proc

    def kill_processor(self, instance: int) -> None:
        """SIGKILL: a crash. The supervisor notices and starts a successor in the same slot."""
        self._signal(instance, signal.SIGKILL)

    def pause_processor(self, instance: int) -> None:
        """SIGSTOP, verified: returns once the kernel reports the instance stopped."""
        proc = self._signal(instance, signal.SIGSTOP)
        wait_for(
            lambda: process_state(proc.pid) in ("T", None),
            timeout=10,
            interval=0.005,
            what=f"processor {instance} to reach state T",
        )

    def resume_processor(self, instance: int) -> None:
        proc = self._signal(instance, signal.SIGCONT)
        wait_for(
            lambda: process_state(proc.pid) != "T",
            timeout=10,
            interval=0.005,
            what=f"processor {instance} to leave state T",
        )

    def paused(self) -> list[int]:
        """Instances currently stopped (SIGSTOP by a nemesis, or by a test hook)."""
        return [i for i, inst in self._live().items() if process_state(inst.proc.pid) == "T"]

    def stop_processors(self, timeout: float | None = None) -> dict[int, int | None]:
        """SIGTERM every live instance (SIGCONT first if stopped), SIGKILL stragglers."""
        timeout = self.options.stop_timeout_s if timeout is None else timeout
        return self._stop_children(timeout, "instances")

    # --- the end of a run ------------------------------------------------------------

    def drain(self, rec: Recorder, timeout: float | None = None) -> bool:
        """Wait (bounded) until the group has committed past every acknowledged input value."""
        o = self.options
        timeout = o.drain_timeout_s if timeout is None else timeout
        ends = dict(self.seed_result.ends) if self.seed_result else {}
        targets = sorted([p, end] for p, end in ends.items())
        rec.invoke("drain", {"group": o.group_id, "topic": o.input_topic, "targets": targets})
        t0 = time.monotonic()
        last: dict[tuple[str, int], int] = {}

        def drained() -> bool:
            try:
                offsets = finalreads.group_offsets(self.cluster, o.group_id)
            except finalreads.ReaderCrashed as exc:
                # A coordinator moving after a fault: ask again until the drain's deadline.
                log.info("drain: group offsets not available yet: %s", exc)
                return False
            last.clear()
            last.update(offsets)
            return all(last.get((o.input_topic, p), -1) >= end for p, end in ends.items())

        value: dict[str, Any] = {"group": o.group_id, "topic": o.input_topic, "targets": targets}

        def observed() -> list[list[int]]:
            return sorted([p, off] for (t, p), off in last.items() if t == o.input_topic)

        try:
            wait_for(drained, timeout=timeout, interval=0.5, what="the pipeline to drain")
        except WaitTimeout as exc:
            value["offsets"] = observed()
            rec.info("drain", value, {"code": "TIMED_OUT", "message": str(exc)})
            return False
        value["offsets"] = observed()
        value["seconds"] = round(time.monotonic() - t0, 3)
        rec.ok("drain", value)
        return True

    def _written_topics(self) -> tuple[str, ...]:
        """The topics the processors write: settled, read at both isolation levels and
        watermarked at the end."""
        return (self.options.output_topic,)

    def final_state(self, rec: Recorder) -> None:
        """Everything Kafka holds at the end, through the brokers' internal listeners: the
        written topics (and the input, with :attr:`read_input`) at both isolation levels once
        open transactions ended, the group's committed offsets, the watermarks and any
        hanging transaction."""
        o = self.options
        bootstrap = self.cluster.internal_bootstrap
        written = self._written_topics()
        for topic in written:
            finalreads.record_settle(rec, bootstrap, topic, o.partitions, o.transaction_timeout_ms)
        for topic in ((o.input_topic,) if self.read_input else ()) + written:
            finalreads.record_reads(rec, bootstrap, topic, o.partitions)
        finalreads.record_group_offsets(rec, self.cluster, o.group_id)
        for topic in (o.input_topic, *written):
            finalreads.record_watermarks(rec, bootstrap, topic, o.partitions)
        if o.find_hanging:
            finalreads.record_hanging(rec, self.cluster, o.transaction_timeout_ms)

    def finish(self) -> bool:
        """Drain, stop the processors, record the final state; ``False`` if the drain timed out."""
        meta = {"workload": self.workload_name, "role": "final"}
        with Recorder(self.processes_dir / "final.jsonl", "final", meta=meta) as rec:
            drained = self.drain(rec)
            self.stop_processors()
            self.final_state(rec)
        return drained

    def close(self) -> None:
        """Idempotent: no processor outlives the workload, every file is closed."""
        self.stop_processors()
        self._close_files()


def drive_pipeline(
    d: Drive,
    workload: PipelineWorkload[Any],
    clients: ClientControl,
    *,
    stable_timeout: float,
    feed_first: bool = False,
) -> Outcome:
    """A pipeline's phases, the eos and streams drivers' alike: topics, processors up and
    their group stable, the faults while the seeder feeds the input for the time limit, then
    the drain and the final reads. ``feed_first``: the input is seeded before the processors
    start, for a client that exits once it has processed what its partitions held when they
    were assigned (Kafka's Java copier); the faults then act while it works."""
    try:
        workload.setup()
        if feed_first:
            workload.seed(d.options.time_limit, threading.Event())
        workload.start_processors()
        if not feed_first:
            workload.wait_stable(timeout=stable_timeout)
        with d.faults(workload, clients):
            if not feed_first:
                workload.seed(d.options.time_limit, threading.Event())
        workload.check_refused()
        drained = workload.finish()
    finally:
        workload.close()
    seeded = workload.seed_result.seconds if workload.seed_result else 0
    return Outcome(drained, {"seeded_seconds": round(seeded, 3)})
