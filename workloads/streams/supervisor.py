"""The streams workload: a Kafka Streams application under exactly_once_v2, under faults.

K instances of the project's own Streams application (``workloads/java/streams``, compiled
against the run's Kafka Streams, each instance an OS process that faults pause, kill and cut
off like an eos processor) read the seeder's input in one application (one consumer group),
map every input to the output topic and keep a running count and sum per group key in a
RocksDB store with its changelog, writing every update to the aggregate topic. The seeder,
the drain and the supervision are every pipeline's (``workloads.pipeline``); what differs is
what an instance is, and what the final state reads: the input, both outputs and the
changelog, at both isolation levels.
What those records must satisfy is in docs/history-format.md, workload "streams"; the
``streams`` checker suite judges it.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from common.acls import Acl
from common.waits import wait_for
from history import HistoryError, read_process_file
from workloads.base import JavaApp
from workloads.java_clients import JVM_OPTS
from workloads.pipeline import PipelineWorkload
from workloads.processes import Child, child_env, spawn_command
from workloads.seeder import seeded_values
from workloads.spec import Figures, OpCount, Option, Variant, WorkloadSpec
from workloads.streams.config import GROUP_PROTOCOLS, VARIANTS, StreamsOptions, protocol_needs
from workloads.streams.report import REPORT

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster

log = logging.getLogger("workloads.streams.supervisor")

#: A Streams instance holds a consumer, a producer per thread, a restore consumer and
#: RocksDB's native memory (outside the heap).
INSTANCE_JVM_OPTS = ("-Xms64m", "-Xmx320m", *JVM_OPTS[2:])
#: The Kafka Streams application (``workloads/java/streams``), built on first use.
STREAMS_APP = JavaApp(
    "streams",
    Path(__file__).resolve().parents[1] / "java/streams",
    "kafkaharness.StreamsApp",
    ("org.apache.kafka:kafka-streams",),
)


class StreamsWorkload(PipelineWorkload[StreamsOptions]):
    """One streams run's client side: the application instances (kept alive per slot), the
    seeder, the drain and the final reads. Use as a context manager.

    As faults see it (``workloads.streams.control``) an instance is a "processor" that
    pause, zombie, kill, crash and cut faults act on, and ``hijack`` fences its first thread
    producer (each instance records its transactional ids); it has no hook points.
    """

    workload_name = "streams"
    read_input = True

    def __init__(self, options: StreamsOptions, cluster: Cluster, run_dir: Path) -> None:
        super().__init__(options, cluster, run_dir)
        self.state_root = self.run_dir / "streams-state"

    def __enter__(self) -> StreamsWorkload:
        return self

    def setup(self) -> None:
        """Input, output and aggregate topics of P partitions (Streams makes its changelog)."""
        o = self.options
        for topic in (o.input_topic, o.output_topic, o.aggregate_topic):
            self.cluster.ensure_topic(topic, o.partitions, timeout=60)

    def _spawn(self, slot: int, replaces: int | None = None) -> Child:
        with self._lock:
            instance = self._allocate_process()
            # A slot keeps its state directory, as a restarted instance on its machine would.
            state_dir = self.state_root / f"slot-{slot}"
            state_dir.mkdir(parents=True, exist_ok=True)
            cfg = self.options.instance_config(
                instance,
                slot,
                self.cluster.bootstrap,
                str(self.processes_dir / f"{instance}.jsonl"),
                str(state_dir),
            )
            cfg.security = self.cluster.client_security
            env = child_env(self.cluster.env)
            assert self._client_command is not None
            argv = [*self._client_command, "--config", cfg.to_json()]

            def start(logf: IO[bytes], gid: int | None) -> subprocess.Popen[bytes]:
                return spawn_command(argv, env, logf, gid)

            log_path = self.logs_dir / f"instance-{instance}.log"
            return self._launch(slot, instance, replaces, None, log_path, start)

    def _processor_command(self) -> list[str]:
        """The application's JVM, compiled against the run's Kafka Streams."""
        return self.cluster.java_app_command(STREAMS_APP, INSTANCE_JVM_OPTS)

    def wait_stable(self, timeout: float = 60.0) -> None:
        """Wait until the application is ready: on the classic protocol its group Stable
        with every instance's threads; on the streams protocol (a group the consumer-group
        admin calls do not describe) every live instance RUNNING with tasks, each input
        partition's task active on exactly one thread (from the instances' own histories)."""
        if self.options.group_protocol == "classic":
            self._wait_group_stable(self.options.processors * self.options.threads, timeout)
            return
        group = self.options.group_id
        wait_for(self._tasks_settled, timeout=timeout, what=f"application {group} to run")

    def _tasks_settled(self) -> bool:
        live = self._live()
        if len(live) < self.options.processors:
            return False
        active: list[str] = []
        for instance in live:
            facts = instance_facts(self.processes_dir / f"{instance}.jsonl")
            if facts.state != "RUNNING" or facts.tasks is None:
                return False
            active += [t for thread in facts.tasks for t in thread.get("active") or []]
        return len(active) == len(set(active)) == self.options.partitions

    def transactional_ids(self) -> dict[int, str]:
        """Live instances' first thread producer's transactional id (what a hijack takes
        over), from their ``start`` ops; none under at_least_once."""
        out: dict[int, str] = {}
        for instance in self._live():
            tids = instance_facts(self.processes_dir / f"{instance}.jsonl").transactional_ids
            if tids:
                out[instance] = tids[0]
        return out

    def _written_topics(self) -> tuple[str, ...]:
        """Both outputs and the changelog Streams makes for the store."""
        o = self.options
        return (o.output_topic, o.aggregate_topic, o.changelog_topic)


@dataclass
class InstanceFacts:
    """What an instance's own history says so far: its last state, its threads' tasks at its
    last RUNNING, its thread producers' transactional ids (None: not recorded yet)."""

    state: str | None = None
    tasks: list[dict[str, Any]] | None = None
    transactional_ids: list[str] | None = None


def instance_facts(path: Path) -> InstanceFacts:
    facts = InstanceFacts()
    try:
        _header, ops, _notes = read_process_file(path)
    except (OSError, HistoryError):
        return facts
    for op in ops:
        if op["type"] != "ok" or not isinstance(op.get("value"), dict):
            continue
        value = op["value"]
        if op["f"] == "state":
            facts.state = value.get("new")
        elif op["f"] == "tasks":
            facts.tasks = list(value.get("threads") or [])
        elif op["f"] == "start":
            facts.transactional_ids = [str(t) for t in value.get("transactional_ids") or []]
    return facts


# --- the workload's declaration (harness.run.workloads composes it with its driver) -----


def _processed() -> OpCount:
    """Inputs the instances processed since their last ``progress`` op (Streams'
    transactions are its own, so what it processed is what a run can see of its pace)."""
    last: dict[Any, int] = {}

    def count(op: Mapping[str, Any]) -> int | None:
        value = op.get("value")
        if op["f"] != "progress" or not isinstance(value, dict) or "processed" not in value:
            return None
        if not isinstance(op["process"], int):
            return None
        now = int(value["processed"])
        delta = now - last.get(op["process"], 0)
        last[op["process"]] = now
        return delta

    return count


SPEC = WorkloadSpec(
    name="streams",
    description="a Kafka Streams application under exactly_once_v2 (KIP-447)",
    options_type=StreamsOptions,
    cli=(
        Option("--variant", "variant", "eos or at-least-once", choices=VARIANTS),
        Option("--processors", "processors", "instances kept alive", int, metavar="K"),
        Option("--partitions", "partitions", "input and output partitions", int, metavar="P"),
        Option("--values", "values", "values to seed", int, metavar="N"),
        Option("--commit-interval-ms", "commit_interval_ms", type=int, metavar="MS"),
        Option("--transaction-timeout-ms", "transaction_timeout_ms", type=int, metavar="MS"),
        Option("--session-timeout-ms", "session_timeout_ms", type=int, metavar="MS"),
        Option("--stream-threads", "threads", "num.stream.threads per instance", int),
        Option("--standby-replicas", "standby", "num.standby.replicas (0, 1, 2)", int),
        Option("--groups", "groups", "group keys per input partition", int, metavar="G"),
        Option(
            "--group-protocol",
            "group_protocol",
            "classic, or streams (KIP-1071, Kafka >= 4.3)",
            choices=GROUP_PROTOCOLS,
        ),
        Option(
            "--client-config",
            "client_config",
            "a Kafka Streams setting of every instance (repeatable)",
            action="settings",
        ),
    ),
    checker_suites=("streams",),
    # Streams names its internal topics (the store's changelog) and its transactional ids
    # after the application id, and creates those topics itself.
    acls=lambda o: (
        Acl("topic", o.input_topic, "read"),
        Acl("topic", o.output_topic, "write"),
        Acl("topic", o.aggregate_topic, "write"),
        Acl("topic", o.group_id, "all", prefixed=True),
        Acl("group", o.group_id, "read"),
        Acl("transactional_id", o.group_id, "write", prefixed=True),
    ),
    needs_kafka=lambda o: protocol_needs(o.group_protocol),
    isolate=lambda tag: {"name_suffix": f"-{tag}"},
    figures=Figures(
        throughput=_processed,
        fed=lambda: seeded_values,
        throughput_label="records/s\nprocessed",
        backlog_label="backlog\n(seeded - processed)",
        title="throughput and backlog, with fault bands",
    ),
    report=REPORT,
    variants=(
        Variant("eos"),
        Variant("at-least-once", {"variant": "at-least-once"}, expect="duplicate"),
    ),
    load_started=lambda op: (
        (op["process"] == "seeder" and op["f"] == "send")
        or (isinstance(op["process"], int) and op["f"] == "progress")
    ),
)
