"""Topic faults: partitions added to the clients' input topic while they consume it.

Kafka lets an operator add partitions at any time; a consumer group must then start
consuming them, and a share group must initialise their share partitions. KAFKA-20742: a
share group whose ``share.auto.offset.reset`` is ``latest`` (Kafka's default) started the
share partitions of partitions added to a topic it already consumed at the latest offset,
so the records written to them before that were never delivered.
"""

from __future__ import annotations

import random
from typing import Any

from nemeses.faults.base import FaultError
from nemeses.targets import FaultContext

#: A fault adds between one and this many partitions.
MAX_ADDED = 2


def add_partitions_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"add": rng.randint(1, MAX_ADDED)}


def add_partitions_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Grow the clients' input topic by ``add`` partitions, led and fully replicated before
    it returns."""
    if ctx.clients is None:
        raise FaultError("add-partitions needs the clients' input topic")
    topic = ctx.clients.input_topic
    before = ctx.cluster.partition_count(topic)
    after = before + int(params.get("add", 1))
    ctx.cluster.add_partitions(topic, after)
    return {"topic": topic, "partitions": [before, after], "why": f"{topic}: {before} -> {after}"}
