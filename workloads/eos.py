"""The eos workload's supervisor: topics, seeder, K processors kept alive, final state.

The harness composes it with a cluster and (elsewhere) nemeses; this module knows nothing
about faults beyond exposing the processors so a nemesis can kill, pause and resume them.
Processors are separate OS processes (``workloads.eos_processor``) in their own sessions,
spawned with the cluster's environment so the reaper can find them if the harness dies.

Keeping K alive is what makes a processor crash a realistic fault: when an instance exits
(fenced, killed, crashed) a fresh instance with a new process id takes its slot, exactly as
a stream-processing framework would restart a failed task. The supervisor records spawns and
exits under process ``"supervisor"``; the final observations go under ``"final"``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.node import process_state
from harness.readiness import ensure_topic
from harness.waits import WaitTimeout, wait_for
from history import Recorder
from workloads import eos_final
from workloads.eos_config import EosOptions
from workloads.eos_seeder import SeedResult, result_from_history

if TYPE_CHECKING:
    from harness.cluster import Cluster

log = logging.getLogger("workloads.eos")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: An instance that dies sooner than this after its start delays its successor by as much,
#: so a processor that cannot start (bad config, broker gone) does not spin the CPU.
MIN_LIFETIME_S = 2.0
MONITOR_INTERVAL_S = 0.2


@dataclass
class _Instance:
    instance: int
    slot: int
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float
    transactional_id: str | None = None
    reaped: bool = False


class EosWorkload:
    """One eos test's workload side. Use as a context manager so processors never outlive it."""

    def __init__(self, options: EosOptions, cluster: Cluster, run_dir: Path) -> None:
        options.validate()
        if cluster.dir is None:
            raise HarnessError("the cluster must be started before the workload")
        self.options = options
        self.cluster = cluster
        self.run_dir = Path(run_dir)
        self.processes_dir = self.run_dir / "processes"
        self.logs_dir = self.run_dir / "logs"
        self.processes_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._instances: dict[int, _Instance] = {}  # every instance ever started
        self._slots: dict[int, int] = {}  # slot -> its current instance
        self._next_instance = 0
        self._keep_alive = False
        self._stop_monitor = threading.Event()
        self._monitor: threading.Thread | None = None
        self._supervisor: Recorder | None = None
        self.seed_result: SeedResult | None = None

    def __enter__(self) -> EosWorkload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- set-up and feeding ----------------------------------------------------------

    def setup(self) -> None:
        """Input and output topics: P partitions, RF 3, min.insync.replicas 2 (by default)."""
        o = self.options
        config = {"min.insync.replicas": str(o.min_insync)}
        for topic in (o.input_topic, o.output_topic):
            ensure_topic(self.cluster, topic, o.partitions, o.replication, config, timeout=60)

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
        env = dict(self.cluster.env)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(PROJECT_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        stop = stop or threading.Event()
        t0 = time.monotonic()
        with open(self.logs_dir / "seeder.log", "ab") as logf:
            proc = subprocess.Popen(
                [sys.executable, "-m", "workloads.eos_seeder", "--config", json.dumps(config)],
                env=env,
                cwd=PROJECT_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
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

    def _record(self, type_: str, f: str, value: Any) -> None:
        with self._lock:
            if self._supervisor is None:
                self._supervisor = Recorder(
                    self.processes_dir / "supervisor.jsonl",
                    "supervisor",
                    meta={"workload": "eos", "role": "supervisor", **self.options.to_dict()},
                )
            self._supervisor.record(type_, f, value)  # type: ignore[arg-type]

    def _spawn(self, slot: int, replaces: int | None = None) -> _Instance:
        with self._lock:
            instance = self._next_instance
            self._next_instance += 1
            cfg = self.options.processor_config(
                instance,
                slot,
                self.cluster.bootstrap,
                str(self.processes_dir / f"{instance}.jsonl"),
            )
            if replaces is None:
                cfg.hook = self.options.hooks.get(slot)
            cfg.meta = {"run_dir": str(self.run_dir)}
            value = {
                "slot": slot,
                "instance": instance,
                "transactional_id": cfg.transactional_id,
                "replaces": replaces,
            }
            self._record("invoke", "spawn", value)
            env = dict(self.cluster.env)
            env["PYTHONPATH"] = os.pathsep.join(
                [str(PROJECT_ROOT), *filter(None, [env.get("PYTHONPATH")])]
            )
            logf = open(self.logs_dir / f"processor-{instance}.log", "ab")  # noqa: SIM115
            if self.options.client == "java":
                proc = self._spawn_copier(instance, cfg, env, logf)
            else:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "workloads.eos_processor", "--config", cfg.to_json()],
                    env=env,
                    cwd=PROJECT_ROOT,
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            inst = _Instance(instance, slot, proc, logf, time.monotonic(), cfg.transactional_id)
            self._instances[instance] = inst
            self._slots[slot] = instance
            self._record("ok", "spawn", {**value, "pid": proc.pid})
            return inst

    def _spawn_copier(
        self, instance: int, cfg: Any, env: dict[str, str], logf: IO[bytes]
    ) -> subprocess.Popen[bytes]:
        """Kafka's Java TransactionalMessageCopier as this slot's processor (see eos_copier)."""
        from harness.coordinators import tools_log_option
        from workloads.eos_copier import copier_command, start_copier

        install = self.cluster.install
        assert install is not None
        o = self.options
        cmd = copier_command(
            install.java,
            install.classpath,
            tools_log_option(install),
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
            cmd, env, logf, Path(cfg.history_path), instance, meta, PROJECT_ROOT
        )
        return proc

    def _reap(self, inst: _Instance) -> None:
        """Record that an instance is gone (exit status; negative = killed by that signal)."""
        value = {"slot": inst.slot, "instance": inst.instance, "pid": inst.proc.pid}
        self._record("invoke", "processor-exit", value)
        self._record("ok", "processor-exit", {**value, "returncode": inst.proc.returncode})
        inst.reaped = True
        inst.log.close()

    def start_processors(self) -> None:
        """Start K instances (slots 0..K-1) and the thread that keeps K alive."""
        if self._monitor is not None:
            raise HarnessError("processors already started")
        for slot in range(self.options.processors):
            self._spawn(slot)
        self._keep_alive = True
        self._monitor = threading.Thread(target=self._watch, name="eos-supervisor", daemon=True)
        self._monitor.start()

    def _watch(self) -> None:
        respawn_at: dict[int, float] = {}
        while not self._stop_monitor.wait(MONITOR_INTERVAL_S):
            with self._lock:
                if not self._keep_alive:
                    return
                for slot, instance in list(self._slots.items()):
                    inst = self._instances[instance]
                    if inst.proc.poll() is None:
                        continue
                    if not inst.reaped:
                        self._reap(inst)
                        lived = time.monotonic() - inst.started
                        respawn_at[slot] = time.monotonic() + max(0.0, MIN_LIFETIME_S - lived)
                    if time.monotonic() >= respawn_at.get(slot, 0.0):
                        respawn_at.pop(slot, None)
                        self._spawn(slot, replaces=instance)

    def wait_stable(self, timeout: float = 60.0) -> None:
        """Wait until the group is Stable with one member per slot: the pipeline is ready."""

        group = self.options.group_id
        want = self.options.processors

        def stable() -> bool:
            try:
                state, members = eos_final.group_state(self.cluster, group)
            except eos_final.ReaderCrashed:
                return False
            return state == "STABLE" and members == want

        wait_for(stable, timeout=timeout, what=f"group {group} stable with {want} members")

    def processors(self) -> dict[int, subprocess.Popen[bytes]]:
        """The live instances by process id (history process id = instance number)."""
        with self._lock:
            return {
                i: self._instances[i].proc
                for i in self._slots.values()
                if self._instances[i].proc.poll() is None
            }

    def processor_pids(self) -> dict[int, int]:
        """Live instances' pids (what a nemesis pauses or kills)."""
        return {i: p.pid for i, p in self.processors().items()}

    def transactional_ids(self) -> dict[int, str]:
        """Live instances' transactional ids (what a hijack fences)."""
        with self._lock:
            live = self.processors()
            return {
                i: tid for i in live if (tid := self._instances[i].transactional_id) is not None
            }

    def _signal(self, instance: int, sig: signal.Signals) -> subprocess.Popen[bytes]:
        with self._lock:
            inst = self._instances.get(instance)
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
        with self._lock:
            return [
                i
                for i in self._slots.values()
                if self._instances[i].proc.poll() is None
                and process_state(self._instances[i].proc.pid) == "T"
            ]

    def stop_processors(self, timeout: float | None = None) -> dict[int, int | None]:
        """SIGTERM every live instance (SIGCONT first if stopped), SIGKILL stragglers.

        Stops the keep-alive thread first, so nothing is restarted behind our back.
        """
        timeout = self.options.stop_timeout_s if timeout is None else timeout
        self._keep_alive = False
        self._stop_monitor.set()
        if self._monitor is not None:
            self._monitor.join(timeout=10)
        with self._lock:
            live = [self._instances[i] for i in self._slots.values()]
            live = [inst for inst in live if not inst.reaped]
            if not live:
                return {}
            self._record("invoke", "stop", {"instances": [i.instance for i in live]})
            for inst in live:
                if inst.proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(inst.proc.pid, signal.SIGCONT)
                        os.kill(inst.proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for inst in live:
                try:
                    inst.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("processor %d ignored SIGTERM; killing it", inst.instance)
                    inst.proc.kill()
                    inst.proc.wait(timeout=10)
            codes = {inst.instance: inst.proc.returncode for inst in live}
            self._record("ok", "stop", {"returncodes": [[i, c] for i, c in codes.items()]})
            for inst in live:
                self._reap(inst)
            return codes

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
                offsets = eos_final.group_offsets(self.cluster, o.group_id)
            except eos_final.ReaderCrashed as exc:
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
        eos_final.record_reads(rec, bootstrap, o.output_topic, o.partitions)
        eos_final.record_group_offsets(rec, self.cluster, o.group_id)
        for topic in (o.input_topic, o.output_topic):
            eos_final.record_watermarks(rec, bootstrap, topic, o.partitions)
        if o.find_hanging:
            eos_final.record_hanging(rec, self.cluster)

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
        with self._lock:
            for inst in self._instances.values():
                if not inst.log.closed:
                    inst.log.close()
            if self._supervisor is not None:
                self._supervisor.close()
