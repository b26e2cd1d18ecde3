"""The queue workload's final read: Jepsen's final-poll phase, as ops of their own.

A fresh read_committed consumer assigned to every key polls until each key's reads reach the
end the supervisor measured, and records what it read as ``assign`` and ``poll`` ops, so the
checker sees the final state in the same shapes as the clients' ops.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from common.kafkaconf import secured
from history import Recorder
from workloads.queue.config import decode_value

log = logging.getLogger("workloads.queue.supervisor")


def read_to_end(
    rec: Recorder,
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int | None],
    group_id: str,
    timeout: float,
) -> bool:
    """Record an ``assign`` of every key, then ``poll`` ops until each key's reads reached
    ``ends[key]`` (a record at ``end - 1``, or end-of-partition at or past ``end``; an end of
    ``None`` means unknown: the first end-of-partition will do)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    keys = sorted(ends)
    consumer = Consumer(
        secured(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group_id,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "log_level": 3,
            }
        )
    )
    try:
        rec.invoke("assign", keys)
        consumer.assign([TopicPartition(topic, k, OFFSET_BEGINNING) for k in keys])
        rec.ok("assign", keys)
        target = {k: -1 if end is None else end for k, end in ends.items()}
        pending = {k for k in keys if target[k] != 0}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            rec.invoke("poll", [["poll"]])
            msgs = consumer.consume(500, 0.5)
            result: dict[str, list[list[Any]]] = {}
            for m in msgs:
                err = m.error()
                k = m.partition()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= target.get(k, 0):
                            pending.discard(k)
                    else:
                        log.warning("final read: consumer event: %s", err)
                    continue
                result.setdefault(str(k), []).append([m.offset(), decode_value(m.value())])
                if 0 <= target.get(k, 0) <= m.offset() + 1:
                    pending.discard(k)
            rec.ok("poll", [["poll", result]])
        if pending:
            log.warning("final read did not reach the end of keys %s", sorted(pending))
        return not pending
    finally:
        consumer.close()
