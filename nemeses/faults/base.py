"""What every fault family shares: the error of a fault that did not take, the verified wait,
the processor a pick points at, a processor stopped at a protocol moment, and the stops that
undo a toxic or nothing."""

from __future__ import annotations

import contextlib
import os
import random
import signal
from collections.abc import Callable
from typing import Any

from common.procfs import process_state
from common.waits import WaitTimeout, wait_for
from nemeses.targets import FaultContext, ProcessorTarget, resolve_processor

#: A fault kind's start or stop: what it did, from its context and parameters (or details).
Action = Callable[[FaultContext, dict[str, Any]], dict[str, Any]]


class FaultError(RuntimeError):
    """A fault could not be applied or verified."""


def verify(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll until ``predicate`` holds (an exception is "not yet": a broker still starting
    refuses); a :class:`FaultError` naming ``what`` when it does not within ``timeout``."""
    try:
        wait_for(predicate, timeout=timeout, what=what, interval=0.02, max_interval=0.2)
    except WaitTimeout:
        raise FaultError(f"not verified within {timeout:.0f}s: {what}") from None


def resume(pid: int) -> None:
    """SIGCONT to a client process a fault stopped (or had stop itself): the one way faults
    resume one. A process already gone has nothing to resume."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def toxic_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    ctx.cluster.remove_toxic(details["targets"][0], details["toxic"])
    return {"healed": True}


def noop_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    return {}


def processor_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"pick": rng.randrange(1 << 30)}


def processor(ctx: FaultContext, params: dict[str, Any]) -> ProcessorTarget:
    found = resolve_processor(ctx, params)
    if found is None:
        raise FaultError("no live processor to target")
    return found


#: How long a nemesis waits for an armed processor to reach its moment.
ARM_WAIT_S = 8.0


def hooks(ctx: FaultContext) -> bool:
    return ctx.clients is not None and ctx.clients.hooks


def arm(ctx: FaultContext, instance: int, at: str, action: str, delay_ms: int = 0) -> bool:
    """Arm one instance; False when it cannot be armed (starting, or gone)."""
    assert ctx.clients is not None
    try:
        ctx.clients.arm_hook(instance, at, action, delay_ms)
    except Exception:  # still starting (no handler yet) or already exited
        return False
    return True


def disarm(ctx: FaultContext, instance: int) -> None:
    with contextlib.suppress(Exception):
        arm(ctx, instance, "", "")


def stop_at_moment(
    ctx: FaultContext, params: dict[str, Any], target: ProcessorTarget | None = None
) -> tuple[int, int, dict[str, Any]]:
    """Arm a processor (``target``, or the one the pick points at) to SIGSTOP itself at
    ``params["at"]``; wait until it has.

    Returns (instance, pid, what fired). Not reaching the moment within ARM_WAIT_S is a
    FaultError (recorded as a failed start), and the processor is disarmed.
    """
    if not hooks(ctx):
        raise FaultError("moment-aimed faults need processors with hook points")
    instance, pid, _why = target or processor(ctx, params)
    if not arm(ctx, instance, params["at"], "stop", int(params.get("delay_ms", 0))):
        raise FaultError(f"processor {instance} could not be armed (starting or gone)")
    assert ctx.clients is not None
    try:
        verify(
            lambda: process_state(pid) in ("T", None) and ctx.clients.fired_hook(instance),
            ARM_WAIT_S,
            f"processor {instance} stopped at {params['at']}",
        )
    except FaultError:
        disarm(ctx, instance)
        if ctx.clients.fired_hook(instance) is None:
            raise FaultError(f"processor {instance} did not reach {params['at']}") from None
        verify(lambda: process_state(pid) in ("T", None), 5, f"processor {instance} stopped")
    if process_state(pid) is None:
        raise FaultError(f"processor {instance} exited before its moment")
    return instance, pid, ctx.clients.fired_hook(instance) or {}
