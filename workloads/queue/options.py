"""The queue workload's options: what a run asks of its clients, checked before any work.

Each client process gets its own :class:`workloads.queue.config.ClientConfig` from these
(:meth:`QueueOptions.process_config`); the supervisor (``workloads.queue.supervisor``) starts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from time import monotonic_ns
from typing import Any

from common.errors import HarnessError
from workloads import client_registry, jsonconfig
from workloads.clients import client_python_problem, probe_client_settings
from workloads.queue.config import OP_FS, SUB_VIAS, BadConfig, ClientConfig


@dataclass
class QueueOptions:
    """One queue run: topic layout, client behaviour and the end-of-run phase."""

    topic: str = "queue"
    #: Keys = partitions of ``topic`` (key k is partition k).
    keys: int = 4
    clients: int = 3
    txn: bool = True
    sub_via: str = "assign"
    #: Relative weights of send / poll / txn ops; ``None`` = equal weights (txn only with txn).
    weights: dict[str, float] | None = None
    max_txn_len: int = 4
    sub_p: float = 1 / 16
    abort_p: float = 0.0
    crash_p: float = 0.0
    #: Maximum ops per second per client process.
    rate: float = 10.0
    seed: int = 0
    read_committed: bool = True
    poll_ms: int = 100
    op_timeout_s: float = 10.0
    transaction_timeout_ms: int = 10000
    session_timeout_ms: int = 6000
    group_protocol: str = "classic"
    #: ``--client-config``: librdkafka settings of every client's producer and consumer.
    client_config: dict[str, str] = field(default_factory=dict)
    #: ``--txn-delay-ms``: a seeded random pause in [0, this] ms between the micro-ops of an
    #: op and, in a transaction, before its offsets and its commit.
    txn_delay_ms: int = 0
    #: Bound on the end-of-run phase (fencing, settling, final reads).
    final_timeout_s: float = 60.0
    group_id: str | None = None
    txn_id_prefix: str | None = None
    #: A registered client with a queue process (``workloads/manifests``: the confluent-kafka
    #: ``workloads.queue.client`` and its Java twin, the same ops on the Java client); the
    #: manifest's ``default = true`` when not given.
    client: str = field(default_factory=lambda: client_registry.default("queue"))
    #: ``--client-python``: the interpreter of the confluent-kafka processes (None: the
    #: harness's own).
    client_python: str | None = None

    @property
    def effective_weights(self) -> dict[str, float]:
        if self.weights is not None:
            return dict(self.weights)
        return {f: 1.0 for f in OP_FS if self.txn or f != "txn"}

    @property
    def effective_group_id(self) -> str:
        return self.group_id or f"{self.topic}-group"

    def transactional_id(self, process: int) -> str | None:
        if not self.txn:
            return None
        return f"{self.txn_id_prefix or self.topic + '-txn'}-{process}"

    def process_config(
        self, process: int, bootstrap: str, history_path: Path, end_ns: int
    ) -> ClientConfig:
        """A client's configuration; it stops at ``end_ns`` (``time.monotonic_ns``), the end
        of the run's time limit."""
        remaining = (end_ns - monotonic_ns()) / 1e9
        return ClientConfig(
            process=process,
            bootstrap=bootstrap,
            topic=self.topic,
            keys=self.keys,
            history_path=str(history_path),
            group_id=self.effective_group_id,
            transactional_id=self.transactional_id(process),
            seed=self.seed,
            txn=self.txn,
            sub_via=self.sub_via,
            weights=self.effective_weights,
            max_txn_len=self.max_txn_len,
            sub_p=self.sub_p,
            abort_p=self.abort_p,
            crash_p=self.crash_p,
            rate=self.rate,
            time_limit=max(0.001, remaining),
            end_monotonic_ns=end_ns,
            read_committed=self.read_committed,
            poll_ms=self.poll_ms,
            op_timeout_s=self.op_timeout_s,
            transaction_timeout_ms=self.transaction_timeout_ms,
            session_timeout_ms=self.session_timeout_ms,
            group_protocol=self.group_protocol,
            client_config=dict(self.client_config),
            txn_delay_ms=self.txn_delay_ms,
        )

    def validate(self) -> None:
        """Fail before any cluster work on options a client would refuse anyway."""
        if self.clients < 1:
            raise HarnessError("the queue workload needs at least one client")
        if self.sub_via not in SUB_VIAS:
            raise HarnessError(f"sub_via must be one of {', '.join(SUB_VIAS)}")
        clients = client_registry.names("queue")
        if self.client not in clients:
            raise HarnessError(f"the queue workload's --client is one of {', '.join(clients)}")
        manifest = client_registry.get(self.client)
        problem = client_python_problem(self.client_python, manifest, "queue")
        if problem is not None:
            raise HarnessError(problem)
        if self.final_timeout_s <= 0:
            raise HarnessError("final_timeout_s must be > 0")
        try:
            end = monotonic_ns() + 60 * 10**9  # any end: the check is of the settings
            cfg = self.process_config(0, "localhost:9092", Path("0.jsonl"), end)
            cfg.validate()
        except BadConfig as exc:
            raise HarnessError(f"bad queue options: {exc}") from None
        # The librdkafka probe speaks for a client of confluent-kafka only (its manifest says
        # so): the Java client's names differ (delivery.timeout.ms is librdkafka's alias of
        # message.timeout.ms, bounded by the transaction timeout; Java's is not).
        if manifest.abilities.probe_client_config and self.client_config:
            problem = probe_client_settings(
                self.client_config,
                self.group_protocol,
                transactional=self.txn,
                producer=cfg.producer_settings(),
                transaction_timeout_ms=self.transaction_timeout_ms,
                session_timeout_ms=self.session_timeout_ms,
                python=self.client_python,
            )
            if problem is not None:
                raise HarnessError(problem)

    def to_dict(self) -> dict[str, Any]:
        """The options, and the findings the client is known for (the checkers read them)."""
        return {**asdict(self), "client_findings": client_registry.findings(self.client)}

    def name_parts(self) -> list[str]:
        client = [] if self.client == client_registry.default("queue") else [self.client]
        return ["txn" if self.txn else "notxn", self.sub_via, *client]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> QueueOptions:
        if isinstance(raw, Mapping):
            raw = {k: v for k, v in raw.items() if k != "client_findings"}  # derived
        return jsonconfig.from_json(cls, raw, "queue")
