"""A broker cut from the controller quorum alone, while it coordinates the clients' groups.

KAFKA-20634 (docs/findings.md): a group coordinator whose ``__consumer_offsets`` partition
moves away stays active until it is unloaded. On Kafka 4.3.0 the new leader's high
watermark, fetched in that gap, completes the old coordinator's pending offset commits as
successes although the log they were written to has been truncated: the clients were told
their commits succeeded, and they are gone.

The fault opens that gap in the shape the probe measured (``bench/kafka_20634_window.py``):

1. The broker that coordinates most of the clients' groups (``ClientControl.state_keys``
   and ``group_id``) is cut from the controllers only: its controller port dropped both ways
   (``NetworkFaults.cut_controller``). Replication and the clients' traffic still flow, so
   it keeps coordinating while the controller fences it and moves its offsets partitions;
   its followers leave it, and the commits it takes from then on stay pending (the brokers'
   ``offsets.commit.timeout.ms`` must outlast the cut).
2. Once a partition has moved, one fresh group per moved partition commits one offset
   through the other brokers, so each new leader writes one record past the point where
   the logs diverge: its high watermark then lands on the end of the old coordinator's first
   pending write (each pending commit of one offset is one record).
3. At the end the cut heals: the broker learns of the move, truncates, fetches from the new
   leaders and unloads. Kafka 4.3.1 on ignores the high watermark once the partition is a
   follower's; 4.3.0 does not.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from typing import Any

from nemeses.faults.base import FaultError, verify
from nemeses.targets import FaultContext

OFFSETS = "__consumer_offsets"
#: How long the controller may take to fence the cut broker and move its partitions
#: (``broker.session.timeout.ms``, 9 s by default, and the elections).
MOVE_TIMEOUT_S = 60.0
#: Fresh groups per moved partition, one offset each: how far each new leader writes past
#: the divergence. The old coordinator can apply the new leader's high watermark only where
#: it has a snapshot, at the end of one of its own writes, and not past its last write
#: ("must be less than or equal to" otherwise): its pending tail holds one record per
#: committer waiting there, often just one, so one record is what lands inside it.
LATE_PER_PARTITION = 1
#: How long a late group's commit may take to be acknowledged (the new coordinator loads
#: the partition first).
LATE_COMMIT_TIMEOUT_S = 20.0


def controller_cut_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"pick": rng.randrange(1 << 30)}


def _busiest_coordinator(ctx: FaultContext, pick: int) -> tuple[int, str]:
    """The broker that coordinates most of the clients' groups (ties: by the pick), or a
    broker by the pick when the clients name no group."""
    c, clients = ctx.cluster, ctx.clients
    counts: Counter[int] = Counter()
    if clients is not None:
        keys = [clients.group_id] + [k.key for k in clients.state_keys() if k.topic == OFFSETS]
        for key in keys:
            with contextlib.suppress(Exception):  # no live broker knows the log yet
                node = c.leader(OFFSETS, c.coordinator_partition(OFFSETS, key))
                if node is not None:
                    counts[node] += 1
    if not counts:
        nodes = sorted(c.node_ids())
        return nodes[pick % len(nodes)], "random node (no group coordinator known)"
    top = max(counts.values())
    busiest = sorted(n for n, k in counts.items() if k == top)
    node = busiest[pick % len(busiest)]
    return node, f"group coordinator of {top} of the clients' {sum(counts.values())} groups"


def controller_cut_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Cut, wait for a move, write past the divergence; returns with the cut in place."""
    c = ctx.cluster
    if not c.uses_netns:
        raise FaultError("a controller cut needs network namespaces (root)")
    target, why = _busiest_coordinator(ctx, int(params.get("pick", 0)))
    led = [p for p in range(c.partition_count(OFFSETS)) if c.leader(OFFSETS, p) == target]
    c.cut_controller(target)
    details: dict[str, Any] = {"targets": [target], "why": why, "led": led, "moved": []}
    if not led:
        return details
    verify(
        lambda: any(c.leader(OFFSETS, p) not in (target, None) for p in led),
        MOVE_TIMEOUT_S,
        f"an {OFFSETS} partition of node {target} moved",
    )
    moved = [p for p in led if c.leader(OFFSETS, p) not in (target, None)]
    details["moved"] = moved
    details["late_groups"] = _write_past(ctx, target, moved)
    return details


def _write_past(ctx: FaultContext, target: int, moved: list[int]) -> int:
    """A fresh group per moved partition commits through the other brokers (the cut one
    still believes it coordinates them), each commit acknowledged, so each new leader holds
    one record past the divergence; how many did."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c, clients = ctx.cluster, ctx.clients
    if clients is None:
        return 0
    addresses = clients.bootstrap.split(",")
    nodes = c.node_ids()
    if len(addresses) != len(nodes):
        return 0  # the client path does not list one address per broker: nothing to aim
    others = ",".join(a for n, a in zip(nodes, addresses, strict=True) if n != target)
    late: list[str] = []
    for partition in moved:
        names = (f"{clients.group_id}-late-{i}" for i in range(1000 * len(moved)))
        mine = (g for g in names if c.coordinator_partition(OFFSETS, g) == partition)
        late += [next(mine) for _ in range(LATE_PER_PARTITION)]
    offsets = [TopicPartition(clients.input_topic, 0, 1)]
    done = 0
    for group in late:
        consumer = Consumer({"bootstrap.servers": others, "group.id": group, "log_level": 0})
        try:

            def acknowledged(consumer: Any = consumer) -> bool:
                try:
                    consumer.commit(offsets=offsets, asynchronous=False)
                except KafkaException:  # the new coordinator still loading, or not found yet
                    return False
                return True

            verify(acknowledged, LATE_COMMIT_TIMEOUT_S, f"{group}'s commit acknowledged")
            done += 1
        finally:
            consumer.close()
    return done


def controller_cut_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    c = ctx.cluster
    target = details["targets"][0]
    c.heal()
    verify(lambda: target in c.registered_brokers(), MOVE_TIMEOUT_S, f"node {target} back")
    return {"healed": True}
