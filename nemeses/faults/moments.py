"""Protocol moments: processors armed to act on themselves (SIGKILL, SIGSTOP, an abortable
failure) between produce, offset commit and EndTxn, and the coordinator of such a moment
paused, isolated or cut while the request is about to go out."""

from __future__ import annotations

import random
from typing import Any

from common.procfs import process_state
from history.moments import ABORT_MOMENTS, MOMENTS
from nemeses.faults import brokers, clients, network
from nemeses.faults.base import (
    FaultError,
    arm,
    disarm,
    hooks,
    resume,
    stop_at_moment,
    verify,
)
from nemeses.targets import FaultContext

#: Moments where the next request goes to a coordinator, and which one: the offset commit
#: (TxnOffsetCommit, or OffsetCommit outside a transaction) to the group coordinator, EndTxn
#: to the transaction coordinator.
COORDINATOR_MOMENTS = {
    "before-offsets": "group-coordinator",
    "before-commit": "txn-coordinator",
    "after-commit": "group-coordinator",
}


#: Processors armed by one crash-clients event, each at a different moment of the cycle.
ARMED_PER_EVENT = 3


def crash_moments(order: list[str], n: int) -> list[str]:
    """The moments of the ``n``-th crash-clients event: the next ``ARMED_PER_EVENT`` of a
    seeded cycle through MOMENTS, so two events that fire cover every moment."""
    return [order[(n * ARMED_PER_EVENT + j) % len(order)] for j in range(ARMED_PER_EVENT)]


def crash_actions(moments: list[str], n: int) -> list[str]:
    """What each armed processor of the ``n``-th event does at its moment: one of the event's
    moments before EndTxn fails the transaction with an abortable error, the others SIGKILL.
    The aborted moment rotates between the events that arm the same moments, so each moment
    is a kill in some event too (an event with a single such moment aborts in every other
    turn). A client whose abort path is wrong (it does not read the aborted inputs again) is
    only exposed by an abort, and by default nothing else makes a processor abort while it
    keeps its partitions."""
    early = [j for j, at in enumerate(moments) if at in ABORT_MOMENTS]
    turns: list[int | None] = early if len(early) != 1 else [*early, None]
    actions = ["kill"] * len(moments)
    pick = turns[(n // 2) % len(turns)] if turns else None
    if pick is not None:
        actions[pick] = "abort"
    return actions


def crash_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    # ``moments`` is set by the schedule (it knows the event's place in the cycle).
    return {"pick": rng.randrange(1 << 30), "delay_ms": rng.randrange(0, 20)}


def crash_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Jepsen's crash-clients: processors die at protocol moments, one stream of the run.

    With hook points, up to ``ARMED_PER_EVENT`` live processors are armed, each at a
    different moment of the seeded cycle, to SIGKILL itself there or (``actions``, see
    :func:`crash_actions`) to fail its transaction with an abortable error; the window (the
    event's duration) lets them reach it, ``crash_stop`` reads back which moment fired in which
    transaction. Without hooks (Kafka's copier, the queue's clients) one processor is killed
    at once. Schedules saved before ``actions`` existed replay as kills only.
    """
    if ctx.clients is None:
        raise FaultError("crash-clients needs workload processes")
    if not hooks(ctx):
        details = clients.processor_kill_start(ctx, params)
        return {**details, "mode": "direct", "why": details["why"] + " (no hook points)"}
    pids = ctx.clients.processor_pids()
    instances = sorted(pids)
    if not instances:
        raise FaultError("no live processor to arm")
    start = int(params.get("pick", 0)) % len(instances)
    rotated = instances[start:] + instances[:start]
    moments = list(params["moments"])
    actions = list(params.get("actions") or ["kill"] * len(moments))
    armed: dict[str, str] = {}
    why: list[str] = []
    for instance, at, action in zip(rotated, moments, actions, strict=False):
        if arm(ctx, instance, at, action, int(params.get("delay_ms", 0))):
            armed[str(instance)] = at
            why.append(f"{action} at {at} (instance {instance})")
    if not armed:
        # Not an error: a failed start heals the cluster, which would cut short a broker
        # fault of the other stream. Every processor is starting (after the last crash).
        return {"targets": [], "mode": "none", "why": "no processor could be armed (starting)"}
    return {
        "targets": sorted(int(i) for i in armed),
        "mode": "armed",
        "armed": armed,
        "pids": {str(i): pids[int(i)] for i in armed},
        "why": ", ".join(why),
    }


def crash_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    """Which armed moments fired (moment, transaction, instance); disarm the others."""
    if details.get("mode") != "armed" or ctx.clients is None:
        return {}
    hit: list[dict[str, Any]] = []
    missed: list[dict[str, Any]] = []
    for key, at in details["armed"].items():
        instance = int(key)
        fired = ctx.clients.fired_hook(instance)
        if fired is None:
            disarm(ctx, instance)
            fired = ctx.clients.fired_hook(instance)  # it may have fired meanwhile
        if fired is None:
            missed.append({"instance": instance, "at": at})
            continue
        action = fired.get("action", "kill")
        if action == "kill":
            pid = details["pids"][key]
            verify(
                lambda pid=pid: process_state(pid) in (None, "Z"), 10, f"instance {instance} gone"
            )
        hit.append({"instance": instance, "at": fired["at"], "txn": fired["txn"], "action": action})
    return {"hit": hit, "missed": missed}


def moment_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"pick": rng.randrange(1 << 30), "at": rng.choice(MOMENTS)}


def pause_at_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """A processor stops itself at a protocol moment (a GC pause that lands mid-commit)."""
    instance, pid, fired = stop_at_moment(ctx, params)
    return {
        "targets": [instance],
        "pid": pid,
        "at": fired.get("at"),
        "txn": fired.get("txn"),
        "why": f"processor instance {instance} paused at {fired.get('at')} of txn "
        f"{fired.get('txn')}",
    }


def coordinator_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    """The seed picks a pause, an isolation or a client cut; a recipe may pin ``"kill"``
    (a SIGKILL, the broker restarted when the fault ends), which is left out of the draw so
    that a seed keeps the schedule it always had."""
    return {
        "pick": rng.randrange(1 << 30),
        "at": rng.choice(sorted(COORDINATOR_MOMENTS)),
        "fault": rng.choice(["pause", "partition", "client-cut"]),
        "mode": rng.choice(["down", "timeout"]),
    }


def _coordinator_of(ctx: FaultContext, instance: int, role: str) -> tuple[int, str]:
    """The coordinator that THIS processor's next request goes to."""
    assert ctx.clients is not None
    tid = ctx.clients.transactional_ids().get(instance)
    if role == "txn-coordinator" and tid is not None:
        node, why = ctx.cluster.txn_coordinator(tid), f"txn coordinator of {tid}"
    else:
        group = ctx.clients.group_id
        node, why = ctx.cluster.group_coordinator(group), f"group coordinator of {group}"
    if node is None:
        raise FaultError(f"no {why} known")
    return node, why


def coordinator_at_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Fault a processor's coordinator just as its offset commit or EndTxn goes out.

    The processor stops itself at the moment, the broker fault is applied to the coordinator
    resolved for its transactional id (or group), then the processor continues into it.
    """
    instance, pid, fired = stop_at_moment(ctx, params)
    try:
        node, why = _coordinator_of(ctx, instance, COORDINATOR_MOMENTS[params["at"]])
        fault = params["fault"]
        if fault == "partition" and not ctx.cluster.uses_netns:
            fault = "client-cut"  # no namespaces: cut the client path instead
        sub = {"role": "fixed", "node": node, "why": why, "mode": params["mode"], "seed": 0}
        if fault == "pause":
            applied = brokers.pause_start(ctx, sub)
        elif fault == "kill":
            applied = brokers.kill_start(ctx, {**sub, "clean": False})
        elif fault == "partition":
            applied = network.partition_start(ctx, {**sub, "shape": "isolate"})
        else:
            applied = network.client_cut_start(ctx, sub)
    finally:
        resume(pid)
    return {
        **applied,
        "fault": fault,
        "processor": instance,
        "at": fired.get("at"),
        "txn": fired.get("txn"),
        "why": f"{fault} {why} at {fired.get('at')} of txn {fired.get('txn')} "
        f"(processor instance {instance})",
    }


def coordinator_at_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    fault = details["fault"]
    if fault == "pause":
        return brokers.pause_stop(ctx, details)
    if fault == "kill":
        return brokers.kill_stop(ctx, details)
    if fault == "partition":
        return network.partition_stop(ctx, details)
    return network.client_cut_stop(ctx, details)
