"""Broker process faults: SIGSTOP and SIGCONT, kill -9 or a clean stop and the restart, a
rolling restart of every broker."""

from __future__ import annotations

import random
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
    verify(
        lambda: set(order) <= ctx.cluster.registered_brokers(),
        60,
        "every broker registered after the rolling restart",
    )
    return {"targets": order, "why": "rolling restart", "clean": bool(params.get("clean"))}


def reauth_pause_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """A broker paused for longer than the clients' SASL sessions last (``sasl_ssl``): every
    session on it runs out while it is stopped, so when it runs again it closes each
    connection whose next request is not a re-authentication (KIP-368), requests in flight
    and all, and the clients reconnect in the middle of their transactions."""
    reauth_ms = ctx.cluster.reauth_ms
    details = pause_start(ctx, params)
    why = f"{details['why']}, for longer than the clients' {reauth_ms} ms SASL sessions"
    return {**details, "reauth_ms": reauth_ms, "why": why}
