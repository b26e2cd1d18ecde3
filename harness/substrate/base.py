"""What the two cluster backends share (``process.cluster.Cluster``, processes in network
namespaces, and ``docker.cluster.DockerCluster``, containers): the context-manager
life cycle and its SIGTERM handling, the run marker in the environment, the per-node verbs,
and the leader and coordinator look-ups built on each backend's ``partition_views``. Kept in
one place so the backends cannot drift apart.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

from common.errors import HarnessError
from harness.kafka import coordinators, readiness, tools
from harness.substrate.runstate import MARKER_ENV

if TYPE_CHECKING:
    from harness.kafka.install import Installation
    from harness.kafka.wire import PartitionView
    from harness.substrate.api import ClusterConfig


class _Node(Protocol):
    @property
    def node_id(self) -> int: ...

    def state(self) -> str | None: ...

    def alive(self) -> bool: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def kill(self) -> None: ...

    def stop(self, timeout: float = 30.0) -> bool: ...


N = TypeVar("N", bound=_Node)


def check_config(config: ClusterConfig) -> None:
    """The checks every backend makes on its configuration."""
    if config.nodes < 1:
        raise HarnessError("a cluster needs at least one node")
    if config.transaction_version not in (None, 0, 1, 2):
        raise HarnessError("transaction.version must be 0, 1 or 2")


class ClusterBase(Generic[N]):
    """The shared part of a backend; subclasses set the attributes below and implement
    ``start``, ``stop``, ``internal_bootstrap``, ``partition_views``, ``partition`` and
    ``start_node``."""

    config: ClusterConfig
    run_id: str
    nodes: list[N]
    settings: dict[str, str]
    install: Installation | None
    _admin: Any
    _stopped: bool
    _old_sigterm: Any

    # --- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    @property
    def env(self) -> dict[str, str]:
        """The environment of every process we spawn: carries the run marker."""
        return dict(os.environ, **{MARKER_ENV: self.run_id})

    def _install_signal_handlers(self) -> None:
        """SIGTERM raises SystemExit, so it unwinds through ``stop()`` as Ctrl-C does."""
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: FrameType | None) -> None:
            raise SystemExit(128 + signum)

        self._old_sigterm = signal.signal(signal.SIGTERM, on_term)

    def _restore_signal_handlers(self) -> None:
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._old_sigterm)

    def _first_stop(self) -> bool:
        """True the first time only (``stop`` is idempotent); drops the atexit hook."""
        if self._stopped:
            return False
        self._stopped = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        return True

    # --- addresses and clients ---------------------------------------------------------

    @property
    def internal_bootstrap(self) -> str:
        raise NotImplementedError

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(
                {
                    "bootstrap.servers": self.internal_bootstrap,
                    "log_level": 0,
                    "socket.timeout.ms": 5000,
                }
            )
        return self._admin

    def ensure_topic(
        self,
        topic: str,
        partitions: int,
        replication: int,
        config: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create ``topic`` (idempotently) and wait until every partition has a leader."""
        readiness.ensure_topic(self, topic, partitions, replication, config, timeout)

    def tool_command(
        self, simple_name: str, jvm_opts: tuple[str, ...] = tools.TOOL_JVM_OPTS
    ) -> list[str]:
        """The command line that starts one of Kafka's tools from this cluster's jars."""
        if self.install is None:
            raise HarnessError(f"this cluster has no Kafka installation to run {simple_name}")
        return tools.tool_command(self.install, simple_name, jvm_opts)

    def run_tool(self, simple_name: str, *args: str, timeout: float = 60.0) -> str:
        """Run one of Kafka's own tools against this cluster; its stdout."""
        if self.install is None:
            raise HarnessError(f"this cluster has no Kafka installation to run {simple_name}")
        return tools.run_tool(self.install, self.env, simple_name, *args, timeout=timeout)

    def node(self, node_id: int) -> N:
        if not 1 <= node_id <= len(self.nodes):
            raise HarnessError(f"no node {node_id} (cluster has {len(self.nodes)})")
        return self.nodes[node_id - 1]

    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes]

    # --- look-ups that aim faults -----------------------------------------------------

    def partition_views(self, topic: str, partition: int) -> list[PartitionView]:
        raise NotImplementedError

    def partition_view(self, topic: str, partition: int) -> PartitionView:
        """The freshest view: highest leader epoch, preferring the leader's own answer.

        An isolated broker keeps a stale view (it believes it still leads); its epoch is
        lower than the one the majority moved to, so it loses here.
        """
        views = self.partition_views(topic, partition)
        if not views:
            raise HarnessError(f"no live broker has metadata for {topic}-{partition}")
        top = max(v.leader_epoch for v in views)
        fresh = [v for v in views if v.leader_epoch == top]
        own = [v for v in fresh if v.source == v.leader]
        return (own or fresh)[0]

    def leader(self, topic: str, partition: int) -> int | None:
        leader = self.partition_view(topic, partition).leader
        return leader if leader >= 0 else None

    def isr(self, topic: str, partition: int) -> list[int]:
        return list(self.partition_view(topic, partition).isr)

    def group_coordinator(self, group_id: str) -> int | None:
        p = coordinators.partition_for(group_id, int(self.settings["offsets.topic.num.partitions"]))
        return self.leader("__consumer_offsets", p)

    def txn_coordinator(self, transactional_id: str) -> int | None:
        n = int(self.settings["transaction.state.log.num.partitions"])
        return self.leader("__transaction_state", coordinators.partition_for(transactional_id, n))

    # --- node control ------------------------------------------------------------------

    def node_state(self, node_id: int) -> str | None:
        return self.node(node_id).state()

    def node_alive(self, node_id: int) -> bool:
        return self.node(node_id).alive()

    def pause(self, node_id: int) -> None:
        self.node(node_id).pause()

    def resume(self, node_id: int) -> None:
        self.node(node_id).resume()

    def kill(self, node_id: int) -> None:
        self.node(node_id).kill()

    def stop_node(self, node_id: int) -> bool:
        return self.node(node_id).stop()

    def restart(self, node_id: int, *, clean: bool = False, timeout: float = 60.0) -> None:
        """Stop (clean or kill -9) and start again on the same data; waits until registered."""
        node = self.node(node_id)
        if clean:
            node.stop()
        else:
            node.kill()
        self.start_node(node_id, timeout=timeout)

    def start_node(self, node_id: int, timeout: float = 60.0) -> None:
        raise NotImplementedError

    # --- faults ------------------------------------------------------------------------

    def partition(self, *groups: list[int]) -> None:
        raise NotImplementedError

    def isolate(self, node_id: int) -> None:
        others = [n.node_id for n in self.nodes if n.node_id != node_id]
        self.partition([node_id], others)

    def _resume_paused(self) -> None:
        """The first step of ``heal_all``: resume every node a fault left stopped."""
        for node in self.nodes:
            if node.state() == "T":
                node.resume()
