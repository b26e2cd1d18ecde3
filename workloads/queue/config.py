"""What one client process of the queue workload is told, and what its results mean.

The configuration (``ClientConfig``, refused before any op runs when its history would be
meaningless), the op kinds, the value encoding and the exit codes are shared by the client
(``workloads.queue.client``) and the supervisor that starts it and reads its records
(``workloads.queue.supervisor``); they live apart from the client loop, as
``workloads.eos.config`` does for the eos processor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from workloads import jsonconfig
from workloads.clients import client_settings_problem

EXIT_OK: Final = 0
EXIT_BAD_CONFIG: Final = 2
EXIT_INIT: Final = 3
EXIT_ORPHANED: Final = 7
EXIT_CRASH: Final = 10
EXIT_UNCERTAIN: Final = 11
EXIT_UNUSABLE: Final = 12
EXIT_REWIND: Final = 13

#: Exit codes after which the process left no transaction open: its successor needs no fencing.
CLEAN_EXITS: Final = frozenset({EXIT_OK, EXIT_CRASH})

#: Values are ``process * VALUE_STRIDE + n``; a process stops before ``n`` reaches the stride.
VALUE_STRIDE: Final = 10_000_000

OP_FS: Final = ("send", "poll", "txn")
SUB_VIAS: Final = ("assign", "subscribe")


class BadConfig(ValueError):
    """The configuration cannot be run; the message says why."""


@dataclass
class ClientConfig:
    """Everything one client process needs; travels as JSON on the command line."""

    process: int
    bootstrap: str
    topic: str
    keys: int
    history_path: str
    group_id: str
    transactional_id: str | None = None
    #: A secured cluster's ``security`` object (docs/client-contract.md); None: plaintext.
    security: dict[str, str] | None = None
    seed: int = 0
    txn: bool = True
    sub_via: str = "assign"
    #: Relative weights of send / poll / txn ops (txn needs ``txn``).
    weights: dict[str, float] = field(
        default_factory=lambda: {"send": 1.0, "poll": 1.0, "txn": 1.0}
    )
    max_txn_len: int = 4
    #: Probability that an op is an assign/subscribe (after the first, which always is).
    sub_p: float = 1 / 16
    #: Probability that a transaction is aborted on purpose after its body ran.
    abort_p: float = 0.0
    #: Probability that an op is a ``crash``.
    crash_p: float = 0.0
    #: Maximum ops per second of this process (0 = unpaced).
    rate: float = 10.0
    #: Seconds this process runs at most, counted from its start.
    time_limit: float = 30.0
    #: Absolute CLOCK_MONOTONIC time (ns) at which the whole workload ends, if set.
    end_monotonic_ns: int | None = None
    read_committed: bool = True
    poll_ms: int = 100
    max_poll_records: int = 200
    op_timeout_s: float = 10.0
    transaction_timeout_ms: int = 10000
    session_timeout_ms: int = 6000
    group_protocol: str = "classic"
    #: ``--client-config``: settings of this process's producer and consumer, applied last.
    client_config: dict[str, str] = field(default_factory=dict)
    #: ``--txn-delay-ms``: a seeded random pause in [0, this] ms between the micro-ops of an
    #: op and, in a transaction, before its offsets and its commit.
    txn_delay_ms: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def producer_settings(self) -> dict[str, Any]:
        """The producer's settings before the user's ``client_config``: a send that cannot be
        acknowledged within the op budget is reported, not retried forever (the op then
        completes as info, or fail inside an aborted transaction)."""
        return {"linger.ms": 0, "message.timeout.ms": int(self.op_timeout_s * 1000)}

    def validate(self) -> None:
        """Refuse configurations whose histories would be meaningless, before any op runs."""
        if not isinstance(self.process, int) or self.process < 0:
            raise BadConfig("process must be an int >= 0")
        if self.keys < 1:
            raise BadConfig("keys must be >= 1")
        if self.sub_via not in SUB_VIAS:
            raise BadConfig(f"sub_via must be one of {', '.join(SUB_VIAS)}")
        unknown = set(self.weights) - set(OP_FS)
        if unknown:
            raise BadConfig(f"unknown op kinds in weights: {sorted(unknown)}")
        if any(w < 0 for w in self.weights.values()) or sum(self.weights.values()) <= 0:
            raise BadConfig("op weights must be >= 0 and not all 0")
        if not self.txn and self.weights.get("txn", 0) > 0:
            raise BadConfig("txn ops need transactions (txn: true), or give txn weight 0")
        if not self.txn and self.abort_p > 0:
            raise BadConfig("deliberate aborts need transactions (txn: true)")
        if self.txn and not self.transactional_id:
            raise BadConfig("transactions need a transactional_id")
        for name in ("sub_p", "abort_p", "crash_p"):
            p = getattr(self, name)
            if not 0 <= p <= 1:
                raise BadConfig(f"{name} must be within [0, 1]")
        if self.sub_p + self.crash_p >= 1:
            raise BadConfig("sub_p + crash_p must leave room for send/poll/txn ops")
        if self.max_txn_len < 1 or (self.weights.get("txn", 0) > 0 and self.max_txn_len < 2):
            raise BadConfig("max_txn_len must be >= 1 (>= 2 with txn ops)")
        if self.rate < 0 or self.time_limit <= 0 or self.op_timeout_s <= 0:
            raise BadConfig("rate must be >= 0; time_limit and op_timeout_s > 0")
        if self.txn_delay_ms < 0:
            raise BadConfig(f"--txn-delay-ms must be >= 0, not {self.txn_delay_ms}")
        problem = client_settings_problem(self.client_config, self.group_protocol)
        if problem is not None:
            raise BadConfig(problem)

    def to_json(self) -> str:
        return jsonconfig.to_json(self)

    @classmethod
    def from_json(cls, text: str) -> ClientConfig:
        return jsonconfig.from_json(cls, text, "queue client", BadConfig)


def decode_value(raw: bytes | None) -> Any:
    """Record value as JSON: the int our producers wrote, else the text (a foreign record)."""
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace")
    return int(text) if text.isascii() and text.isdigit() else text
