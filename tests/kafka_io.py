"""Small client helpers for the substrate's integration tests (real clients, real cluster)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

QUIET = {"log_level": 0}


def transactional_write(bootstrap: str, topic: str, values: dict[int, list[str]]) -> None:
    """One transaction writing ``values[p]`` to each partition ``p``, committed."""
    producer = Producer(
        {**QUIET, "bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for p, vs in values.items():
        for v in vs:
            producer.produce(topic, value=v.encode(), partition=p)
    producer.commit_transaction(30)


def read_committed(
    bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 30.0
) -> dict[int, list[str]]:
    """Read from the start until ``expect`` records arrived (or the timeout)."""
    consumer = Consumer(
        {
            **QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    out: dict[int, list[str]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        got = 0
        while got < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out[msg.partition()].append(msg.value().decode())
            got += 1
    finally:
        consumer.close()
    return out


def client_metadata(bootstrap: str) -> Any:
    """Metadata as a workload sees it (through the given bootstrap)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({**QUIET, "bootstrap.servers": bootstrap}).list_topics(timeout=10)
