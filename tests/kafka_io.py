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


def commit_one_then_begin_next(producer: Producer, topic: str) -> None:
    """T1 writes ``t1`` and commits, retrying the EndTxn whose connection a hold toxic drops;
    T2 begins and writes ``t2`` (flushed, so its AddPartitionsToTxn went out) and stays open."""
    from confluent_kafka import KafkaException

    producer.begin_transaction()
    producer.produce(topic, value=b"t1", partition=0)
    for _ in range(5):
        try:
            producer.commit_transaction(30)
            break
        except KafkaException as exc:
            assert exc.args[0].retriable(), exc
    producer.begin_transaction()
    producer.produce(topic, value=b"t2", partition=0)
    assert producer.flush(10) == 0


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
