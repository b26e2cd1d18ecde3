"""What every fault family shares: the error of a fault that did not take, the verified wait,
the processor a pick points at, and the stops that undo a toxic or nothing."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from common.waits import WaitTimeout, wait_for
from nemeses.targets import FaultContext, ProcessorTarget, resolve_processor


class FaultError(RuntimeError):
    """A fault could not be applied or verified."""


def verify(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll until ``predicate`` holds (an exception is "not yet": a broker still starting
    refuses); a :class:`FaultError` naming ``what`` when it does not within ``timeout``."""
    try:
        wait_for(predicate, timeout=timeout, what=what, interval=0.02, max_interval=0.2)
    except WaitTimeout:
        raise FaultError(f"not verified within {timeout:.0f}s: {what}") from None


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
