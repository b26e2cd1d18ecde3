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
from common.kafkaconf import secured
from common.waits import wait_for
from harness.substrate.api import READY_TOPIC

if TYPE_CHECKING:
    from harness.substrate.api import Cluster

QUIET = {"log_level": 0}


def transactional_round_trip(cluster: Cluster, timeout: float) -> None:
    """A committed transaction over every partition of a replicated topic, read back with
    read_committed through the clients' path (toxiproxy)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    deadline = time.monotonic() + timeout
    n = len(cluster.node_ids())
    # The cluster's replication factor and min ISR: a write must meet the same min ISR as
    # the workload's will.
    cluster.ensure_topic(READY_TOPIC, n, timeout=timeout)
    producer = Producer(
        secured(
            {
                **QUIET,
                "bootstrap.servers": cluster.bootstrap,
                "transactional.id": f"harness-ready-{cluster.run_id}",
                "transaction.timeout.ms": 30000,
            }
        )
    )
    try:
        producer.init_transactions(max(1.0, deadline - time.monotonic()))
        producer.begin_transaction()
        for p in range(n):
            producer.produce(READY_TOPIC, value=f"ready-{p}".encode(), partition=p)
        producer.commit_transaction(max(1.0, deadline - time.monotonic()))
    except Exception as exc:
        raise HarnessError(f"readiness transaction failed: {exc}") from None
    finally:
        producer.flush(1)
    consumer = Consumer(
        secured(
            {
                **QUIET,
                "bootstrap.servers": cluster.bootstrap,
                "group.id": f"harness-ready-{cluster.run_id}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
    )
    try:
        consumer.assign([TopicPartition(READY_TOPIC, p, 0) for p in range(n)])
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
