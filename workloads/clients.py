"""What every client process of a workload does the same way with confluent-kafka.

The eos processor (``workloads.eos_processor``) and the queue client
(``workloads.queue_client``) are different loops over the same client machinery: one
transactional producer and one consumer in a group, built from the same settings; blocking
transactional calls retried while the client calls the error retriable, within a budget, and
never allowed to block for ever; rebalance callbacks; a close that does not wait on a stuck
library. Kept here once, so a fix to one (the hang guard was the queue client's alone) is a fix
to both.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from workloads.eos_kafka import error_info, warn

#: How long past its own timeout a transactional call may block before we give up on it.
#: librdkafka's send_offsets_to_transaction can ignore its timeout and block forever when the
#: group coordinator broker went away (confluentinc/librdkafka#5456, #5511); seen here after a
#: broker kill and restart.
HANG_SLACK_S: Final = 5.0

#: The rebalance events a subscribed consumer reports, as ``on_rebalance`` receives them.
REBALANCE_EVENTS: Final = ("assign", "revoke", "lost")


class ClientError(Exception):
    """A client call failed for good; ``info`` is the JSON description that goes in history."""

    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__(info.get("message"))
        self.info = info


class Exit(Exception):
    """Leave the process's loop and exit with ``code``, recording ``reason``."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class GroupClientConfig(Protocol):
    """What both workloads' process configurations say about their clients."""

    bootstrap: str
    group_id: str
    transaction_timeout_ms: int
    session_timeout_ms: int


def make_clients(
    cfg: GroupClientConfig,
    name: str,
    ident: int,
    transactional_id: str | None,
    *,
    read_committed: bool = True,
    group_protocol: str = "classic",
    log_level: int = 3,
    producer: Mapping[str, Any] | None = None,
) -> tuple[Any, Any]:
    """An idempotent (and, with ``transactional_id``, transactional) producer and a consumer
    that commits nothing by itself, named ``<name>-p<ident>`` / ``<name>-c<ident>``;
    ``producer`` adds or overrides producer settings.

    The session settings apply to the classic group protocol only (the consumer protocol of
    KIP-848 takes them from the broker).
    """
    from confluent_kafka import Consumer, Producer

    transaction_timeout_ms, session_timeout_ms = cfg.transaction_timeout_ms, cfg.session_timeout_ms
    common = {"bootstrap.servers": cfg.bootstrap, "log_level": log_level}
    pconf: dict[str, Any] = {
        **common,
        "client.id": f"{name}-p{ident}",
        "enable.idempotence": True,
        "acks": "all",
        **(producer or {}),
    }
    if transactional_id is not None:
        pconf["transactional.id"] = transactional_id
        pconf["transaction.timeout.ms"] = transaction_timeout_ms
        if "message.timeout.ms" in pconf:
            # librdkafka refuses a message timeout longer than the transaction timeout.
            pconf["message.timeout.ms"] = min(pconf["message.timeout.ms"], transaction_timeout_ms)
    cconf: dict[str, Any] = {
        **common,
        "client.id": f"{name}-c{ident}",
        "group.id": cfg.group_id,
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "group.protocol": group_protocol,
    }
    if group_protocol == "classic":
        cconf["session.timeout.ms"] = session_timeout_ms
        cconf["heartbeat.interval.ms"] = max(100, min(3000, session_timeout_ms // 3))
        cconf["max.poll.interval.ms"] = max(60000, session_timeout_ms)
    return Producer(pconf), Consumer(cconf)


def subscribe(
    consumer: Any, topics: list[str], on_rebalance: Callable[[str, list[Any]], None]
) -> None:
    """Subscribe with every rebalance callback routed to ``on_rebalance(event, partitions)``
    (``event`` one of :data:`REBALANCE_EVENTS`)."""
    consumer.subscribe(
        topics,
        on_assign=lambda c, parts: on_rebalance("assign", parts),
        on_revoke=lambda c, parts: on_rebalance("revoke", parts),
        on_lost=lambda c, parts: on_rebalance("lost", parts),
    )


class Calls:
    """Blocking client calls of one process: bounded, retried, and a hung one remembered.

    ``who`` names the process in diagnostics; ``budget_s`` bounds a call with its retries;
    each attempt gets at least ``floor_s``. ``wake``, when set (a stop request), cuts a
    back-off short.
    """

    def __init__(
        self, who: str, budget_s: float, floor_s: float, wake: threading.Event | None = None
    ) -> None:
        self.who = who
        self.budget_s = budget_s
        self.floor_s = floor_s
        self.wake = wake or threading.Event()
        #: The stage of a call that never returned; the process must then exit.
        self.hung: str | None = None

    def call(self, stage: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args, timeout)``, retried while the client calls the error retriable, within
        the budget (a retried commit_transaction resumes the same commit, it does not repeat
        it); a :class:`ClientError` when it fails for good."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self.budget_s
        while True:
            remaining = max(self.floor_s, deadline - time.monotonic())
            try:
                return self.bounded(stage, lambda t: fn(*args, t), remaining)
            except KafkaException as exc:
                info = error_info(exc, stage)
                retry = info["retriable"] and not info["fatal"] and not info["abortable"]
                if not retry or time.monotonic() >= deadline:
                    raise ClientError(info) from None
                warn(f"{self.who}: {stage}: retriable error: {info['message']}")
                self.wake.wait(0.1)  # back-off between attempts, not synchronisation

    def bounded(self, stage: str, fn: Callable[[float], Any], timeout: float) -> Any:
        """``fn(timeout)``, but never blocking much longer than ``timeout``.

        The call runs in a helper thread; if it is still running ``HANG_SLACK_S`` after its
        own timeout, the client library is stuck (see :data:`HANG_SLACK_S`) and the call is
        reported as a fatal error. The producer cannot be used again (another transactional
        call would conflict with the stuck one), so the process records the op and exits.
        """
        box: list[tuple[bool, Any]] = []

        def target() -> None:
            try:
                box.append((True, fn(timeout)))
            except BaseException as exc:
                box.append((False, exc))

        worker = threading.Thread(target=target, name=f"kafka-{stage}", daemon=True)
        worker.start()
        worker.join(timeout + HANG_SLACK_S)
        if worker.is_alive() or not box:
            self.hung = stage
            raise ClientError(
                {
                    "stage": stage,
                    "code": "CLIENT_HUNG",
                    "message": f"{stage} still blocked {timeout + HANG_SLACK_S:.1f}s later "
                    f"(its timeout was {timeout:.1f}s)",
                    "fatal": True,
                    "abortable": False,
                    "retriable": False,
                }
            )
        ok, result = box[0]
        if ok:
            return result
        raise result

    def close(self, consumer: Any, producer: Any) -> None:
        """Leave the group promptly (a successor should not wait a session out); drop the
        producer without waiting long, and without touching it after a hung call."""
        if consumer is not None:
            try:
                consumer.close()
            except Exception as exc:
                warn(f"{self.who}: consumer close failed: {exc}")
        if producer is not None and self.hung is None:
            try:
                producer.flush(1.0)
            except Exception as exc:
                warn(f"{self.who}: producer flush failed: {exc}")

    def exit(self, code: int) -> int:
        """The process's exit status; after a hung call, exit right here: interpreter
        shutdown could wait on the stuck thread (destroying the producer waits for its
        operations), and everything is recorded already."""
        if self.hung is not None:
            sys.stderr.flush()
            os._exit(code)
        return code
