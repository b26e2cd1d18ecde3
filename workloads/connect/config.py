"""The connect workload's options and the Connect configurations made from them.

The worker and connector properties are the workload's contract with Kafka Connect: they
live here, apart from the supervisor and the REST driver (``supervisor``, ``rest``), so
tests can read what a run asks of Connect without starting one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from common import kafkaconf
from common.errors import HarnessError
from workloads import jsonconfig

#: ``exactly.once.source.support`` of the workers: ``disabled`` is the broken-on-purpose
#: at-least-once variant (offsets committed apart from the records).
EXACTLY_ONCE = ("enabled", "disabled")
#: ``transaction.boundary`` of the connector (KIP-618).
BOUNDARIES = ("poll", "interval", "connector")
CONNECTOR_CLASS = "kafkaharness.SeqSourceConnector"
WORKER_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"


@dataclass
class ConnectOptions:
    """One connect run: W workers, one source connector of T tasks, its topics."""

    workers: int = 3
    tasks: int = 3
    #: Partitions of the data topic.
    partitions: int = 3
    #: Records per second per task, and records per poll.
    rate: float = 100.0
    batch: int = 10
    exactly_once: str = "enabled"
    boundary: str = "poll"
    #: ``transaction.boundary.interval.ms`` (boundary ``interval``).
    interval_ms: int = 2000
    #: Records per transaction when the connector defines the boundaries.
    txn_records: int = 25
    #: The connector's own offsets topic (``offsets.storage.topic``, KIP-618), else the
    #: workers' global one.
    own_offsets_topic: bool = True
    #: Change the task count during the load (T -> T+2 -> 1 -> T+2 -> T), as Kafka's own
    #: integration test does: old task generations must be fenced.
    reconfigure: bool = True
    session_timeout_ms: int = 10000
    #: ``scheduled.rebalance.max.delay.ms``: how long the tasks of a vanished worker wait
    #: before they are handed to the others (Connect's default is five minutes).
    rebalance_delay_ms: int = 10000
    #: ``offset.flush.interval.ms``: how often an at-least-once worker commits offsets.
    offset_flush_ms: int = 5000
    #: The task producers' ``transaction.timeout.ms``.
    transaction_timeout_ms: int = 15000
    #: Bound on the end phase: every task running again, the connector stopped.
    final_timeout_s: float = 90.0
    name_suffix: str = ""
    seed: int = 0

    # --- names -----------------------------------------------------------------------

    @property
    def group_id(self) -> str:
        return f"connect{self.name_suffix}"

    @property
    def connector(self) -> str:
        return f"seq{self.name_suffix}"

    @property
    def data_topic(self) -> str:
        return f"connect-data{self.name_suffix}"

    @property
    def global_offsets_topic(self) -> str:
        return f"{self.group_id}-offsets"

    @property
    def configs_topic(self) -> str:
        return f"{self.group_id}-configs"

    @property
    def status_topic(self) -> str:
        return f"{self.group_id}-status"

    @property
    def offsets_topic(self) -> str:
        """Where the connector's source offsets are committed (with its records, under EOS)."""
        return f"{self.connector}-offsets" if self.own_offsets_topic else self.global_offsets_topic

    @property
    def transactional_id_prefix(self) -> str:
        """Task ``t``'s producer is ``<prefix><t>`` (KIP-618's ``${groupId}-${connector}-``)."""
        return f"{self.group_id}-{self.connector}-"

    def task_counts(self) -> list[int]:
        """The task count in each fifth of the load (the first is the connector's start)."""
        if not self.reconfigure:
            return [self.tasks]
        more = self.tasks + 2
        return [self.tasks, more, 1, more, self.tasks]

    @property
    def max_tasks(self) -> int:
        return max(self.task_counts())

    # --- Connect's configuration ------------------------------------------------------

    def worker_properties(
        self, bootstrap: str, port: int, security: dict[str, str] | None = None
    ) -> dict[str, str]:
        """One worker's properties: its REST address, the group, the internal topics (made
        by the harness beforehand), the exactly-once switch and, on a secured cluster, the
        contract's ``security`` object for the worker's clients and its connectors' (the
        password by reference to its file)."""
        return {
            **kafkaconf.java_by_reference(security, ("", "producer.", "consumer.", "admin.")),
            "bootstrap.servers": bootstrap,
            "group.id": self.group_id,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": self.configs_topic,
            "offset.storage.topic": self.global_offsets_topic,
            "status.storage.topic": self.status_topic,
            "exactly.once.source.support": self.exactly_once,
            "listeners": f"http://127.0.0.1:{port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(port),
            "offset.flush.interval.ms": str(self.offset_flush_ms),
            "scheduled.rebalance.max.delay.ms": str(self.rebalance_delay_ms),
            "session.timeout.ms": str(self.session_timeout_ms),
            "heartbeat.interval.ms": str(max(1000, self.session_timeout_ms // 4)),
            "task.shutdown.graceful.timeout.ms": "5000",
            "producer.transaction.timeout.ms": str(self.transaction_timeout_ms),
            "producer.delivery.timeout.ms": "30000",
            "producer.request.timeout.ms": "10000",
        }

    def connector_config(self, tasks: int, journal_dir: str = "") -> dict[str, str]:
        """The connector's config; ``journal_dir`` is where its tasks keep their journals
        (``workloads.connect.journal``; empty: none)."""
        config = {
            "connector.class": CONNECTOR_CLASS,
            "tasks.max": str(tasks),
            "topic": self.data_topic,
            "seq.rate": str(self.rate),
            "seq.batch": str(self.batch),
            "seq.txn.records": str(self.txn_records),
        }
        if journal_dir:
            config["seq.journal.dir"] = journal_dir
        if self.own_offsets_topic:
            config["offsets.storage.topic"] = self.offsets_topic
        if self.exactly_once == "enabled":
            config["exactly.once.support"] = "required"
            config["transaction.boundary"] = self.boundary
            if self.boundary == "interval":
                config["transaction.boundary.interval.ms"] = str(self.interval_ms)
        return config

    # --- the options protocol ---------------------------------------------------------

    def validate(self) -> None:
        if self.workers < 1 or self.tasks < 1:
            raise HarnessError("the connect workload needs at least one worker and one task")
        if self.workers > 32:
            raise HarnessError("the connect workload runs at most 32 workers")
        if self.exactly_once not in EXACTLY_ONCE:
            raise HarnessError(f"--exactly-once is one of {', '.join(EXACTLY_ONCE)}")
        if self.boundary not in BOUNDARIES:
            raise HarnessError(f"--boundary is one of {', '.join(BOUNDARIES)}")
        if self.exactly_once == "disabled" and self.boundary != "poll":
            raise HarnessError("--boundary needs --exactly-once enabled")
        if self.partitions < 1 or self.rate <= 0 or self.batch < 1 or self.txn_records < 1:
            raise HarnessError("partitions, rate, batch and txn_records must be positive")
        if self.session_timeout_ms < 3000 or self.transaction_timeout_ms < 1000:
            raise HarnessError("session_timeout_ms >= 3000 and transaction_timeout_ms >= 1000")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def name_parts(self) -> list[str]:
        parts = ["eos" if self.exactly_once == "enabled" else "at-least-once"]
        if self.exactly_once == "enabled" and self.boundary != "poll":
            parts.append(self.boundary)
        return parts

    @classmethod
    def from_dict(cls, raw: Any) -> ConnectOptions:
        return jsonconfig.from_json(cls, raw, "connect")


#: Log levels of the workers: Connect's herder and task life cycle at INFO (the rebalances,
#: the fencing and the task starts a reader of a failed run needs), the rest at WARN.
WORKER_LOG4J1 = """\
log4j.rootLogger=WARN, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c{1})%n
log4j.logger.org.apache.kafka.connect.runtime.distributed=INFO
log4j.logger.org.apache.kafka.connect.runtime.Worker=INFO
"""


WORKER_LOG4J2 = """\
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c{1})%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.herder.name = org.apache.kafka.connect.runtime.distributed
logger.herder.level = INFO
logger.worker.name = org.apache.kafka.connect.runtime.Worker
logger.worker.level = INFO
"""
