"""Who holds a role now, asked of each broker directly: what aimed faults resolve targets with."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from common.errors import HarnessError
from harness.kafka import coordinators
from harness.kafka.wire import fetch_metadata, fetch_partitions
from harness.substrate.abilities.nodes import N, Nodes, host_port

if TYPE_CHECKING:
    from harness.kafka.wire import PartitionView


#: Kafka's error code for a partition that exists and has no leader now.
LEADER_NOT_AVAILABLE = 5


class MetadataLookups(Nodes[N]):
    """Leaders, coordinators, the controller and the registered brokers, from each live
    broker's own answer (no client library: the nemesis thread asks while brokers die)."""

    settings: dict[str, str]

    def registered_brokers(self) -> set[int]:
        """Broker ids that every answering live broker lists in its metadata.

        In KRaft, metadata lists only registered, unfenced brokers. Each broker is asked
        directly (no client library in the harness process for this: it is called from the
        nemesis thread while brokers die and return). The intersection is conservative both
        ways: a just-restarted broker that has not caught up, or an isolated one whose view
        is stale, can only delay "registered", never fake it.
        """
        views = []
        for node in self._askable(exclude_cut=True):
            try:
                host, port = host_port(node.internal_address)
                views.append(fetch_metadata(host, port, [], node.node_id)[0])
            except (OSError, struct.error):
                continue
        if not views:
            raise HarnessError("no live broker answered a metadata request")
        return set.intersection(*views)

    def _askable(self, exclude_cut: bool) -> list[N]:
        """Running nodes to ask, leaving out the cut-off minority when asked to (and when
        anyone else is left)."""
        nodes = [n for n in self.nodes if not (exclude_cut and n.node_id in self._cut)]
        return [n for n in nodes or self.nodes if n.running()]

    def active_controller(self) -> int:
        """The KRaft quorum leader, as the quorum itself reports it (Kafka's own tool, run
        from the cluster's installation against the direct listeners)."""
        return coordinators.active_controller(self)

    def partition_views(self, topic: str, partition: int) -> list[PartitionView]:
        """Every reachable live broker's own view of a partition, asked one by one."""
        views = []
        for node in self._askable(exclude_cut=False):
            try:
                host, port = host_port(node.internal_address)
                got = fetch_partitions(host, port, [topic], node.node_id)
            except OSError:
                continue
            view = got.get((topic, partition))
            # LEADER_NOT_AVAILABLE is a view too: the partition exists and has no leader.
            if view is not None and view.error in (0, LEADER_NOT_AVAILABLE):
                views.append(view)
        return views

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
        """The partition's in-sync replicas, from the freshest view."""
        return list(self.partition_view(topic, partition).isr)

    def coordinator_partition(self, topic: str, key: str) -> int:
        """The partition of coordinators' log ``topic`` (``__consumer_offsets``,
        ``__transaction_state``, ``__share_group_state``) that holds ``key``: computed here,
        where the brokers' settings are, for clients that can only name their keys
        (``history.clientcontrol.StateKey``)."""
        return coordinators.log_partition_for(topic, key, self.settings)

    def group_coordinator(self, group_id: str) -> int | None:
        topic = "__consumer_offsets"
        return self.leader(topic, self.coordinator_partition(topic, group_id))

    def txn_coordinator(self, transactional_id: str) -> int | None:
        topic = "__transaction_state"
        return self.leader(topic, self.coordinator_partition(topic, transactional_id))
