"""Network faults: cuts between brokers (iptables in their namespaces) and on the clients'
paths (toxiproxy: a proxy down, a timeout, latency, a narrow or sliced link)."""

from __future__ import annotations

import random
from itertools import combinations
from typing import Any

from nemeses.faults.base import (
    FaultError,
    verify,
)
from nemeses.targets import (
    FaultContext,
    choose_broker_role,
    resolve_broker,
)


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
        verify(lambda x=x, y=y: c.can_reach(x, y), 10, f"node {x} reaches {y} after heal")
    return {"healed": True}


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
