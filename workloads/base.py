"""What a workload needs from a cluster, and nothing more.

Workloads are handed a cluster by the harness and never import it: this structural protocol
names the few verbs they use, and both substrate backends satisfy it. Faults are not here;
they belong to ``nemeses``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class JavaApp:
    """A workload's own Java application (Kafka Streams' is the streams workload's): its
    sources, compiled against the project's Java clients and ``artifacts``
    (``group:artifact``, resolved at the cluster's Kafka version), and its main class."""

    name: str
    source_dir: Path
    main_class: str
    artifacts: tuple[str, ...] = ()


class ClusterAccess(Protocol):
    """The client-facing side of a running cluster."""

    dir: Path | None

    @property
    def bootstrap(self) -> str:
        """Client path of the clients under test (crosses toxiproxy, so faults reach it)."""
        ...

    @property
    def internal_bootstrap(self) -> str:
        """The harness's own path (final reads, group state): never crosses the toxics."""
        ...

    @property
    def client_security(self) -> dict[str, str] | None:
        """A secured cluster's ``security`` object for the clients under test (the client
        contract's); None for plaintext."""
        ...

    @property
    def env(self) -> dict[str, str]:
        """Environment of every spawned process (carries the run marker for reaping)."""
        ...

    def node_ids(self) -> list[int]: ...

    def ensure_topic(
        self,
        topic: str,
        partitions: int,
        replication: int | None = None,
        config: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create ``topic`` and wait for its leaders and full ISRs; ``replication`` None and
        no ``min.insync.replicas`` in ``config``: the cluster's defaults (the run's
        ``--replication-factor`` and ``--min-insync-replicas``)."""
        ...

    def partition_count(self, topic: str) -> int:
        """How many partitions ``topic`` has now (a fault may have added some)."""
        ...

    def coordinator_partition(self, topic: str, key: str) -> int:
        """The partition of a coordinators' log (``__consumer_offsets``) that holds ``key``
        (a group id): the brokers' settings size the log."""
        ...

    def tool_command(self, simple_name: str, jvm_opts: tuple[str, ...] = ...) -> list[str]:
        """The command line of one of Kafka's own tools (Kafka's Java copier is one)."""
        ...

    def java_client_command(self, main_class: str, jvm_opts: tuple[str, ...] = ...) -> list[str]:
        """The command line of one of the project's Java clients (``workloads/java``),
        compiled against this cluster's Kafka version; its arguments follow."""
        ...

    def java_app_command(self, app: JavaApp, jvm_opts: tuple[str, ...] = ...) -> list[str]:
        """The command line of a workload's own Java application, built against this
        cluster's Kafka version and the Maven artifacts it names; its arguments follow."""
        ...

    def run_tool(self, simple_name: str, *args: str, timeout: float = 60.0) -> str: ...

    def client_gid(self, slot: int) -> int | None:
        """The group id the client processes of supervisor slot ``slot`` run with (a group
        of their own on the machine while the cluster lives, so a fault can cut exactly
        them off the network), or None: spawn them as usual (no root, or no ids left)."""
        ...
