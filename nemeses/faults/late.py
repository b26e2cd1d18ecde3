"""Late requests: a client's request held at its broker's proxy and let through after the
protocol has moved on (KIP-890's late arrivals, KAFKA-17754's delayed EndTxn)."""

from __future__ import annotations

import random
from typing import Any

from nemeses.faults.base import (
    FaultError,
    processor,
)
from nemeses.targets import (
    FaultContext,
    resolve_broker,
)


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
    instance = processor(ctx, params).instance
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
