"""The contract between a run and the machine its brokers live on.

Everything above the substrate (the run, nemeses, workloads, nightly jobs) talks to a
cluster through :class:`Cluster`, a structural protocol both backends satisfy: the process
backend (``harness.substrate.process``: JVMs in network namespaces) and the Docker backend
(``harness.substrate.docker``: containers). :class:`ClusterConfig` says what to build; the
backend decides how.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from nemeses.control import ClusterControl
from workloads.base import ClusterAccess

if TYPE_CHECKING:
    from harness.kafka.install import Installation
    from harness.kafka.wire import PartitionView
    from harness.substrate.runstate import Slot

READY_TOPIC = "__harness_ready"
INTERNAL_TOPIC_PARTITIONS = 10


def default_broker_settings(nodes: int) -> dict[str, str]:
    """Broker settings for a small, fast, safe test cluster (overridable per run)."""
    rf = str(min(3, nodes))
    isr = str(min(2, nodes))
    return {
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "num.replica.fetchers": "1",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.threads": "1",
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": str(INTERNAL_TOPIC_PARTITIONS),
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "transaction.state.log.num.partitions": str(INTERNAL_TOPIC_PARTITIONS),
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        "unclean.leader.election.enable": "false",
        "log.segment.bytes": str(64 * 1024 * 1024),
    }


def new_cluster_id() -> str:
    """A KRaft cluster id (22 url-safe base64 chars) that a CLI parser cannot take for a flag."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if cid[0].isalnum():
            return cid


@dataclass
class ClusterConfig:
    """Everything that decides what cluster is built; printed into each run's evidence."""

    nodes: int = 3
    kafka_version: str | None = None
    transaction_version: int | None = None
    broker_settings: dict[str, str] = field(default_factory=dict)
    store: Path | None = None
    slot: int | None = None
    base_port: int | None = None
    network: str = "auto"  # auto | netns | loopback
    ready_timeout: float = 90.0
    dump_logs: bool = True


class Cluster(ClusterAccess, ClusterControl, Protocol):
    """What every backend offers: the client side a workload sees (``ClusterAccess``), the
    verbs a fault uses (``nemeses.control.ClusterControl``), and the rest the run and the
    nightly jobs use. Helpers are typed against this, so either backend passes without
    ``type: ignore``."""

    config: ClusterConfig
    run_id: str
    settings: dict[str, str]
    install: Installation | None
    slot: Slot | None

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def admin(self) -> Any: ...

    def wait_ready(self, timeout: float = 90.0) -> None: ...

    def partition_views(self, topic: str, partition: int) -> list[PartitionView]: ...

    def partition_view(self, topic: str, partition: int) -> PartitionView: ...

    def isr(self, topic: str, partition: int) -> list[int]: ...

    def isolate(self, node_id: int) -> None: ...

    def proxy_name(self, node_id: int) -> str: ...
