"""The contract between a run and the machine its brokers live on.

Everything above the substrate (the run, nemeses, workloads, nightly jobs) talks to a
cluster through :class:`Cluster`, a structural protocol both backends satisfy: the process
backend (``harness.substrate.process``: JVMs in network namespaces) and the Docker backend
(``harness.substrate.docker``: containers). :class:`ClusterConfig` says what to build; the
backend decides how.
"""

from __future__ import annotations

import argparse
import base64
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from common.errors import HarnessError
from common.settings import parse_settings
from nemeses.control import ClusterControl
from workloads.base import ClusterAccess

if TYPE_CHECKING:
    from collections.abc import Iterable

    from common.acls import Acl
    from harness.kafka.install import Installation
    from harness.kafka.security import Material
    from harness.kafka.wire import PartitionView
    from harness.substrate.runstate import Slot

READY_TOPIC = "__harness_ready"
INTERNAL_TOPIC_PARTITIONS = 10


def default_broker_settings(
    nodes: int, replication_factor: int | None = None, min_insync_replicas: int | None = None
) -> dict[str, str]:
    """Broker settings for a small, fast, safe test cluster (overridable per run).

    The replication factor (default ``min(3, nodes)``) and min ISR (default
    ``min(2, replication factor)``) apply to the topics a workload creates (they take the
    broker's defaults) and to the internal offsets and transaction-state topics alike.
    """
    rf = min(3, nodes) if replication_factor is None else replication_factor
    isr = min(2, rf) if min_insync_replicas is None else min_insync_replicas
    return {
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "num.replica.fetchers": "1",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.threads": "1",
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(isr),
        "offsets.topic.replication.factor": str(rf),
        "offsets.topic.num.partitions": str(INTERNAL_TOPIC_PARTITIONS),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(isr),
        "transaction.state.log.num.partitions": str(INTERNAL_TOPIC_PARTITIONS),
        # Share groups' state (Kafka 4.0 on; an older broker logs the keys as unknown).
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": str(isr),
        "share.coordinator.state.topic.num.partitions": str(INTERNAL_TOPIC_PARTITIONS),
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        "unclean.leader.election.enable": "false",
        "log.segment.bytes": str(64 * 1024 * 1024),
    }


#: Which broker settings the replication flags decide: a ``--broker-config`` of the same key
#: with another value contradicts the flag.
_FLAG_KEYS = {
    "replication_factor": ("--replication-factor", "default.replication.factor"),
    "min_insync_replicas": ("--min-insync-replicas", "min.insync.replicas"),
}

#: (replication factor, its min ISR) pairs of the effective settings, checked against the
#: node count and each other.
_RF_ISR_KEYS = (
    ("default.replication.factor", "min.insync.replicas"),
    ("transaction.state.log.replication.factor", "transaction.state.log.min.isr"),
    ("share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr"),
    ("offsets.topic.replication.factor", None),
)


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
    #: Of the workload's topics and the internal ones (None: ``min(3, nodes)``).
    replication_factor: int | None = None
    #: ``min.insync.replicas`` of the same topics (None: ``min(2, replication factor)``).
    min_insync_replicas: int | None = None
    #: ``--broker-patch``: a fix or a delay given to every broker as a Java agent
    #: (``harness.kafka.brokerpatch``); the process backend only.
    broker_patch: str | None = None
    #: The SSH backend's hosts file (``harness.substrate.ssh.hosts``); other backends ignore it.
    hosts: str | None = None
    #: ``--accept-new-host-keys``: record the key of a machine no known_hosts source knows
    #: (``harness.substrate.ssh.hostkeys``); a changed key is refused regardless.
    accept_new_host_keys: bool = False
    #: ``--security``: plaintext, tls or sasl_ssl (``harness.kafka.security``).
    security: str = "plaintext"

    def settings(self) -> dict[str, str]:
        """The brokers' settings: the defaults for this shape, ``broker_settings`` over them."""
        out = default_broker_settings(self.nodes, self.replication_factor, self.min_insync_replicas)
        out.update(self.broker_settings)
        return out

    def validate(self) -> None:
        """Refuse a shape no cluster can have, before anything starts: no nodes, a replication
        factor above the node count, a min ISR above the replication factor, or a broker
        setting that contradicts a flag."""
        if self.nodes < 1:
            raise HarnessError(f"--nodes must be at least 1, not {self.nodes}")
        if self.transaction_version not in (None, 0, 1, 2):
            raise HarnessError("transaction.version must be 0, 1 or 2")
        rf, isr = self.replication_factor, self.min_insync_replicas
        if rf is not None and not 1 <= rf <= self.nodes:
            raise HarnessError(
                f"--replication-factor {rf} must be between 1 and the node count ({self.nodes})"
            )
        for field_name, (flag, key) in _FLAG_KEYS.items():
            value = getattr(self, field_name)
            given = self.broker_settings.get(key)
            if value is not None and given is not None and given != str(value):
                raise HarnessError(f"--broker-config {key}={given} contradicts {flag} {value}")
        settings = self.settings()

        def number(key: str) -> int:
            try:
                return int(settings[key])
            except ValueError:
                raise HarnessError(
                    f"broker setting {key} must be a number, not {settings[key]!r}"
                ) from None

        if isr is not None and not 1 <= isr <= number("default.replication.factor"):
            raise HarnessError(
                f"--min-insync-replicas {isr} must be between 1 and the replication factor "
                f"({settings['default.replication.factor']})"
            )
        for rf_key, isr_key in _RF_ISR_KEYS:
            if not 1 <= number(rf_key) <= self.nodes:
                raise HarnessError(
                    f"{rf_key}={settings[rf_key]} must be between 1 and the node count "
                    f"({self.nodes})"
                )
            if isr_key is not None and not 1 <= number(isr_key) <= number(rf_key):
                raise HarnessError(
                    f"{isr_key}={settings[isr_key]} must be between 1 and "
                    f"{rf_key} ({settings[rf_key]})"
                )


class Cluster(ClusterAccess, ClusterControl, Protocol):
    """What every backend offers: the client side a workload sees (``ClusterAccess``), the
    verbs a fault uses (``nemeses.control.ClusterControl``), and the rest the run and the
    nightly jobs use. Helpers are typed against this, so either backend passes without
    ``type: ignore``."""

    config: ClusterConfig
    #: ``process`` or ``docker``: which substrate the brokers run on (printed in evidence).
    backend: str
    run_id: str
    settings: dict[str, str]
    install: Installation | None
    slot: Slot | None

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def admin(self) -> Any: ...

    #: ``--security`` other than plaintext: the cluster's certificates and passwords.
    security: Material | None

    def grant(self, principal: str, acls: Iterable[Acl]) -> None: ...

    def wait_ready(self, timeout: float = 90.0) -> None: ...

    def partition_views(self, topic: str, partition: int) -> list[PartitionView]: ...

    def partition_view(self, topic: str, partition: int) -> PartitionView: ...

    def isr(self, topic: str, partition: int) -> list[int]: ...

    def isolate(self, node_id: int) -> None: ...

    def proxy_name(self, node_id: int) -> str: ...

    def client_cuts(self) -> list[list[str]]:
        """This cluster's client-cut rules now (``cut_client``), as iptables lists them."""
        ...


# --- the command line ----------------------------------------------------------------------


def add_shape_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that shape a cluster, shared by ``harness cluster``, ``run`` and ``campaign``:
    ``--nodes``, ``--broker-config``, ``--replication-factor``, ``--min-insync-replicas``."""
    p.add_argument("--nodes", type=int, default=3, metavar="N", help="Kafka nodes (default 3)")
    p.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting over the harness's defaults (repeatable)",
    )
    p.add_argument(
        "--replication-factor",
        type=int,
        default=None,
        metavar="N",
        help="of the workload's topics and the internal ones (default min(3, nodes))",
    )
    p.add_argument(
        "--min-insync-replicas",
        type=int,
        default=None,
        metavar="N",
        help="min.insync.replicas of the same topics (default min(2, replication factor))",
    )
    from harness.kafka.brokerpatch import PATCHES
    from harness.kafka.security import MODES

    p.add_argument(
        "--security",
        choices=MODES,
        default="plaintext",
        help="how clients and brokers connect: plaintext; tls (certificates everywhere); "
        "sasl_ssl (SCRAM over TLS for clients); both secured modes run Kafka's authorizer with "
        "the workload's ACLs (process and Docker backends)",
    )

    p.add_argument(
        "--broker-patch",
        default=None,
        metavar="NAME",
        help="run the brokers with a fix Kafka has not released, or a delay that opens a race's "
        "window, as a Java agent (process backend): "
        + "; ".join(f"{n}: {b.description}" for n, b in PATCHES.items()),
    )


def shape_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The fields of :class:`ClusterConfig` (and of a run's options) the shape flags give."""
    return {
        "nodes": args.nodes,
        "broker_settings": parse_settings(args.broker_config, "--broker-config"),
        "replication_factor": args.replication_factor,
        "min_insync_replicas": args.min_insync_replicas,
        "security": args.security,
        "broker_patch": args.broker_patch,
    }
