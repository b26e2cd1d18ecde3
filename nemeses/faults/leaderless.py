"""A transaction's partitions left without a leader while its coordinator sends its markers.

Finding F9 (docs/findings.md): from Kafka 4.3.0 a coordinator that sends a transaction
marker for a partition whose leader is unknown takes the partition for a deleted one, drops
it from the transaction and completes the transaction without its marker. The partition's
records of that transaction stay open for ever, and every ``read_committed`` consumer of it
stops at them.

The fault opens that window on purpose, in the shape of the soak run where F9 was met: a
transaction with records on a partition is rolled back on its timeout while the partition
has no leader, and its producer never writes there again.

1. A processor V is chosen; its transaction coordinator C is looked up, and a broker X
   other than C. The output topic's ``min.insync.replicas`` is set to 1 and every output
   partition is moved (Kafka's reassignment tool) to X alone: the transactions go on.
2. V stops itself (SIGSTOP) just before its EndTxn: its transaction is open, with records
   on its output partitions.
3. X is killed. Once the controller fences it, the output partitions have no leader at all,
   and the coordinator C, on another broker, rolls V's transaction back when it times out.
4. After that timeout (the transaction timeout and the coordinator's 10 s check), X is
   started again, the partitions go back to their replicas, the setting to the brokers'
   default, and V continues: it has been fenced and is replaced under a new transactional
   id, so no later marker of its producer closes what it left open.

A broker that waits for a leader (4.2.x, or a patched 4.3+) writes the abort markers once X
is back; an affected one has already completed the transaction without them.
"""

from __future__ import annotations

import random
import time
from typing import Any

from common.procfs import process_state
from nemeses.faults.base import FaultError, resume, stop_at_moment, verify
from nemeses.targets import FaultContext, resolve_processor

#: The controller fences a killed broker after ``broker.session.timeout.ms`` (9 s).
FENCE_TIMEOUT = 40.0
#: How often a coordinator looks for timed-out transactions
#: (``transaction.abort.timed.out.transaction.cleanup.interval.ms``), and a margin for the
#: abort's first marker attempt.
ABORT_CHECK_S = 10.0
MARGIN_S = 3.0


def leaderless_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"pick": rng.randrange(1 << 30)}


def leaderless_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Move, hold, kill; returns once the output partitions have no leader."""
    clients = ctx.clients
    if clients is None:
        raise FaultError("leaderless-marker needs the clients' processors")
    cluster = ctx.cluster
    target = resolve_processor(ctx, params)
    if target is None:
        raise FaultError("no live processor to hold")
    tid = clients.transactional_ids().get(target.instance)
    coordinator = None if tid is None else cluster.txn_coordinator(tid)
    if coordinator is None:
        raise FaultError(f"no transaction coordinator known for processor {target.instance}")
    others = [n for n in cluster.node_ids() if n != coordinator]
    node = others[int(params.get("pick", 0)) % len(others)]
    topic = clients.output_topic
    replicas = {p: cluster.replicas(topic, p) for p in range(cluster.partition_count(topic))}
    undo = {"topic": topic, "replicas": replicas, "targets": [node], "pid": None}
    cluster.set_topic_config(topic, "min.insync.replicas", "1")
    try:
        cluster.reassign(topic, {p: [node] for p in replicas})
        instance, pid, fired = stop_at_moment(ctx, {**params, "at": "before-commit"}, target)
        undo["pid"] = pid
        held_at = time.monotonic()
        cluster.kill(node)
        verify(
            lambda: all(cluster.leader(topic, p) is None for p in replicas),
            FENCE_TIMEOUT,
            f"{topic} leaderless",
        )
    except Exception:
        _restore(ctx, undo)
        raise
    return {
        **undo,
        "processor": instance,
        "transactional_id": tid,
        "coordinator": coordinator,
        "txn": fired.get("txn"),
        "held_at": held_at,
        "why": f"processor {instance} ({tid}, coordinator node {coordinator}) held before "
        f"EndTxn of txn {fired.get('txn')}; {topic} moved to node {node} alone, killed, "
        "leaderless",
    }


def _restore(ctx: FaultContext, undo: dict[str, Any]) -> None:
    """Undo what was done, in order: the broker back, the partitions, the setting, and the
    held processor last (it must find its transaction rolled back)."""
    cluster = ctx.cluster
    node, topic = undo["targets"][0], undo["topic"]
    try:
        if not cluster.node_alive(node):
            cluster.start_node(node)  # waits until the broker is registered again
        moves = {p: r for p, r in undo["replicas"].items() if cluster.replicas(topic, p) != r}
        if moves:
            cluster.reassign(topic, moves)
        cluster.set_topic_config(topic, "min.insync.replicas", None)
    finally:
        if undo.get("pid") is not None:
            resume(undo["pid"])


def leaderless_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    """Keep the partitions leaderless until the coordinator has rolled the held
    transaction back, then undo everything."""
    assert ctx.clients is not None
    rollback = ctx.clients.transaction_timeout_s + ABORT_CHECK_S + MARGIN_S
    time.sleep(max(0.0, details["held_at"] + rollback - time.monotonic()))
    _restore(ctx, details)
    pid = details["pid"]
    return {"restarted": details["targets"][0], "processor_state": process_state(pid)}
