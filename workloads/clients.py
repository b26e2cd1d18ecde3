"""What every client process of a workload does the same way with confluent-kafka.

The eos processor (``workloads.eos.processor``) and the queue client
(``workloads.queue.client``) are different loops over the same client machinery: one
transactional producer and one consumer in a group, built from the same settings; blocking
transactional calls retried while the client calls the error retriable, within a budget, and
never allowed to block for ever; rebalance callbacks; a close that does not wait on a stuck
library. Kept here once, so a fix to one (the hang guard was the queue client's alone) is a fix
to both.

The knobs a user turns on those clients live here too, for the same reason: ``--client-config``
settings (refused when the workload decides the key, checked by the client library in a child
process before a run), ``--group-protocol`` (and the broker settings a KIP-848 group needs),
``--txn-delay-ms`` (a seeded pause between a transaction's operations).
"""

from __future__ import annotations

import functools
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from common.kafkaconf import librdkafka
from workloads.client_registry import Manifest, runs_on_python
from workloads.clientinfo import error_info, warn
from workloads.spec import Option

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
    security: dict[str, str] | None


# --- the knobs of the clients under test ----------------------------------------------------

#: ``classic`` (JoinGroup/SyncGroup) or ``consumer`` (KIP-848: the broker assigns partitions
#: and owns the session timeout and heartbeat interval; Kafka 4.0 and newer).
GROUP_PROTOCOLS: Final = ("classic", "consumer")
CONSUMER_PROTOCOL_SINCE: Final = "4.0.0"

#: Client settings the workloads decide themselves, and why a ``--client-config`` of one is
#: refused: the harness's bookkeeping or its faults depend on them.
OWNED_SETTINGS: Final = {
    "bootstrap.servers": "the harness points every client at the cluster",
    "security.protocol": "use --security (the harness makes the certificates and users)",
    "group.id": "the workload names its consumer group",
    "transactional.id": "the workload names each process's transactional id",
    "group.protocol": "use --group-protocol",
    "transaction.timeout.ms": "use --transaction-timeout-ms (the faults are timed by it)",
    "session.timeout.ms": "use --session-timeout-ms (the faults are timed by it)",
    "isolation.level": "the workload decides what it reads (eos: --variant read-uncommitted)",
    "enable.auto.commit": "the workload commits offsets itself",
    "enable.auto.offset.store": "the workload commits offsets itself",
}

#: Consumer settings the consumer group protocol takes from the broker (librdkafka refuses
#: them with ``group.protocol=consumer``).
CONSUMER_PROTOCOL_REFUSES: Final = ("heartbeat.interval.ms", "partition.assignment.strategy")


def client_settings_problem(settings: Mapping[str, str], group_protocol: str) -> str | None:
    """Why these ``--client-config`` settings cannot be used with this group protocol, or
    None. The client library's own refusals (an unknown key, a bad value) are found by
    :func:`probe_client_settings`."""
    if group_protocol not in GROUP_PROTOCOLS:
        return f"group protocol must be one of {', '.join(GROUP_PROTOCOLS)}, not {group_protocol!r}"
    for key in settings:
        if not key:
            return "--client-config has an empty key"
        if key in OWNED_SETTINGS:
            return f"--client-config {key}: {OWNED_SETTINGS[key]}"
        if group_protocol == "consumer" and key in CONSUMER_PROTOCOL_REFUSES:
            return (
                f"--client-config {key}: not a client setting with --group-protocol consumer "
                "(the broker decides it)"
            )
    return None


def group_protocol_needs(group_protocol: str) -> tuple[str, str] | None:
    """The oldest Kafka a group protocol runs on, and what needs it (``WorkloadSpec``)."""
    if group_protocol == "consumer":
        return CONSUMER_PROTOCOL_SINCE, "--group-protocol consumer"
    return None


def heartbeat_ms(session_timeout_ms: int) -> int:
    """The heartbeat interval that goes with a session timeout: a third of it, 0.1-3 s."""
    return max(100, min(3000, session_timeout_ms // 3))


def group_broker_settings(group_protocol: str, session_timeout_ms: int) -> dict[str, str]:
    """Broker settings that give a consumer-protocol group the session timeout the classic
    client would ask for itself (the faults are timed by it); bounds moved where they must be.
    Nothing for the classic protocol."""
    if group_protocol != "consumer":
        return {}
    hb = heartbeat_ms(session_timeout_ms)
    out = {
        "group.consumer.session.timeout.ms": str(session_timeout_ms),
        "group.consumer.heartbeat.interval.ms": str(hb),
    }
    # Kafka's defaults: sessions 45-60 s, heartbeats 5-15 s.
    if session_timeout_ms < 45000:
        out["group.consumer.min.session.timeout.ms"] = str(session_timeout_ms)
    if session_timeout_ms > 60000:
        out["group.consumer.max.session.timeout.ms"] = str(session_timeout_ms)
    if hb < 5000:
        out["group.consumer.min.heartbeat.interval.ms"] = str(hb)
    return out


def probe_client_settings(
    settings: Mapping[str, str],
    group_protocol: str,
    *,
    transactional: bool,
    producer: Mapping[str, Any],
    transaction_timeout_ms: int,
    session_timeout_ms: int,
    python: str | None = None,
) -> str | None:
    """What the client library says about these settings, or None when it takes them: a
    producer and a consumer are built (never connected) exactly as a workload process builds
    them, in a child process on the processes' interpreter (the harness holds no client
    library handle of its own)."""
    return _probe(
        json.dumps(
            {
                "settings": dict(settings),
                "group_protocol": group_protocol,
                "transactional": transactional,
                "producer": dict(producer),
                "transaction_timeout_ms": transaction_timeout_ms,
                "session_timeout_ms": session_timeout_ms,
            },
            sort_keys=True,
        ),
        client_python(python),
    )


@functools.lru_cache(maxsize=64)
def _probe(request: str, python: str) -> str | None:
    from workloads.processes import PROJECT_ROOT, child_env

    try:
        proc = subprocess.run(
            [python, "-m", "workloads.clients", "--probe", request],
            cwd=PROJECT_ROOT,
            env=child_env(os.environ),
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        return "--client-config: the client library did not answer whether it takes them"
    if proc.returncode == 0:
        return None
    lines = (proc.stdout.strip() or proc.stderr.strip() or "no reason given").splitlines()
    return f"--client-config: the client refuses it: {lines[-1]}"


def _probe_main(request: str) -> int:
    """Build (and drop) the clients a request describes; print why not and exit 2."""
    from types import SimpleNamespace

    from confluent_kafka import KafkaException

    r = json.loads(request)
    cfg = SimpleNamespace(
        bootstrap="127.0.0.1:9",  # the discard port: nothing is ever sent
        group_id="probe",
        transaction_timeout_ms=r["transaction_timeout_ms"],
        session_timeout_ms=r["session_timeout_ms"],
        security=None,
    )
    try:
        producer, consumer = make_clients(
            cfg,
            "probe",
            0,
            "probe" if r["transactional"] else None,
            group_protocol=r["group_protocol"],
            log_level=0,
            producer=r["producer"],
            settings=r["settings"],
        )
    except KafkaException as exc:
        print(exc.args[0].str() if exc.args else exc, flush=True)
        os._exit(2)
    consumer.close()
    del producer
    os._exit(0)


#: The flags of the client knobs, the same for every workload whose clients are confluent-kafka
#: processes (``WorkloadSpec.cli``; the options fields have the same names).
CLIENT_KNOBS: Final = (
    Option(
        "--group-protocol",
        "group_protocol",
        "classic, or consumer (KIP-848, Kafka >= 4.0)",
        choices=GROUP_PROTOCOLS,
    ),
    Option(
        "--client-config",
        "client_config",
        "a producer/consumer setting of the clients under test (repeatable)",
        action="settings",
    ),
    Option(
        "--txn-delay-ms",
        "txn_delay_ms",
        "a seeded random pause in [0, MAX] ms between a transaction's operations",
        int,
        metavar="MAX",
    ),
    Option(
        "--client-python",
        "client_python",
        "the Python that runs the confluent-kafka processes (default: the harness's own), "
        "e.g. a virtualenv with another librdkafka build",
        metavar="PATH",
    ),
)


def client_python(path: str | None) -> str:
    """The interpreter a workload's confluent-kafka processes run on: ``path`` (``--client-python``)
    or the harness's own."""
    return path or sys.executable


@functools.lru_cache(maxsize=8)
def client_library(python: str) -> str:
    """``confluent-kafka X, librdkafka Y`` as ``python`` imports them; a one-line
    :class:`ValueError` when it cannot (no such file, no confluent-kafka there). Asked of the
    interpreter itself, because another build of the library is why one names it."""
    try:
        proc = subprocess.run(
            [python, "-c", _LIBRARY_VERSION],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"--client-python {python}: cannot run it ({exc})") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip() or "no reason given").splitlines()[-1]
        raise ValueError(f"--client-python {python}: cannot import confluent_kafka ({last})")
    return proc.stdout.strip()


_LIBRARY_VERSION = (
    "import confluent_kafka as c; "
    "print(f'confluent-kafka {c.__version__}, librdkafka {c.libversion()[0]}')"
)


def announce_library() -> None:
    """Say in the process's log which client library it runs on (``--client-python`` can make
    it another build than the harness's)."""
    import confluent_kafka

    print(
        f"confluent-kafka {confluent_kafka.__version__}, "
        f"librdkafka {confluent_kafka.libversion()[0]}, python {sys.executable}",
        file=sys.stderr,
        flush=True,
    )


def client_python_problem(path: str | None, client: Manifest, workload: str) -> str | None:
    """Why ``--client-python`` cannot be used as given for ``client``'s process of
    ``workload``, or None."""
    if not path:
        return None
    if not runs_on_python(client, workload):
        return f"--client-python: the {client.name} client does not run on Python"
    try:
        client_library(path)
    except ValueError as exc:
        return str(exc)
    return None


class TxnDelay:
    """A seeded random pause, uniform in [0, ``max_ms``] ms, between the operations of a
    transaction (``--txn-delay-ms``): Jepsen's recipe for KAFKA-17754 widened the windows
    between a transaction's requests this way. The pause is the fault, not synchronisation;
    ``wait`` may cut it short (a stop request)."""

    def __init__(
        self, max_ms: int, seed: object, wait: Callable[[float], object] = time.sleep
    ) -> None:
        self.max_s = max_ms / 1000
        self.rng = random.Random(f"txn-delay:{seed}")
        self.wait = wait

    def __call__(self) -> None:
        if self.max_s > 0:
            self.wait(self.rng.uniform(0, self.max_s))


# --- building the clients -------------------------------------------------------------------


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
    settings: Mapping[str, str] | None = None,
) -> tuple[Any, Any]:
    """An idempotent (and, with ``transactional_id``, transactional) producer and a consumer
    that commits nothing by itself, named ``<name>-p<ident>`` / ``<name>-c<ident>``;
    ``producer`` adds or overrides producer settings; ``settings`` (the user's
    ``--client-config``) go to both clients last, as given: the library warns about a key of
    the other kind of client and ignores it there, and refuses a contradiction (a message
    timeout above the transaction timeout) instead of having it silently adjusted.

    The session settings apply to the classic group protocol only (the consumer protocol of
    KIP-848 takes them from the broker).
    """
    from confluent_kafka import Consumer, Producer

    transaction_timeout_ms, session_timeout_ms = cfg.transaction_timeout_ms, cfg.session_timeout_ms
    common = {"bootstrap.servers": cfg.bootstrap, "log_level": log_level}
    common |= librdkafka(cfg.security)
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
        cconf["heartbeat.interval.ms"] = heartbeat_ms(session_timeout_ms)
        cconf["max.poll.interval.ms"] = max(60000, session_timeout_ms)
    pconf.update(settings or {})
    cconf.update(settings or {})
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


if __name__ == "__main__":
    # ``python -m workloads.clients --probe JSON``: see probe_client_settings.
    if len(sys.argv) == 3 and sys.argv[1] == "--probe":
        sys.exit(_probe_main(sys.argv[2]))
    sys.exit("usage: python -m workloads.clients --probe JSON")
