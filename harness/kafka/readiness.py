"""The readiness proof: a replicated transactional write and a read_committed read.

"The process started" is not readiness. A cluster is ready for an exactly-once test when
transactions work end to end through the same path the workloads use (toxiproxy): the
transaction coordinator is elected and loaded, every partition of a replicated topic
accepts a committed transaction, and a read_committed consumer sees all of it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from common.errors import HarnessError
from common.waits import wait_for

if TYPE_CHECKING:
    from harness.substrate.api import Cluster

QUIET = {"log_level": 0}


def ensure_topic(
    cluster: Cluster,
    topic: str,
    partitions: int,
    replication: int,
    config: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Create ``topic`` (idempotently) and wait until every partition has a leader."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()
    futures = admin.create_topics(
        [NewTopic(topic, partitions, replication, config=config or {})], request_timeout=timeout
    )
    try:
        futures[topic].result(timeout=timeout)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise HarnessError(f"creating topic {topic} failed: {exc}") from None

    def all_led() -> bool:
        md = admin.list_topics(topic=topic, timeout=5)
        t = md.topics.get(topic)
        return (
            t is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) == replication for p in t.partitions.values())
        )

    wait_for(all_led, timeout=timeout, what=f"leaders and full ISR for {topic}")


def transactional_round_trip(cluster: Cluster, timeout: float) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    deadline = time.monotonic() + timeout
    n = len(cluster.nodes)
    ensure_topic(cluster, "__harness_ready", n, min(3, n), timeout=timeout)
    producer = Producer(
        {
            **QUIET,
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": f"harness-ready-{cluster.run_id}",
            "transaction.timeout.ms": 30000,
        }
    )
    try:
        producer.init_transactions(max(1.0, deadline - time.monotonic()))
        producer.begin_transaction()
        for p in range(n):
            producer.produce("__harness_ready", value=f"ready-{p}".encode(), partition=p)
        producer.commit_transaction(max(1.0, deadline - time.monotonic()))
    except Exception as exc:
        raise HarnessError(f"readiness transaction failed: {exc}") from None
    finally:
        producer.flush(1)
    consumer = Consumer(
        {
            **QUIET,
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"harness-ready-{cluster.run_id}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition("__harness_ready", p, 0) for p in range(n)])
        seen: set[int] = set()

        def read_all() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None and msg.value().startswith(b"ready-"):
                seen.add(msg.partition())
            return len(seen) == n

        wait_for(
            read_all,
            timeout=max(1.0, deadline - time.monotonic()),
            interval=0.0,
            what="read_committed read of the readiness transaction",
        )
    finally:
        consumer.close()
