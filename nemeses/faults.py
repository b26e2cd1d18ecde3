"""Fault kinds: each one is an injection and its exact inverse, both verified.

A fault's ``start`` returns the details of what it did (targets, why, and whatever ``stop``
needs to undo exactly that); ``stop`` undoes it. Neither assumes: a cut is probed, a pause is
read back from the kernel, a killed node is seen gone and its restart seen registered.
Parameters come from the schedule (seeded), so the same schedule means the same faults.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
from collections.abc import Callable
from itertools import combinations
from typing import Any

from common.procfs import catches_signal, process_state
from nemeses.targets import (
    FaultContext,
    ProcessorTarget,
    choose_broker_role,
    resolve_broker,
    resolve_processor,
)


class FaultError(RuntimeError):
    """A fault could not be applied or verified."""


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except Exception:  # a broker still starting refuses: not yet
            pass
        if time.monotonic() > deadline:
            raise FaultError(f"not verified within {timeout:.0f}s: {what}")
        time.sleep(0.02)


# --- partitions -------------------------------------------------------------------------


def _partition_groups(nodes: list[int], shape: str, target: int, rng: random.Random):
    """Pairs of node groups to cut, for a shape, with ``target`` on the smaller side."""
    others = [n for n in nodes if n != target]
    rng.shuffle(others)
    if shape == "isolate" or len(nodes) < 3:
        return [([target], others)]
    if shape == "halves":
        minority = [target, *others[: (len(nodes) - 1) // 2 - 1]]
        majority = [n for n in nodes if n not in minority]
        return [(minority, majority)]
    if shape == "bridge":
        # ``target`` is the bridge: it sees both halves, which cannot see each other.
        half = len(others) // 2
        return [(others[:half], others[half:])]
    if shape == "ring":
        ring = [target, *others]
        adjacent = {frozenset((ring[i], ring[(i + 1) % len(ring)])) for i in range(len(ring))}
        return [([a], [b]) for a, b in combinations(nodes, 2) if frozenset((a, b)) not in adjacent]
    raise FaultError(f"unknown partition shape {shape!r}")


def partition_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    shapes = (
        ["isolate", "halves"]
        + (["bridge"] if nodes >= 3 else [])
        + (["ring"] if nodes >= 5 else [])
    )
    return {
        "shape": rng.choice(shapes),
        "seed": rng.randrange(1 << 30),
        **choose_broker_role(rng, has_clients),
    }


def partition_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    c = ctx.cluster
    if not c.uses_netns:
        raise FaultError("partitions need network namespaces (root)")
    target, why = resolve_broker(ctx, params)
    groups = _partition_groups(
        c.node_ids(), params["shape"], target, random.Random(params.get("seed", 0))
    )
    for a, b in groups:
        c.partition(a, b)
    pairs = [(x, y) for a, b in groups for x in a for y in b]
    for x, y in pairs[:4]:
        if c.can_reach(x, y):
            raise FaultError(f"node {x} still reaches node {y} after the cut")
    return {"targets": [target], "why": why, "groups": groups, "pairs": pairs}


def partition_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    c = ctx.cluster
    c.heal()
    for x, y in details.get("pairs", [])[:4]:
        _wait(lambda x=x, y=y: c.can_reach(x, y), 10, f"node {x} reaches {y} after heal")
    return {"healed": True}


# --- client-path cuts and slow links (toxiproxy) ---------------------------------------


def client_cut_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"mode": rng.choice(["down", "timeout"]), **choose_broker_role(rng, has_clients)}


def client_cut_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    target, why = resolve_broker(ctx, params)
    if params["mode"] == "down":
        ctx.cluster.proxy_down(target)
        return {"targets": [target], "why": why, "mode": "down"}
    name = ctx.cluster.add_toxic(
        target, "timeout", {"timeout": 0}, stream="upstream", name="nemesis_cut"
    )
    return {"targets": [target], "why": why, "mode": "timeout", "toxic": name}


def client_cut_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    target = details["targets"][0]
    if details["mode"] == "down":
        ctx.cluster.proxy_up(target)
    else:
        ctx.cluster.remove_toxic(target, details["toxic"])
    return {"healed": True}


def slow_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    mode = rng.choice(["latency", "bandwidth", "slicer"])
    attrs: dict[str, Any]
    if mode == "latency":
        attrs = {"latency": rng.randrange(100, 1000), "jitter": rng.randrange(0, 300)}
    elif mode == "bandwidth":
        attrs = {"rate": rng.choice([16, 64, 256])}  # KB/s
    else:
        attrs = {"average_size": 64, "size_variation": 32, "delay": 500}  # delay in µs
    return {
        "mode": mode,
        "attributes": attrs,
        "stream": rng.choice(["upstream", "downstream"]),
        **choose_broker_role(rng, has_clients),
    }


def slow_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    target, why = resolve_broker(ctx, params)
    name = ctx.cluster.add_toxic(
        target, params["mode"], params["attributes"], stream=params["stream"], name="nemesis_slow"
    )
    return {"targets": [target], "why": why, "toxic": name}


def toxic_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    ctx.cluster.remove_toxic(details["targets"][0], details["toxic"])
    return {"healed": True}


def late_request_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    role = rng.choice(["leader", "txn-coordinator"]) if has_clients else "random"
    return {"role": role, "pick": rng.randrange(1 << 30), "delay_ms": 0}


def late_request_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Hold the client->broker direction of one node's proxy past the transaction timeout.

    Requests already sent sit in the proxy; when the fault stops they are let through, late:
    KIP-890's "late produce request from an aborted transaction" made on purpose.
    """
    target, why = resolve_broker(ctx, params)
    delay = int(params.get("delay_ms") or 0)
    if delay <= 0 and ctx.clients is not None:
        delay = int(ctx.clients.transaction_timeout_s * 1000) + 5000
    delay = delay or 65000
    name = ctx.cluster.add_toxic(
        target, "latency", {"latency": delay, "jitter": 0}, stream="upstream", name="nemesis_late"
    )
    return {"targets": [target], "why": why, "toxic": name, "delay_ms": delay}


#: Kafka API keys ``late-endtxn`` holds or waits for.
END_TXN_API_KEY = 26
#: The first request of a producer's next transaction: AddPartitionsToTxn (transaction
#: versions 0/1), or Produce (version 2 adds partitions implicitly).
NEXT_TXN_API_KEYS = (24, 0)


def _processor_tid(ctx: FaultContext, params: dict[str, Any]) -> tuple[int, str]:
    """The processor a pick points at and its transactional id now."""
    instance = _processor(ctx, params).instance
    assert ctx.clients is not None
    tid = ctx.clients.transactional_ids().get(instance)
    if tid is None:
        raise FaultError(f"processor instance {instance} has no transactional id yet")
    return instance, tid


def late_endtxn_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {
        "pick": rng.randrange(1 << 30),
        "end_txn": "commit" if rng.random() < 0.75 else "abort",
        # Past the coordinator's write of the next AddPartitionsToTxn (an earlier late
        # EndTxn is answered CONCURRENT_TRANSACTIONS and does nothing).
        "release_delay_ms": rng.randrange(50, 250),
    }


def late_endtxn_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Withhold one processor's next EndTxn and deliver it after its next transaction began.

    The toxic on the processor's transaction coordinator's proxy drops the connection the
    EndTxn came on (the client retries it at once, and that retry goes through), keeps the
    request's bytes, and writes them to the broker ``release_delay_ms`` after the same
    transactional id's next AddPartitionsToTxn: KAFKA-17754's "delayed EndTxn" on purpose.
    A transaction protocol that tells transactions apart (KIP-890's version 2 bumps the
    epoch at every EndTxn) refuses the late request; one that does not applies it to the
    transaction under way.
    """
    instance, tid = _processor_tid(ctx, params)
    node = ctx.cluster.txn_coordinator(tid)
    if node is None:
        raise FaultError(f"no transaction coordinator known for {tid}")
    arm = ctx.cluster.hold_request(
        node,
        api_key=END_TXN_API_KEY,
        transactional_id=tid,
        end_txn=params["end_txn"],
        release_on_api_keys=list(NEXT_TXN_API_KEYS),
        release_delay_ms=int(params["release_delay_ms"]),
        max_hold_ms=int(params.get("max_hold_ms", 60000)),
    )
    return {
        "targets": [node],
        "processor": instance,
        "transactional_id": tid,
        "arm": arm,
        "why": f"hold the next EndTxn({params['end_txn']}) of {tid} at its txn coordinator "
        f"{node}; deliver it {params['release_delay_ms']} ms after its next transaction's "
        "first AddPartitionsToTxn or Produce",
    }


def late_endtxn_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    return _held_summary(ctx.cluster.release_held(details["targets"][0], details["arm"]))


#: What a stop records of each held request: enough to find its batch (producer id, epoch,
#: topic, partition, base sequence) or its marker in the broker log dump.
_HELD_FIELDS = (
    "node",
    "correlation_id",
    "producer_id",
    "producer_epoch",
    "committed",
    "topic",
    "partition",
    "base_sequence",
    "held_at_ms",
    "trigger",
    "trigger_at_ms",
    "released_at_ms",
    "error_code",
    "failure",
)


def _held_summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    held = [{k: e[k] for k in _HELD_FIELDS if k in e} for e in events]
    return {"held": held, "late_delivered": sum(1 for e in events if e.get("released_at_ms"))}


#: The Produce API key, which ``late-produce`` holds.
PRODUCE_API_KEY = 0


def late_produce_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {
        "pick": rng.randrange(1 << 30),
        # After the EndTxn that ended the Produce's transaction: 0 lands between its markers
        # and the next transaction, a few hundred ms inside the next transaction.
        "release_delay_ms": rng.randrange(0, 400),
    }


def late_produce_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Withhold one processor's next Produce at each broker's proxy and deliver each after
    the EndTxn that ended its transaction.

    KIP-890's late produce request: the held batch reaches the leader after its transaction's
    markers (verification off: a hanging transaction) or inside the producer's next
    transaction (an older client's record joins the wrong transaction). Every broker is armed
    because which leaders a processor writes to depends on its assignment. The toxic drops
    the connection the Produce came on, so the client retries the batch; what the broker then
    makes of the original (appended, or refused by its sequence, its epoch or partition
    verification) is in the stop's record and the log dump.
    """
    instance, tid = _processor_tid(ctx, params)
    nodes = ctx.cluster.node_ids()
    arms = {
        str(node): ctx.cluster.hold_request(
            node,
            api_key=PRODUCE_API_KEY,
            transactional_id=tid,
            end_txn="",
            release_on_api_keys=[END_TXN_API_KEY],
            release_delay_ms=int(params["release_delay_ms"]),
            max_hold_ms=int(params.get("max_hold_ms", 60000)),
        )
        for node in nodes
    }
    return {
        "targets": nodes,
        "processor": instance,
        "transactional_id": tid,
        "arms": arms,
        "why": f"hold the next Produce of {tid} at each broker; deliver each "
        f"{params['release_delay_ms']} ms after its transaction's EndTxn",
    }


def late_produce_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    events = [
        {**e, "node": int(node)}
        for node, arm in details["arms"].items()
        for e in ctx.cluster.release_held(int(node), arm)
    ]
    return _held_summary(events)


# --- broker processes ------------------------------------------------------------------


def broker_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return choose_broker_role(rng, has_clients)


def pause_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    target, why = resolve_broker(ctx, params)
    ctx.cluster.pause(target)  # returns once the kernel reports state T
    if ctx.cluster.node_state(target) != "T":
        raise FaultError(f"node {target} is not stopped after SIGSTOP")
    return {"targets": [target], "why": why}


def pause_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    target = details["targets"][0]
    ctx.cluster.resume(target)
    return {"state": ctx.cluster.node_state(target)}


def kill_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"clean": rng.random() < 0.3, **choose_broker_role(rng, has_clients)}


def kill_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    target, why = resolve_broker(ctx, params)
    if params.get("clean"):
        ctx.cluster.stop_node(target)
    else:
        ctx.cluster.kill(target)
    if ctx.cluster.node_alive(target):
        raise FaultError(f"node {target} still alive after kill")
    return {"targets": [target], "why": why, "clean": bool(params.get("clean"))}


def kill_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    target = details["targets"][0]
    ctx.cluster.start_node(target)  # waits until the broker is registered again
    return {"restarted": target}


def rolling_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"clean": rng.random() < 0.5, "seed": rng.randrange(1 << 30)}


def rolling_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Restart every broker in turn, each registered again before the next goes down."""
    order = ctx.cluster.node_ids()
    random.Random(params.get("seed", 0)).shuffle(order)
    for node_id in order:
        ctx.cluster.restart(node_id, clean=bool(params.get("clean")))
    _wait(
        lambda: set(order) <= ctx.cluster.registered_brokers(),
        60,
        "every broker registered after the rolling restart",
    )
    return {"targets": order, "why": "rolling restart", "clean": bool(params.get("clean"))}


def noop_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    return {}


# --- client processes ------------------------------------------------------------------


def processor_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"pick": rng.randrange(1 << 30)}


def _processor(ctx: FaultContext, params: dict[str, Any]) -> ProcessorTarget:
    found = resolve_processor(ctx, params)
    if found is None:
        raise FaultError("no live processor to target")
    return found


def processor_pause_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    instance, pid, why = _processor(ctx, params)
    os.kill(pid, signal.SIGSTOP)
    _wait(lambda: process_state(pid) == "T", 10, f"processor {instance} (pid {pid}) in state T")
    return {"targets": [instance], "pid": pid, "why": why}


def processor_pause_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    pid = details["pid"]
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    _wait(lambda: process_state(pid) != "T", 10, f"pid {pid} resumed")
    return {"resumed": details["targets"]}


def zombie_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Pause a processor mid-transaction, for longer than its session timeout.

    An outside SIGSTOP almost always lands while the client waits in poll, and on resume
    librdkafka notices the lost membership before it commits anything. A GC pause that
    makes a zombie lands *between* produce and commit; clients that support it are asked
    (SIGUSR1) to stop themselves at their next offset commit. Others, and a processor that
    has no SIGUSR1 handler yet (still starting: the signal would kill it), are stopped
    directly.
    """
    instance, pid, why = _processor(ctx, params)
    if getattr(ctx.clients, "pause_at_commit", False) and catches_signal(pid, signal.SIGUSR1):
        os.kill(pid, signal.SIGUSR1)
        try:
            _wait(lambda: process_state(pid) in ("T", None), 20, f"processor {instance} paused")
            mode = "at-commit"
        except FaultError:
            os.kill(pid, signal.SIGSTOP)  # it never reached a commit (no input): stop it now
            _wait(lambda: process_state(pid) in ("T", None), 10, f"processor {instance} paused")
            mode = "external"
    else:
        os.kill(pid, signal.SIGSTOP)
        _wait(lambda: process_state(pid) in ("T", None), 10, f"processor {instance} paused")
        mode = "external"
    return {
        "targets": [instance],
        "pid": pid,
        "mode": mode,
        "why": f"{why}, paused past its session timeout",
    }


def processor_kill_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    instance, pid, why = _processor(ctx, params)
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: process_state(pid) in (None, "Z"), 10, f"processor {instance} gone")
    return {"targets": [instance], "pid": pid, "why": why}


#: Seconds a processor has to stop after SIGTERM in a clean roll before it is SIGKILLed, and
#: for its successor to be serving (a Connect worker JVM scans its plugins and rejoins).
ROLL_STOP_S = 30.0
ROLL_READY_S = 90.0


def roll_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"clean": rng.random() < 0.5, "seed": rng.randrange(1 << 30)}


def _stop_pid(pid: int, sig: signal.Signals) -> None:
    """``sig`` to a process and wait until it is gone (SIGCONT first: a paused process cannot
    act on SIGTERM); one that has not stopped after ROLL_STOP_S is SIGKILLed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, sig)
    try:
        _wait(lambda: process_state(pid) in (None, "Z"), ROLL_STOP_S, f"pid {pid} stopped")
    except FaultError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait(lambda: process_state(pid) in (None, "Z"), 10, f"pid {pid} killed")


def _wait_successor(clients: Any, before: set[int], ready: Callable[[int], bool] | None) -> None:
    """Wait until an instance started after ``before`` (the instance ids then) serves. Any
    of them: a successor killed by another fault meanwhile has a successor of its own."""

    def serving() -> bool:
        new = set(clients.processor_pids()) - before
        return any(ready(i) for i in new) if ready is not None else bool(new)

    _wait(serving, ROLL_READY_S, "a successor of the stopped processor serving")


def roll_processors_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Restart every processor in turn, as an operator's rolling deploy does (Kafka's own
    Connect system test bounces workers cleanly and hard): each is stopped (SIGTERM, or
    SIGKILL for a hard roll), and the next goes down only once the workload has started its
    successor and that successor serves again."""
    if ctx.clients is None:
        raise FaultError("roll-processors needs workload processes")
    clients = ctx.clients
    clean = bool(params.get("clean"))
    order = sorted(clients.processor_pids())
    random.Random(params.get("seed", 0)).shuffle(order)
    ready = getattr(clients, "processor_ready", None)
    rolled: list[int] = []
    for instance in order:
        before = clients.processor_pids()
        pid = before.get(instance)
        if pid is None:  # gone already (another fault); its successor is someone else's
            continue
        _stop_pid(pid, signal.SIGTERM if clean else signal.SIGKILL)
        _wait_successor(clients, set(before), ready)
        rolled.append(instance)
    return {
        "targets": rolled,
        "clean": clean,
        "why": f"{'clean' if clean else 'hard'} rolling restart of the processors",
    }


def _processor_gids(ctx: FaultContext) -> dict[int, int]:
    """Live processors' own group ids (clients without ``processor_gids`` have none)."""
    gids_of = getattr(ctx.clients, "processor_gids", None)
    return dict(gids_of()) if gids_of is not None else {}


def cut_processor_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Cut one processor off the network, both ways: an iptables rule in the root namespace
    drops every packet of its group id (each supervisor slot's processes run with a group id
    of their own), so it cannot reach a broker through any proxy, and no answer reaches it.

    Its slot is cut, as a partition cuts off the machine it runs on: a successor started in
    the slot during the cut is cut too. Verified by the rule in ``iptables -S`` and by a
    probe connection from the same group that gets no answer. A cut that outlasts the
    session timeout makes a zombie through the network (KIP-447): the group moves on while
    the processor still holds its transaction.
    """
    if ctx.clients is None:
        raise FaultError("cut-processor needs workload processes")
    gids = _processor_gids(ctx)
    found = resolve_processor(ctx, params, among=gids)
    if found is None:
        raise FaultError(
            "no live processor runs with a group id of its own (root and a host slot needed)"
        )
    instance, pid, why = found
    gid = gids[instance]
    ctx.cluster.cut_client(gid)  # verified in the rules before it returns
    # A cut connect hangs until the probe's timeout: keep it short (the cut is on already).
    if ctx.cluster.client_reaches(gid, timeout=1.0):
        raise FaultError(f"group {gid} still reaches the brokers after the cut")
    return {
        "targets": [instance],
        "pid": pid,
        "gid": gid,
        "why": f"{why} (group {gid}) cut from every broker",
    }


def cut_processor_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    gid = details["gid"]
    ctx.cluster.heal_client(gid)  # verified gone from the rules
    _wait(lambda: ctx.cluster.client_reaches(gid), 10, f"group {gid} reaches the brokers")
    return {"healed": True}


_HIJACK = """
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
              "log_level": 0})
p.init_transactions(60)
p.flush(5)
"""


def hijack_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Call init_transactions with a live processor's transactional.id: fence it directly.

    The impostor is a separate OS process, as a competing instance would be; it also keeps
    a native client's life and death out of the harness process.
    """
    import subprocess
    import sys

    if ctx.clients is None:
        raise FaultError("hijack needs workload processes")
    tids = ctx.clients.transactional_ids()
    if not tids:
        raise FaultError("no live processor to hijack")
    instance = sorted(tids)[int(params.get("pick", 0)) % len(tids)]
    tid = tids[instance]
    proc = subprocess.run(
        [sys.executable, "-c", _HIJACK, ctx.clients.bootstrap, tid],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise FaultError(f"init_transactions as {tid} failed: {last}")
    return {"targets": [instance], "why": f"fence {tid} by a new producer", "transactional_id": tid}


# --- protocol moments (processors armed to act on themselves) ---------------------------

#: Where a transaction can be caught, in execution order: the eos processor's hook points
#: (``workloads.eos_config.HOOK_POINTS``) plus ``during-commit``, a few ms into the commit
#: call (EndTxn, or the plain offset commit of an at-least-once client).
MOMENTS = (
    "after-produce",
    "after-flush",
    "before-offsets",
    "before-commit",
    "during-commit",
    "after-commit",
)
#: Moments where the next request goes to a coordinator, and which one: the offset commit
#: (TxnOffsetCommit, or OffsetCommit outside a transaction) to the group coordinator, EndTxn
#: to the transaction coordinator.
COORDINATOR_MOMENTS = {
    "before-offsets": "group-coordinator",
    "before-commit": "txn-coordinator",
    "after-commit": "group-coordinator",
}
#: How long a nemesis waits for an armed processor to reach its moment.
ARM_WAIT_S = 8.0
#: Processors armed by one crash-clients event, each at a different moment of the cycle.
ARMED_PER_EVENT = 3
#: Moments before EndTxn, where a transaction can still fail with an abortable error (a
#: produce that timed out, an offset commit the group rejected) and the client must abort
#: it and read its inputs again.
ABORT_MOMENTS = ("after-produce", "after-flush", "before-offsets", "before-commit")


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


def _hooks(ctx: FaultContext) -> bool:
    return ctx.clients is not None and bool(getattr(ctx.clients, "hooks", False))


def _arm(ctx: FaultContext, instance: int, at: str, action: str, delay_ms: int = 0) -> bool:
    """Arm one instance; False when it cannot be armed (starting, or gone)."""
    assert ctx.clients is not None
    try:
        ctx.clients.arm_hook(instance, at, action, delay_ms)
    except Exception:  # still starting (no handler yet) or already exited
        return False
    return True


def _disarm(ctx: FaultContext, instance: int) -> None:
    with contextlib.suppress(Exception):
        _arm(ctx, instance, "", "")


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
    if not _hooks(ctx):
        details = processor_kill_start(ctx, params)
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
        if _arm(ctx, instance, at, action, int(params.get("delay_ms", 0))):
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
            _disarm(ctx, instance)
            fired = ctx.clients.fired_hook(instance)  # it may have fired meanwhile
        if fired is None:
            missed.append({"instance": instance, "at": at})
            continue
        action = fired.get("action", "kill")
        if action == "kill":
            pid = details["pids"][key]
            _wait(
                lambda pid=pid: process_state(pid) in (None, "Z"), 10, f"instance {instance} gone"
            )
        hit.append({"instance": instance, "at": fired["at"], "txn": fired["txn"], "action": action})
    return {"hit": hit, "missed": missed}


def moment_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"pick": rng.randrange(1 << 30), "at": rng.choice(MOMENTS)}


def _stop_at_moment(ctx: FaultContext, params: dict[str, Any]) -> tuple[int, int, dict[str, Any]]:
    """Arm a processor to SIGSTOP itself at ``params["at"]``; wait until it has.

    Returns (instance, pid, what fired). Not reaching the moment within ARM_WAIT_S is a
    FaultError (recorded as a failed start), and the processor is disarmed.
    """
    if not _hooks(ctx):
        raise FaultError("moment-aimed faults need processors with hook points")
    instance, pid, _why = _processor(ctx, params)
    if not _arm(ctx, instance, params["at"], "stop", int(params.get("delay_ms", 0))):
        raise FaultError(f"processor {instance} could not be armed (starting or gone)")
    assert ctx.clients is not None
    try:
        _wait(
            lambda: process_state(pid) in ("T", None) and ctx.clients.fired_hook(instance),
            ARM_WAIT_S,
            f"processor {instance} stopped at {params['at']}",
        )
    except FaultError:
        _disarm(ctx, instance)
        if ctx.clients.fired_hook(instance) is None:
            raise FaultError(f"processor {instance} did not reach {params['at']}") from None
        _wait(lambda: process_state(pid) in ("T", None), 5, f"processor {instance} stopped")
    if process_state(pid) is None:
        raise FaultError(f"processor {instance} exited before its moment")
    return instance, pid, ctx.clients.fired_hook(instance) or {}


def pause_at_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """A processor stops itself at a protocol moment (a GC pause that lands mid-commit)."""
    instance, pid, fired = _stop_at_moment(ctx, params)
    return {
        "targets": [instance],
        "pid": pid,
        "at": fired.get("at"),
        "txn": fired.get("txn"),
        "why": f"processor instance {instance} paused at {fired.get('at')} of txn "
        f"{fired.get('txn')}",
    }


def coordinator_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
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
    instance, pid, fired = _stop_at_moment(ctx, params)
    try:
        node, why = _coordinator_of(ctx, instance, COORDINATOR_MOMENTS[params["at"]])
        fault = params["fault"]
        if fault == "partition" and not ctx.cluster.uses_netns:
            fault = "client-cut"  # no namespaces: cut the client path instead
        sub = {"role": "fixed", "node": node, "why": why, "mode": params["mode"], "seed": 0}
        if fault == "pause":
            applied = pause_start(ctx, sub)
        elif fault == "partition":
            applied = partition_start(ctx, {**sub, "shape": "isolate"})
        else:
            applied = client_cut_start(ctx, sub)
    finally:
        os.kill(pid, signal.SIGCONT)
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
        return pause_stop(ctx, details)
    if fault == "partition":
        return partition_stop(ctx, details)
    return client_cut_stop(ctx, details)
