"""Symbolic targets, resolved when a fault is injected.

A schedule says "the transaction coordinator of processor slot 1" or "the leader of output
partition 2", not "node 3": which node that is depends on the moment. Resolution happens at
injection, and both the role and the node it resolved to are written into the history, so a
reader sees which node was hit and why.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, NamedTuple

from history.clientcontrol import ClientControl
from nemeses.control import ClusterControl

BROKER_ROLES = ("txn-coordinator", "group-coordinator", "leader", "controller", "random")

#: Bits of a ``pick`` below this shift choose the instance (or node); the bits above choose
#: among what the clients name: a role among their processes
#: (``ClientControl.processor_roles``) for a processor fault, a piece of their group state
#: (``ClientControl.state_keys``) for ``group-coordinator``. A schedule drawn before those
#: existed resolves exactly as it did, for clients that name none.
ROLE_SHIFT = 20


@dataclass
class FaultContext:
    """What a fault acts on; ``clients`` is None when no workload processes exist."""

    cluster: ClusterControl
    clients: ClientControl | None = None


def choose_broker_role(rng: random.Random, has_clients: bool) -> dict[str, Any]:
    """Pick a role and the sub-choice that makes it concrete, from the schedule's RNG."""
    roles = BROKER_ROLES if has_clients else ("controller", "random")
    return {"role": rng.choice(roles), "pick": rng.randrange(1 << 30)}


def _slot_pick(items: list[Any], pick: int) -> Any:
    return sorted(items)[pick % len(items)]


def resolve_broker(ctx: FaultContext, params: dict[str, Any]) -> tuple[int, str]:
    """The node a broker role points at now, with a human reason."""
    role = params.get("role", "random")
    if role == "fixed":  # resolved already by a fault that aims at one client's coordinator
        return int(params["node"]), str(params.get("why", f"node {params['node']}"))
    pick = int(params.get("pick", 0))
    cluster, clients = ctx.cluster, ctx.clients
    node: int | None = None
    why = ""
    if clients is not None and role == "txn-coordinator":
        tids = clients.transactional_ids()
        if tids:
            tid = _slot_pick(list(tids.values()), pick)
            node, why = cluster.txn_coordinator(tid), f"txn coordinator of {tid}"
    elif clients is not None and role == "group-coordinator":
        node, why = _group_coordinator(cluster, clients, pick)
    elif clients is not None and role == "leader":
        topic = clients.output_topic if pick % 2 else clients.input_topic
        partition = (pick // 2) % 64
        node = _leader_of(cluster, topic, partition)
        why = f"leader of {topic} (partition pick {partition})"
    elif role == "controller":
        node, why = cluster.active_controller(), "active controller"
    if node is None:
        node = _slot_pick(cluster.node_ids(), pick)
        why = why + " unavailable; random node" if why else "random node"
    return node, why


def _group_coordinator(
    cluster: ClusterControl, clients: ClientControl, pick: int
) -> tuple[int | None, str]:
    """The group's coordinator, or one of the coordinators of the rest of its state.

    A share group's state is spread over share coordinators, one per share partition's
    state key (``ClientControl.state_keys``); the pick's high bits, k, choose the group
    coordinator (k = 0) or the leader of the log partition that holds key k - 1. Clients
    with no state keys get the group coordinator whatever the pick, as before keys existed.
    """
    group = clients.group_id
    keys = clients.state_keys()
    choice = (pick >> ROLE_SHIFT) % (1 + len(keys)) if keys else 0
    if not choice:
        return cluster.group_coordinator(group), f"group coordinator of {group}"
    state = keys[choice - 1]
    partition = cluster.coordinator_partition(state.topic, state.key)
    why = f"{state.coordinator} of {group} (leader of {state.topic}-{partition}, for {state.holds})"
    try:
        return cluster.leader(state.topic, partition), why
    except Exception:  # no live broker knows the log yet: nobody to hit there
        return None, why


def _leader_of(cluster: ClusterControl, topic: str, partition: int) -> int | None:
    # The partition pick is taken modulo the partitions that exist.
    for p in (partition, partition % 8, partition % 4, partition % 2, 0):
        try:
            return cluster.leader(topic, p)
        except Exception:  # that partition does not exist; try a smaller index
            continue
    return None


class ProcessorTarget(NamedTuple):
    instance: int
    pid: int
    why: str


def resolve_processor(
    ctx: FaultContext, params: dict[str, Any], among: Collection[int] | None = None
) -> ProcessorTarget | None:
    """The processor a pick points at now, or None; ``among`` limits the pick to those
    instances (the ones a fault can act on).

    Clients that know roles among their processes (Connect: the group's leader, the worker
    that runs a given task) get one of them, or the plain pick, from the pick's high bits;
    a role that resolves to nobody falls back to the plain pick, and ``why`` says which.
    """
    if ctx.clients is None:
        return None
    pids = ctx.clients.processor_pids()
    if among is not None:
        pids = {i: pid for i, pid in pids.items() if i in among}
    if not pids:
        return None
    pick = int(params.get("pick", 0))
    roles = ctx.clients.processor_roles
    fallback = ""
    if roles:
        choice = (pick >> ROLE_SHIFT) % (len(roles) + 1)
        if choice:
            role = roles[choice - 1]
            aimed = ctx.clients.aim_processor(role, pick)
            if aimed is not None and aimed[0] in pids:
                instance, why = aimed
                return ProcessorTarget(
                    instance, pids[instance], f"processor instance {instance}, {why}"
                )
            fallback = f" ({role} unavailable)"
    instance = _slot_pick(list(pids), pick)
    return ProcessorTarget(instance, pids[instance], f"processor instance {instance}{fallback}")
