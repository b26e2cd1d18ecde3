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

from common.procfs import process_state
from nemeses.targets import FaultContext, choose_broker_role, resolve_broker, resolve_processor


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


def _processor(ctx: FaultContext, params: dict[str, Any]) -> tuple[int, int]:
    found = resolve_processor(ctx, params)
    if found is None:
        raise FaultError("no live processor to target")
    return found


def processor_pause_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    instance, pid = _processor(ctx, params)
    os.kill(pid, signal.SIGSTOP)
    _wait(lambda: process_state(pid) == "T", 10, f"processor {instance} (pid {pid}) in state T")
    return {"targets": [instance], "pid": pid, "why": f"processor instance {instance}"}


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
    (SIGUSR1) to stop themselves at their next offset commit. Others are stopped directly.
    """
    instance, pid = _processor(ctx, params)
    if getattr(ctx.clients, "pause_at_commit", False):
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
        "why": f"processor instance {instance} paused past its session timeout",
    }


def processor_kill_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    instance, pid = _processor(ctx, params)
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: process_state(pid) in (None, "Z"), 10, f"processor {instance} gone")
    return {"targets": [instance], "pid": pid, "why": f"processor instance {instance}"}


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
