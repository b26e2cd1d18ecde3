"""A broker cut from the controller quorum and from its followers, while it coordinates the
clients' groups and the clients still reach it.

KAFKA-20634 (docs/findings.md): a group coordinator whose ``__consumer_offsets`` partition
moves away stays active until it is unloaded. On Kafka 4.3.0 the new leader's high
watermark, fetched in that gap, completes the old coordinator's pending offset commits as
successes although the log they were written to has been truncated: the clients were told
their commits succeeded, and they are gone.

The fault opens that gap:

1. The broker that coordinates most of the clients' groups (``ClientControl.state_keys``
   and ``group_id``) is cut from the controllers (its controller port dropped both ways)
   and its followers from it (its inter-broker listener closed to its peers:
   ``NetworkFaults.cut_controller(followers=True)``). The clients still reach it and it
   still fetches as a follower, so it keeps coordinating while the controller fences it
   and moves its offsets partitions. Every commit it takes from the cut on is on its own
   log alone and stays pending (the brokers' ``offsets.commit.timeout.ms`` must outlast the
   cut): one per client blocked in a synchronous commit.
2. Once the partitions holding the clients' groups have moved, a few fresh groups per such
   partition commit one offset each through the other brokers, so each new leader writes a
   few records past the point where the logs diverge.
3. At the end the cut heals: the broker learns of the move, truncates, fetches from the new
   leaders and unloads; the fault waits until it is back in their in-sync replicas. Kafka
   4.3.1 on ignores the high watermark once the partition is a follower's; 4.3.0 completes
   as many pending commits as the new leader wrote records, and those are lost.
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
#: Fresh groups per aimed partition, one offset each: how far each new leader writes past
#: the divergence, so how many of the old coordinator's pending commits its high watermark
#: completes on 4.3.0. Fewer than the clients blocked there: a high watermark past the old
#: coordinator's last write is refused ("must be less than or equal to"), and nothing
#: completes.
LATE_PER_PARTITION = 3
#: How long a late group's commit may take to be acknowledged (the new coordinator loads
#: the partition first).
LATE_COMMIT_TIMEOUT_S = 20.0


def controller_cut_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"pick": rng.randrange(1 << 30)}


def _client_partitions(ctx: FaultContext) -> Counter[int]:
    """How many of the groups the clients name (``ClientControl.group_id`` and
    ``state_keys``) each ``__consumer_offsets`` partition holds."""
    c, clients = ctx.cluster, ctx.clients
    if clients is None:
        return Counter()
    keys = [clients.group_id] + [k.key for k in clients.state_keys() if k.topic == OFFSETS]
    return Counter(c.coordinator_partition(OFFSETS, key) for key in keys)


def _busiest_coordinator(homes: Counter[int], ctx: FaultContext, pick: int) -> tuple[int, str]:
    """The broker that coordinates most of the clients' groups (``homes``: groups per
    partition; ties broken by the pick), or a broker by the pick when they name no group.
    One leader lookup per partition, however many groups it holds."""
    c = ctx.cluster
    counts: Counter[int] = Counter()
    for partition, groups in homes.items():
        with contextlib.suppress(Exception):  # no live broker knows the log yet
            node = c.leader(OFFSETS, partition)
            if node is not None:
                counts[node] += groups
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
    homes = _client_partitions(ctx)
    target, why = _busiest_coordinator(homes, ctx, int(params.get("pick", 0)))
    led = [p for p in range(c.partition_count(OFFSETS)) if c.leader(OFFSETS, p) == target]
    # The partitions whose commits matter: the clients' own (all of them without clients).
    aimed = [p for p in led if p in homes] or led
    c.cut_controller(target, followers=True)
    details: dict[str, Any] = {"targets": [target], "why": why, "led": led, "moved": []}
    if not aimed:
        return details
    verify(
        lambda: all(c.leader(OFFSETS, p) not in (target, None) for p in aimed),
        MOVE_TIMEOUT_S,
        f"the {OFFSETS} partitions {aimed} of node {target} moved",
    )
    details["moved"] = aimed
    details["late_groups"] = _write_past(ctx, target, aimed)
    return details


def _write_past(ctx: FaultContext, target: int, moved: list[int]) -> int:
    """``LATE_PER_PARTITION`` fresh groups per moved partition commit through the other
    brokers (the cut one still believes it coordinates them), each commit acknowledged, so
    each new leader holds that many records past the divergence; how many did."""
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
    # Back in sync: it has truncated and caught up, so the next fault cannot cut the
    # leader it fetches from before it has.
    moved = details.get("moved", [])
    verify(
        lambda: all(target in c.isr(OFFSETS, p) for p in moved),
        MOVE_TIMEOUT_S,
        f"node {target} back in the in-sync replicas of {OFFSETS} {moved}",
    )
    return {"healed": True}
