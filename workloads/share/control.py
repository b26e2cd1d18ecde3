"""The share members as faults see them (``history.clientcontrol.ClientControl``): processes
that may be paused past their record locks, killed with records acquired, cut off from every
broker or aimed at by group id, and armed to act on themselves at a moment of a round (after
their writes, before or during their acknowledgements' commit, after it); no transactional
ids of their own (a member writes its output with an idempotent producer, not a
transaction).

A share group's state is not all on its group coordinator: each share partition's state
(start offset, acquired and acknowledged records) lives in a partition of
``__share_group_state`` led by a share coordinator, so faults aimed at the group's
coordinators may hit those leaders too (:meth:`ShareClients.state_keys`). The clients name
the state by its coordinator keys; the cluster's side turns a key into a partition
(``harness.kafka.coordinators``: Kafka's hash, and the log's size among the brokers'
settings, which this side cannot see).
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from common.kafkaconf import secured
from history.clientcontrol import StateKey
from workloads.control import SupervisedControl
from workloads.share.supervisor import ShareWorkload

log = logging.getLogger("workloads.share.control")

#: The share coordinators' log: one partition per share partition's state (KIP-932).
SHARE_STATE_TOPIC = "__share_group_state"
#: The longest the one look-up of the input's topic id may hold up a fault.
DESCRIBE_TIMEOUT_S = 5.0
_MASK64 = (1 << 64) - 1


def kafka_uuid(most: int, least: int) -> str:
    """A Kafka ``Uuid`` in Kafka's own string form (``Uuid.toString``): its 16 bytes, most
    significant half first, in URL-safe base64 without padding.

    Rebuilt from the two halves because confluent-kafka's ``str(Uuid)`` uses the standard
    base64 alphabet (``+`` and ``/`` where Kafka writes ``-`` and ``_``): a key built from it
    would be another key, placed elsewhere, for about half of all topic ids.
    """
    raw = ((most & _MASK64) << 64 | (least & _MASK64)).to_bytes(16, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def share_coordinator_key(group: str, topic_id: str, partition: int) -> str:
    """The key Kafka places a share partition's state by (``SharePartitionKey``'s
    coordinator key): the group id, the topic id in :func:`kafka_uuid` form and the
    partition, joined by colons."""
    return f"{group}:{topic_id}:{partition}"


def describe_input(bootstrap: str, topic: str, timeout: float) -> tuple[str, int]:
    """``topic``'s id (:func:`kafka_uuid` form) and partition count, from the brokers."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    # Held until the result is in: a collected client never answers.
    admin = AdminClient(
        secured({"bootstrap.servers": bootstrap, "log_level": 0, "socket.timeout.ms": 5000})
    )
    futures = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)
    desc = futures[topic].result(timeout=timeout)
    tid = desc.topic_id
    topic_id = kafka_uuid(tid.get_most_significant_bits(), tid.get_least_significant_bits())
    return topic_id, len(desc.partitions)


class ShareClients(SupervisedControl):
    """The members of one share run (the group: the share group)."""

    hooks = True

    def __init__(self, workload: ShareWorkload) -> None:
        super().__init__(workload, workload.cluster.bootstrap, workload.options)
        self.workload = workload
        self._topic_id: str | None = None
        self._partitions: int = workload.options.partitions

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        self.workload.arm_hook(instance, at, action, delay_ms)

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        return self.workload.fired_hook(instance)

    def state_keys(self) -> tuple[StateKey, ...]:
        """Each input partition's share-partition state, in partition order; empty until the
        input's topic id is known.

        The id is asked of the brokers once, when a fault first wants it (the topic exists
        by then), on the harness's own path around the toxics so that a fault on the
        clients' path does not fail the look-up; it never changes, so it is kept. A failed
        look-up answers empty (the fault aims at the group coordinator) and is tried again
        at the next fault. Partitions added to the input after the look-up are not named:
        the look-up is not repeated to find them, as a fault must not wait on brokers it may
        have stopped.
        """
        topic_id = self._input_topic_id()
        if topic_id is None:
            return ()
        return tuple(
            StateKey(
                SHARE_STATE_TOPIC,
                share_coordinator_key(self.group_id, topic_id, p),
                "share coordinator",
                f"{self.input_topic}-{p}",
            )
            for p in range(self._partitions)
        )

    def _input_topic_id(self) -> str | None:
        if self._topic_id is None:
            try:
                topic_id, partitions = describe_input(
                    self.workload.cluster.internal_bootstrap, self.input_topic, DESCRIBE_TIMEOUT_S
                )
            except Exception as exc:  # brokers failing: no state keys this time
                log.warning("no topic id for %s yet: %s", self.input_topic, exc)
                return None
            self._topic_id = topic_id
            self._partitions = max(self._partitions, partitions)
        return self._topic_id
