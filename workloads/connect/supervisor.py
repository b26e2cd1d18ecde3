"""The connect workload: Kafka Connect exactly-once source (KIP-618) under faults.

W worker JVMs (Kafka's own ``ConnectDistributed`` of the run's Kafka version, each an OS
process of its own that faults pause, kill and cut off like any client) form one distributed
Connect cluster; the harness drives it through its REST API: it creates one
``kafkaharness.SeqSourceConnector`` of T tasks, watches it, restarts tasks Connect leaves
failed (a fenced task producer fails its task), changes the task count during the load, and at
the end stops the connector and records what Kafka holds: the data topic at both isolation
levels and the offsets topic. What those records must satisfy is in docs/history-format.md,
workload "connect"; the ``connect`` checker suite judges it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from common.acls import Acl
from common.errors import HarnessError
from common.procfs import process_state
from common.waits import WaitTimeout, wait_for
from history import Recorder
from workloads import finalreads
from workloads.connect.config import (
    BOUNDARIES,
    EXACTLY_ONCE,
    WORKER_LOG4J1,
    WORKER_LOG4J2,
    WORKER_MAIN,
    ConnectOptions,
)
from workloads.connect.journal import TaskJournals
from workloads.connect.report import FIGURES, REPORT
from workloads.connect.rest import RestError, free_port, port_of, rest_call
from workloads.java_clients import JVM_OPTS
from workloads.processes import Child, Supervisor, child_env, spawn_command
from workloads.spec import Option, Variant, WorkloadSpec

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster

log = logging.getLogger("workloads.connect.supervisor")

#: A worker JVM is bigger than a client's: the REST server, the herder and T task producers.
WORKER_JVM_OPTS = ("-Xms96m", "-Xmx384m", *JVM_OPTS[2:])
#: How often the REST driver asks for the connector's status.
STATUS_INTERVAL_S = 1.0
#: A worker that dies at once (bad config, port taken) is not restarted in a tight loop.
MIN_LIFETIME_S = 3.0


class ConnectWorkload(Supervisor):
    """One connect run's client side: the worker JVMs (kept alive per slot) and the REST
    driver. Use as a context manager so no worker outlives it.

    As faults see it (``workloads.connect.control``) a worker is the "processor" that pause,
    zombie, kill, crash and cut faults act on, and ``transactional_ids`` names the task
    producers a worker runs (what a hijack fences).
    """

    workload_name = "connect"
    id_key = "worker"
    exit_f = "worker-exit"
    min_lifetime_s = MIN_LIFETIME_S
    monitor_interval_s = 0.2

    def __init__(self, options: ConnectOptions, cluster: Cluster, run_dir: Path) -> None:
        options.validate()
        if cluster.dir is None:
            raise HarnessError("the cluster must be started before the workload")
        self.options = options
        self.cluster = cluster
        super().__init__(run_dir)
        self.ports = [free_port() for _ in range(options.workers)]
        self.connect_dir = self.run_dir / "connect"
        self.connect_dir.mkdir(parents=True, exist_ok=True)
        self._command: list[str] | None = None
        self._rest_lock = threading.Lock()
        self._driver: Recorder | None = None
        self._status: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._created = False
        #: The task count of the last configuration Connect accepted from the driver.
        self._tasks: int | None = None
        self.journals: TaskJournals | None = None

    # --- what faults aim at -----------------------------------------------------------

    def transactional_ids(self) -> dict[int, str]:
        """Per live worker, the producer of one task it ran at the last status."""
        status = self._status or {}
        by_port: dict[int, str] = {}
        for task in status.get("tasks") or []:
            port = port_of(task.get("worker_id"))
            if port is not None and task.get("state") == "RUNNING":
                by_port.setdefault(port, f"{self.options.transactional_id_prefix}{task['id']}")
        out = {}
        for worker, child in self._live().items():
            tid = by_port.get(self.ports[child.slot])
            if tid is not None:
                out[worker] = tid
        return out

    def kill_worker(self, worker: int) -> None:
        """SIGKILL: a crash. The supervisor starts a successor in the same slot (same REST
        address, so Connect sees the same worker come back)."""
        with self._lock:
            child = self._children.get(worker)
        if child is None or child.proc.poll() is not None:
            raise HarnessError(f"no live worker {worker}")
        os.kill(child.proc.pid, signal.SIGKILL)

    def worker_in(self, role: str, pick: int) -> tuple[int, str] | None:
        """The live worker in ``role`` (``control.ROLES``) now, and why; None if no worker
        holds it now."""
        if role == "leader":
            port = self.journals.leader_port if self.journals is not None else None
            why = "the Connect group's leader"
        elif role == "task-worker":
            tasks = sorted(
                (t["id"], p)
                for t in (self._status or {}).get("tasks") or []
                if t.get("state") == "RUNNING" and (p := port_of(t.get("worker_id"))) is not None
            )
            if not tasks:
                return None
            task, port = tasks[pick % len(tasks)]
            why = f"the worker running task {task}"
        else:
            return None
        for instance, child in self._live().items():
            if port is not None and self.ports[child.slot] == port:
                return instance, why
        return None

    def serving(self, instance: int) -> bool:
        """A (re)started worker serves once its REST API answers."""
        with self._lock:
            child = self._children.get(instance)
        if child is None or child.proc.poll() is not None:
            return False
        try:
            rest_call(self.ports[child.slot], "GET", "/")
        except RestError:
            return False
        return True

    # --- workers ---------------------------------------------------------------------

    def setup(self) -> None:
        """The data topic and Connect's internal topics, made before any worker starts (the
        cluster's replication factor and min ISR; the internal ones compacted, the config
        topic with one partition as Connect requires)."""
        o = self.options
        compact = {"cleanup.policy": "compact"}
        self.cluster.ensure_topic(o.data_topic, o.partitions, timeout=60)
        self.cluster.ensure_topic(o.configs_topic, 1, config=compact, timeout=60)
        for topic in {o.global_offsets_topic, o.status_topic, o.offsets_topic}:
            self.cluster.ensure_topic(topic, 5, config=compact, timeout=60)

    def _worker_command(self) -> list[str]:
        """ConnectDistributed from the cluster's Kafka jars, with the project's classes (the
        connector) on its class path and its own logging levels."""
        cmd = self.cluster.java_client_command(WORKER_MAIN, WORKER_JVM_OPTS)
        log4j2 = any(a.startswith("-Dlog4j2.configurationFile=") for a in cmd)
        conf = self.connect_dir / ("log4j2.properties" if log4j2 else "log4j.properties")
        conf.write_text(WORKER_LOG4J2 if log4j2 else WORKER_LOG4J1)
        option = (
            f"-Dlog4j2.configurationFile={conf}" if log4j2 else f"-Dlog4j.configuration=file:{conf}"
        )
        return [option if a.startswith("-Dlog4j") else a for a in cmd]

    def _spawn(self, slot: int, replaces: int | None = None) -> Child:
        with self._lock:
            worker = self._allocate_process()
            props = self.options.worker_properties(
                self.cluster.bootstrap, self.ports[slot], self.cluster.client_security
            )
            path = self.connect_dir / f"worker-{slot}.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            env = child_env(self.cluster.env)
            assert self._command is not None
            argv = [*self._command, str(path)]

            def start(logf: IO[bytes], gid: int | None) -> subprocess.Popen[bytes]:
                return spawn_command(argv, env, logf, gid)

            log_path = self.logs_dir / f"worker-{worker}.log"
            return self._launch(slot, worker, replaces, None, log_path, start)

    def start_workers(self) -> None:
        if self._monitor is not None:
            raise HarnessError("workers already started")
        self._command = self._worker_command()
        self._start_children(self.options.workers, "connect-supervisor")

    def wait_workers(self, timeout: float = 120.0) -> None:
        """Every worker's REST API answers (the JVMs scan their plugins first)."""

        def up() -> bool:
            for port in self.ports:
                rest_call(port, "GET", "/")
            return True

        wait_for(up, timeout=timeout, interval=0.5, what="every Connect worker's REST API")

    def stop_workers(self, timeout: float = 30.0) -> dict[int, int | None]:
        """SIGTERM every live worker (SIGCONT first if stopped), SIGKILL stragglers."""
        return self._stop_children(timeout, "workers")

    # --- the REST driver -------------------------------------------------------------

    def _driver_recorder(self) -> Recorder:
        if self._driver is None:
            o = self.options
            self._driver = Recorder(
                self.processes_dir / "connect.jsonl",
                "connect",
                meta={
                    "workload": "connect",
                    "role": "driver",
                    "connector": o.connector,
                    "data_topic": o.data_topic,
                    "offsets_topic": o.offsets_topic,
                    "group_id": o.group_id,
                    "exactly_once": o.exactly_once,
                    "boundary": o.boundary,
                    "transactional_id_prefix": o.transactional_id_prefix,
                },
            )
        return self._driver

    def _any_worker(self, method: str, path: str, body: Any = None) -> Any:
        """Ask the live workers in turn; the first answer. A worker that is paused or cut off
        times out and the next is asked; a 409 (rebalance in progress) is an answer."""
        live_slots = {c.slot for c in self._live().values()}
        last: RestError | None = None
        for slot, port in enumerate(self.ports):
            if slot not in live_slots or self._stopped(slot):
                continue
            try:
                return rest_call(port, method, path, body)
            except RestError as exc:
                last = exc
                if exc.code.startswith("HTTP_") and exc.code != "HTTP_500":
                    raise
        raise last or RestError("NO_WORKER", "no live worker to ask")

    def _stopped(self, slot: int) -> bool:
        with self._lock:
            process = self._slots.get(slot)
            child = self._children.get(process) if process is not None else None
        return child is not None and process_state(child.proc.pid) == "T"

    def _op(self, f: str, value: dict[str, Any], call: Any) -> Any:
        """One driver op: invoke, the call, ok with its answer merged in or fail."""
        with self._rest_lock:
            rec = self._driver_recorder()
            rec.invoke(f, value)
            try:
                answer = call()
            except RestError as exc:
                rec.fail(f, value, exc.as_error())
                return None
            rec.ok(f, {**value, **(answer or {})})
            return answer

    def _journal_dir(self) -> str:
        return str(self.journals.directory) if self.journals is not None else ""

    def create_connector(self) -> None:
        o = self.options
        if self.journals is None:
            self.journals = TaskJournals(
                self.connect_dir / "tasks", self.processes_dir, self.logs_dir
            )
            self.journals.start()
        config = o.connector_config(o.tasks, self._journal_dir())

        def create() -> dict[str, Any]:
            self._any_worker("PUT", f"/connectors/{o.connector}/config", config)
            return {}

        value = {"connector": o.connector, "config": config}

        def created() -> bool:
            return self._op("create", value, create) is not None

        wait_for(created, timeout=60, interval=1.0, what=f"connector {o.connector} created")
        self._created = True
        self._tasks = o.tasks

    def status(self) -> dict[str, Any] | None:
        o = self.options

        def ask() -> dict[str, Any]:
            raw = self._any_worker("GET", f"/connectors/{o.connector}/status")
            connector = raw.get("connector") or {}
            tasks = [
                {"id": t.get("id"), "state": t.get("state"), "worker_id": t.get("worker_id")}
                for t in raw.get("tasks") or []
            ]
            return {
                "state": connector.get("state"),
                "worker_id": connector.get("worker_id"),
                "tasks": tasks,
            }

        got = self._op("status", {"connector": o.connector}, ask)
        if got is not None:
            self._status = got
        return got

    def restart_failed(self, status: Mapping[str, Any]) -> None:
        failed = [t["id"] for t in status.get("tasks") or [] if t.get("state") == "FAILED"]
        if not failed:
            return
        o = self.options

        def restart() -> dict[str, Any]:
            for task in failed:
                self._any_worker("POST", f"/connectors/{o.connector}/tasks/{task}/restart")
            return {}

        self._op("restart", {"connector": o.connector, "tasks": failed}, restart)

    def reconfigure(self, tasks: int) -> bool:
        o = self.options

        def put() -> dict[str, Any]:
            config = o.connector_config(tasks, self._journal_dir())
            self._any_worker("PUT", f"/connectors/{o.connector}/config", config)
            return {}

        return self._op("reconfigure", {"connector": o.connector, "tasks": tasks}, put) is not None

    def _drive(self, deadline: float) -> None:
        """Watch the connector until told to stop; restart failed tasks; change the task
        count at each fifth of the load (retrying a change Connect refused)."""
        counts = self.options.task_counts()
        start = time.monotonic()
        span = max(1.0, deadline - start)
        done = 1
        while not self._stop.wait(STATUS_INTERVAL_S):
            status = self.status()
            if status is not None:
                self.restart_failed(status)
            due = min(len(counts), 1 + int((time.monotonic() - start) / (span / len(counts))))
            if done < due and self.reconfigure(counts[done]):
                self._tasks = counts[done]
                done += 1

    def start_driver(self, seconds: float) -> None:
        self._stop.clear()
        deadline = time.monotonic() + seconds
        self._thread = threading.Thread(
            target=self._drive, args=(deadline,), name="connect-driver", daemon=True
        )
        self._thread.start()

    def stop_driver(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    # --- the end of a run ------------------------------------------------------------

    def settle(self, timeout: float) -> bool:
        """After the faults: every worker's REST API answers, the schedule's last task count
        is in force (a driver whose changes faults held back did not reach it), every task
        of it runs (failed ones restarted) and has had a record confirmed since, so the stop
        below stops a whole connector that was making progress. A task that never confirms
        keeps the stop waiting the whole ``timeout``: the checker's ``stalled-task``."""
        want = self.options.task_counts()[-1]
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(1.0, deadline - time.monotonic())

        def running() -> bool:
            status = self.status()
            if status is None:
                return False
            self.restart_failed(status)
            tasks = status.get("tasks") or []
            return (
                status.get("state") == "RUNNING"
                and len(tasks) == want
                and all(t.get("state") == "RUNNING" for t in tasks)
            )

        try:
            # A worker killed late in the load is still starting; until it has rejoined, the
            # status topic shows its tasks RUNNING under its old incarnation.
            self.wait_workers(timeout)
            if self._tasks != want:
                wait_for(
                    lambda: self.reconfigure(want),
                    timeout=left(),
                    interval=2.0,
                    what=f"the last task count ({want}) set",
                )
                self._tasks = want
            wait_for(running, timeout=left(), interval=1.0, what="every task running")
            since_ms = int(time.time() * 1000)
            journals = self.journals
            if journals is not None:
                wait_for(
                    lambda: set(range(want)) <= journals.confirmed_since(since_ms),
                    timeout=left(),
                    interval=0.5,
                    what="a record confirmed to every task",
                )
        except WaitTimeout as exc:
            log.warning("connect: %s", exc)
            return False
        return True

    def stop_connector(self, timeout: float) -> bool:
        """Stop the connector (``PUT /connectors/<name>/stop``) and wait until its tasks are
        gone, so nothing writes while the final reads run."""
        o = self.options
        rec_value = {"connector": o.connector}
        with self._rest_lock:
            rec = self._driver_recorder()
            rec.invoke("stop", rec_value)
        t0 = time.monotonic()

        def stopped() -> bool:
            self._any_worker("PUT", f"/connectors/{o.connector}/stop")
            raw = self._any_worker("GET", f"/connectors/{o.connector}/status")
            return (raw.get("connector") or {}).get("state") == "STOPPED" and not raw.get("tasks")

        try:
            wait_for(stopped, timeout=timeout, interval=1.0, what=f"connector {o.connector} stop")
        except WaitTimeout as exc:
            with self._rest_lock:
                rec.info("stop", rec_value, {"code": "TIMED_OUT", "message": str(exc)})
            return False
        with self._rest_lock:
            rec.ok("stop", {**rec_value, "seconds": round(time.monotonic() - t0, 3)})
        return True

    def final_state(self) -> bool:
        """The data topic at both isolation levels and the offsets topic, read through the
        brokers' internal listeners once no transaction is open."""
        o = self.options
        bootstrap = self.cluster.internal_bootstrap
        with Recorder(
            self.processes_dir / "final.jsonl",
            "final",
            meta={"workload": "connect", "role": "final"},
        ) as rec:
            settled = finalreads.record_settle(
                rec, bootstrap, o.data_topic, o.partitions, o.transaction_timeout_ms
            )
            finalreads.record_reads(rec, bootstrap, o.data_topic, o.partitions)
            complete = record_offsets(rec, bootstrap, o.offsets_topic, 5)
        return settled and complete

    def finish(self) -> bool:
        """Settle, stop the connector, stop the workers, record the final state; False if
        a step did not complete (the checkers then say what they can)."""
        timeout = self.options.final_timeout_s
        running = self.settle(timeout)
        stopped = self.stop_connector(timeout)
        self.stop_workers()
        self._stop_journals()
        return self.final_state() and running and stopped

    def _stop_journals(self) -> None:
        """After the workers: their last confirmations are in the journals by then."""
        if self.journals is not None:
            self.journals.stop()

    def close(self) -> None:
        """Idempotent: no worker outlives the workload, every file is closed."""
        self.stop_driver()
        self.stop_workers()
        self._stop_journals()
        with self._rest_lock:
            if self._driver is not None:
                self._driver.close()
        self._close_files()


def record_offsets(rec: Recorder, bootstrap: str, topic: str, partitions: int) -> bool:
    """One ``offsets`` op: every record of the offsets topic, read_committed, from its start."""
    ask = {"topic": topic}
    rec.invoke("offsets", ask)
    rows: list[list[Any]] = []
    complete = True
    for p in range(partitions):
        try:
            records, done = finalreads.read_in_child(bootstrap, topic, p, "read_committed", 60.0)
        except finalreads.ReaderCrashed as exc:
            rec.info(
                "offsets", {**ask, "records": rows}, {"code": "READER_FAILED", "message": str(exc)}
            )
            return False
        complete = complete and done
        rows += [[p, offset, key, value] for offset, key, value, _headers in records]
    value = {**ask, "records": rows}
    if complete:
        rec.ok("offsets", value)
    else:
        rec.info("offsets", value, {"code": "TIMED_OUT", "message": "end not reached"})
    return complete


def run_phases(workload: ConnectWorkload, time_limit: float, faults: Any) -> bool:
    """Set up, start the workers and the connector, hold ``faults`` open for the time limit
    while the REST driver watches and reconfigures, then finish on a healed cluster."""
    workload.setup()
    workload.start_workers()
    workload.wait_workers()
    workload.create_connector()
    workload.start_driver(time_limit)
    try:
        with faults():
            workload._stop.wait(time_limit)
    finally:
        workload.stop_driver()
    return workload.finish()


# --- the workload's declaration (harness.run.workloads composes it with its driver) -----


def _acls(o: ConnectOptions) -> tuple[Acl, ...]:
    """KIP-618's grants for the workers and the connector, on topics the harness makes
    beforehand (so no Create): the group; the internal topics and the connector's offsets
    topic read and written (their compaction checked); the data topic written; the leader's
    transactional id (``connect-cluster-<group>``) and the tasks' (``<group>-<connector>-``)."""
    internal = sorted({o.configs_topic, o.global_offsets_topic, o.status_topic, o.offsets_topic})
    return (
        Acl("group", o.group_id, "read"),
        *(Acl("topic", t, op) for t in internal for op in ("read", "write", "describe_configs")),
        Acl("topic", o.data_topic, "write"),
        Acl("transactional_id", f"connect-cluster-{o.group_id}", "write"),
        Acl("transactional_id", o.transactional_id_prefix, "write", prefixed=True),
    )


SPEC = WorkloadSpec(
    name="connect",
    description="Kafka Connect exactly-once source connectors (KIP-618)",
    options_type=ConnectOptions,
    cli=(
        Option("--workers", "workers", "Connect worker JVMs kept alive", int, metavar="W"),
        Option("--tasks", "tasks", "source tasks of the connector", int, metavar="T"),
        Option("--partitions", "partitions", "partitions of the data topic", int, metavar="P"),
        Option(
            "--exactly-once",
            "exactly_once",
            "the workers' exactly.once.source.support; "
            "disabled is the broken-on-purpose at-least-once variant",
            choices=EXACTLY_ONCE,
        ),
        Option(
            "--boundary", "boundary", "the connector's transaction.boundary", choices=BOUNDARIES
        ),
        Option("--task-rate", "rate", "records per second per task", float, metavar="R"),
        Option("--no-reconfigure", "reconfigure", action="store_false"),
        Option("--global-offsets-topic", "own_offsets_topic", action="store_false"),
        Option("--session-timeout-ms", "session_timeout_ms", type=int, metavar="MS"),
        Option("--transaction-timeout-ms", "transaction_timeout_ms", type=int, metavar="MS"),
    ),
    checker_suites=("connect",),
    acls=_acls,
    isolate=lambda tag: {"name_suffix": f"-{tag}"},
    needs_kafka=lambda o: ("3.5.0", "Connect's PUT /connectors/<name>/stop"),
    figures=FIGURES,
    report=REPORT,
    variants=(
        Variant("connect", {"exactly_once": "enabled"}),
        Variant("connect-at-least-once", {"exactly_once": "disabled"}, expect="duplicate"),
    ),
    load_started=lambda op: op["process"] == "connect" and op["f"] == "create",
)
