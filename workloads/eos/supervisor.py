"""The eos workload's supervisor: topics, seeder, K processors kept alive, final state.

The harness composes it with a cluster and (elsewhere) nemeses; this module knows nothing
about faults beyond exposing the processors so a nemesis can kill, pause and resume them.
Processors are separate OS processes (``workloads.eos.processor``) in their own sessions,
spawned with the cluster's environment so the reaper can find them if the harness dies.

Keeping K alive is what makes a processor crash a realistic fault: when an instance exits
(fenced, killed, crashed) a fresh instance with a new process id takes its slot, exactly as
a stream-processing framework would restart a failed task. The supervisor records spawns and
exits under process ``"supervisor"``; the final observations go under ``"final"``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from common.errors import HarnessError
from common.procfs import catches_signal, process_state
from common.waits import WaitTimeout, wait_for
from history import Recorder
from workloads import client_registry
from workloads import finalreads
from workloads.clients import CLIENT_KNOBS, group_broker_settings, group_protocol_needs
from workloads.eos.config import (
    CLIENTS,
    TXN_ID_STRATEGIES,
    VARIANTS,
    EosOptions,
    arm_path,
    fired_path,
)
from workloads.eos.report import REPORT
from workloads.eos.seeder import SeedResult, result_from_history
from workloads.java_clients import EOS_PROCESSOR, JVM_OPTS
from workloads.processes import (
    PROJECT_ROOT,
    Child,
    Supervisor,
    child_env,
    in_group,
    spawn_command,
    spawn_module,
)
from workloads.spec import Figures, Option, Variant, WorkloadSpec

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster

log = logging.getLogger("workloads.eos.supervisor")

#: An instance that dies sooner than this after its start delays its successor by as much,
#: so a processor that cannot start (bad config, broker gone) does not spin the CPU.
MIN_LIFETIME_S = 2.0
MONITOR_INTERVAL_S = 0.2

#: A processor instance (its ``process`` is the instance number, its history process id).
_Instance = Child


class EosWorkload(Supervisor):
    """One eos test's workload side. Use as a context manager so processors never outlive it."""

    id_key = "instance"
    exit_f = "processor-exit"
    min_lifetime_s = MIN_LIFETIME_S
    monitor_interval_s = MONITOR_INTERVAL_S

    def __init__(self, options: EosOptions, cluster: Cluster, run_dir: Path) -> None:
        options.validate()
        if cluster.dir is None:
            raise HarnessError("the cluster must be started before the workload")
        self.options = options
        self.cluster = cluster
        super().__init__(run_dir)
        self.seed_result: SeedResult | None = None
        #: What the client's manifest says it is and can do (``workloads/manifests``).
        self.manifest = client_registry.get(options.client)
        #: The processor's command line of every client but python and copier (the Java
        #: build for ``java``, a manifest's ``start.eos`` otherwise), resolved before the first
        #: spawn: building a client may fail, and must not fail half-way into a spawn.
        self._client_command: list[str] | None = None

    def __enter__(self) -> EosWorkload:
        return self

    @property
    def _instances(self) -> dict[int, Child]:
        """Every instance ever started, by instance number."""
        return self._children

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- set-up and feeding ----------------------------------------------------------

    def setup(self) -> None:
        """Input and output topics: P partitions, the cluster's replication factor and min
        ISR (the run's ``--replication-factor`` and ``--min-insync-replicas``)."""
        o = self.options
        for topic in (o.input_topic, o.output_topic):
            self.cluster.ensure_topic(topic, o.partitions, timeout=60)

    def seed(self, seconds: float, stop: threading.Event | None = None) -> SeedResult:
        """Run the seeder (its own OS process), its sends spread over ``seconds``; wait for it."""
        o = self.options
        history = self.processes_dir / "seeder.jsonl"
        config = {
            "bootstrap": self.cluster.bootstrap,
            "topic": o.input_topic,
            "partitions": o.partitions,
            "history_path": str(history),
            "values": o.values,
            "batch": o.seed_batch,
            "seconds": seconds,
            "poison_every": o.poison_every,
            "poison_batch": o.poison_batch,
            "poison_txn_id": f"{o.txn_id_prefix}-seeder-poison",
            "meta": {"topic": o.input_topic, "partitions": o.partitions},
        }
        env = child_env(self.cluster.env)
        stop = stop or threading.Event()
        t0 = time.monotonic()
        with open(self.logs_dir / "seeder.log", "ab") as logf:
            proc = spawn_module("workloads.eos.seeder", ["--config", json.dumps(config)], env, logf)
            try:
                while proc.poll() is None:
                    if stop.wait(0.2):
                        proc.terminate()
                        proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if proc.returncode != 0:
            log.warning("seeder exited with %s; see %s", proc.returncode, self.logs_dir)
        self.seed_result = result_from_history(history, time.monotonic() - t0)
        return self.seed_result

    # --- processors ------------------------------------------------------------------

    def _supervisor_meta(self) -> dict[str, Any]:
        return {"workload": "eos", "role": "supervisor", **self.options.to_dict()}

    def _spawn(self, slot: int, replaces: int | None = None) -> Child:
        with self._lock:
            instance = self._allocate_process()
            cfg = self.options.processor_config(
                instance,
                slot,
                self.cluster.bootstrap,
                str(self.processes_dir / f"{instance}.jsonl"),
            )
            if replaces is None:
                cfg.hook = self.options.hooks.get(slot)
            cfg.meta = {"run_dir": str(self.run_dir)}
            env = child_env(self.cluster.env)

            def start(logf: IO[bytes], gid: int | None) -> subprocess.Popen[bytes]:
                if self.options.client == "copier":
                    return self._spawn_copier(instance, cfg, env, logf, gid)
                if self._client_command is not None:
                    argv = [*self._client_command, "--config", cfg.to_json()]
                    return spawn_command(argv, env, logf, gid)
                return spawn_module(
                    "workloads.eos.processor",
                    ["--config", cfg.to_json()],
                    env,
                    logf,
                    gid,
                    python=self.options.client_python,
                )

            log_path = self.logs_dir / f"processor-{instance}.log"
            return self._launch(slot, instance, replaces, cfg.transactional_id, log_path, start)

    def _spawn_copier(
        self, instance: int, cfg: Any, env: dict[str, str], logf: IO[bytes], gid: int | None
    ) -> subprocess.Popen[bytes]:
        """Kafka's Java TransactionalMessageCopier as this slot's processor (see eos_copier),
        as group ``gid`` when given."""
        from workloads.eos.copier import copier_command, start_copier

        o = self.options
        cmd = copier_command(
            self.cluster.tool_command("TransactionalMessageCopier", JVM_OPTS),
            bootstrap=self.cluster.bootstrap,
            input_topic=o.input_topic,
            output_topic=o.output_topic,
            group_id=o.group_id,
            transactional_id=cfg.transactional_id,
            txn_size=o.txn_size,
            transaction_timeout_ms=o.transaction_timeout_ms,
            random_aborts=o.abort_probability > 0,
        )
        meta = {"instance": instance, "slot": cfg.slot, "transactional_id": cfg.transactional_id}
        proc, _reader = start_copier(
            in_group(cmd, gid), env, logf, Path(cfg.history_path), instance, meta, PROJECT_ROOT
        )
        return proc

    def start_processors(self) -> None:
        """Start K instances (slots 0..K-1) and the thread that keeps K alive."""
        if self._monitor is not None:
            raise HarnessError("processors already started")
        if self.options.client == "java":
            self._client_command = self.cluster.java_client_command(EOS_PROCESSOR, JVM_OPTS)
        elif not self.manifest.builtin:
            self._client_command = client_registry.command(self.manifest, "eos")
        self._start_children(self.options.processors, "eos-supervisor")

    def wait_stable(self, timeout: float = 60.0) -> None:
        """Wait until the group is Stable with one member per slot: the pipeline is ready."""

        self._wait_group_stable(self.options.processors, timeout)

    def _wait_group_stable(self, want: int, timeout: float) -> None:
        """Wait until the group is Stable with ``want`` members."""
        group = self.options.group_id

        def stable() -> bool:
            try:
                state, members = finalreads.group_state(self.cluster, group)
            except finalreads.ReaderCrashed:
                return False
            return state == "STABLE" and members == want

        wait_for(stable, timeout=timeout, what=f"group {group} stable with {want} members")

    def processors(self) -> dict[int, subprocess.Popen[bytes]]:
        """The live instances by process id (history process id = instance number)."""
        return {i: inst.proc for i, inst in self._live().items()}

    def processor_pids(self) -> dict[int, int]:
        """Live instances' pids (what a nemesis pauses or kills)."""
        return {i: p.pid for i, p in self.processors().items()}

    def transactional_ids(self) -> dict[int, str]:
        """Live instances' transactional ids (what a hijack fences)."""
        live = self._live()
        return {i: tid for i, inst in live.items() if (tid := inst.transactional_id) is not None}

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        """Arm a protocol moment in a live processor: it kills or stops itself there.

        The moment goes in a file beside the instance's history and SIGUSR2 tells a Python
        processor to read it (any client whose manifest arms by ``signal``); an empty ``at``
        disarms. A Java processor gets no signal: HotSpot
        uses SIGUSR2 itself (a stray one crashes the JVM), so it looks at the file at each hook
        point instead. A stale fired file is removed first, so :meth:`fired_hook` reports only
        this arming.
        """
        pid = self.processor_pids().get(instance)
        signals = self.manifest.abilities.arm == "signal"
        if pid is None or (signals and not catches_signal(pid, signal.SIGUSR2)):
            raise HarnessError(f"processor instance {instance} cannot be armed yet")
        history = str(self.processes_dir / f"{instance}.jsonl")
        fired_path(history).unlink(missing_ok=True)
        body = json.dumps({"at": at, "action": action, "delay_ms": delay_ms}) if at else ""
        tmp = arm_path(history).with_suffix(".tmp")
        tmp.write_text(body)
        tmp.replace(arm_path(history))
        if signals:
            self._signal(instance, signal.SIGUSR2)

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        """The armed moment that fired in ``instance`` (point, action, txn, pid), or None."""
        try:
            return json.loads(fired_path(str(self.processes_dir / f"{instance}.jsonl")).read_text())
        except (OSError, ValueError):
            return None

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

    def final_state(self, rec: Recorder) -> None:
        """Everything Kafka holds at the end, through the brokers' internal listeners."""
        o = self.options
        bootstrap = self.cluster.internal_bootstrap
        finalreads.record_settle(
            rec, bootstrap, o.output_topic, o.partitions, o.transaction_timeout_ms
        )
        finalreads.record_reads(rec, bootstrap, o.output_topic, o.partitions)
        finalreads.record_group_offsets(rec, self.cluster, o.group_id)
        for topic in (o.input_topic, o.output_topic):
            finalreads.record_watermarks(rec, bootstrap, topic, o.partitions)
        if o.find_hanging:
            finalreads.record_hanging(rec, self.cluster, o.transaction_timeout_ms)

    def finish(self) -> bool:
        """Drain, stop the processors, record the final state; ``False`` if the drain timed out."""
        with Recorder(
            self.processes_dir / "final.jsonl", "final", meta={"workload": "eos", "role": "final"}
        ) as rec:
            drained = self.drain(rec)
            self.stop_processors()
            self.final_state(rec)
        return drained

    def close(self) -> None:
        """Idempotent: no processor outlives the workload, every file is closed."""
        self.stop_processors()
        self._close_files()


# --- the workload's declaration (harness.run.workloads composes it with its driver) -----


def _committed_outputs(op: Mapping[str, Any]) -> int | None:
    value = op.get("value")
    if op["f"] != "txn" or not isinstance(value, dict):
        return None
    return len(value.get("outputs") or [])


def _seeded_values(op: Mapping[str, Any]) -> int | None:
    value = op.get("value")
    if op["process"] != "seeder" or op["f"] != "send" or not isinstance(value, dict):
        return None
    return len(value.get("values") or [])


SPEC = WorkloadSpec(
    name="eos",
    description="consume-transform-produce with transactions (KIP-447)",
    options_type=EosOptions,
    cli=(
        Option("--variant", "variant", choices=VARIANTS),
        Option(
            "--client",
            "client",
            "python: confluent-kafka processors; java: the same processors on the Java client; "
            "copier: Kafka's TransactionalMessageCopier; franz-go: Go processors on franz-go "
            "(workloads/manifests lists every client)",
            choices=CLIENTS,
        ),
        Option("--processors", "processors", "processor instances kept alive", int, metavar="K"),
        Option("--partitions", "partitions", "input and output partitions", int, metavar="P"),
        Option("--values", "values", "values to seed", int, metavar="N"),
        Option("--txn-size", "txn_size", "max inputs per transaction", int, metavar="N"),
        Option("--commit-interval-ms", "commit_interval_ms", type=int, metavar="MS"),
        Option("--abort-probability", "abort_probability", type=float, metavar="P"),
        Option("--txn-id-strategy", "txn_id_strategy", choices=TXN_ID_STRATEGIES),
        Option("--transaction-timeout-ms", "transaction_timeout_ms", type=int, metavar="MS"),
        Option("--session-timeout-ms", "session_timeout_ms", type=int, metavar="MS"),
        *CLIENT_KNOBS,
    ),
    checker_suites=("eos",),
    isolate=lambda tag: {"name_suffix": f"-{tag}"},
    broker_settings=lambda o: group_broker_settings(o.group_protocol, o.session_timeout_ms),
    needs_kafka=lambda o: group_protocol_needs(o.group_protocol),
    figures=Figures(
        throughput=lambda: _committed_outputs,
        fed=lambda: _seeded_values,
        latency_fs=("txn",),
        throughput_label="records/s\ncommitted",
        latency_label="txn latency (s)",
        backlog_label="consumer lag\n(seeded - committed)",
        title="throughput, transaction latency and consumer lag, with fault bands",
    ),
    report=REPORT,
    variants=(
        Variant("eos"),
        Variant("at-least-once", {"variant": "at-least-once"}, expect="duplicate"),
        Variant("offsets-outside-txn", {"variant": "offsets-outside-txn"}, expect="duplicate"),
        Variant("read-uncommitted", {"variant": "read-uncommitted"}, expect="aborted-read"),
        Variant("no-rewind", {"variant": "no-rewind"}, expect="lost"),
    ),
    # The pipeline is being fed, or a processor committed.
    load_started=lambda op: (
        (op["process"] == "seeder" and op["f"] == "send")
        or (isinstance(op["process"], int) and op["f"] == "txn")
    ),
)
