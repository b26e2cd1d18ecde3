"""What the eos workload's pieces agree on: options, variants, hooks and names.

The supervisor (``workloads.eos.supervisor``) and the processors (``workloads.eos.processor``,
separate OS processes that receive their configuration as JSON on the command line) read these
definitions. The record headers and the value transform are part of the history format
(``history.eos_records``), because checkers read them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from common.errors import HarnessError
from history.moments import HOOK_POINTS
from workloads import client_registry, jsonconfig
from workloads.clients import (
    client_python_problem,
    client_settings_problem,
    probe_client_settings,
)

#: ``eos`` is the correct consume-transform-produce loop; the others are broken on purpose so
#: checkers can be shown to catch them.
VARIANTS = ("eos", "at-least-once", "offsets-outside-txn", "read-uncommitted", "no-rewind")
TXN_ID_STRATEGIES = ("unique", "static")
HOOK_ACTIONS = ("kill", "stop", "exit")
#: Producer settings of a processor, before the user's ``--client-config``.
PRODUCER_SETTINGS: Final[Mapping[str, Any]] = MappingProxyType({"linger.ms": 5})
#: The registered clients that run eos (``workloads/manifests``), the default first: the
#: confluent-kafka processors (``workloads.eos.processor``), their Java twin (``workloads/java``,
#: same history), Kafka's own TransactionalMessageCopier (``workloads.eos.copier``, no history
#: op by op), then every client built from its sources (Go, Node.js).
CLIENTS = client_registry.names("eos")


def arm_path(history_path: str) -> Path:
    """Where a nemesis writes the moment it arms in a live processor (then sends SIGUSR2 to a
    Python processor; a Java one looks at the file at each hook point)."""
    return Path(f"{history_path}.arm")


def fired_path(history_path: str) -> Path:
    """Where a processor writes the armed moment that fired (point, action, txn, pid)."""
    return Path(f"{history_path}.fired")


@dataclass
class Hook:
    """Test-only: make one processor kill/stop/exit itself at a precise point of txn ``txn``.

    Faults from outside land wherever the process happens to be; a test that must show one
    particular interleaving (a crash between flush and offset commit) needs this precision.
    """

    at: str
    txn: int = 1
    action: str = "kill"

    def validate(self) -> None:
        if self.at not in HOOK_POINTS:
            raise HarnessError(f"hook point must be one of {', '.join(HOOK_POINTS)}")
        if self.action not in HOOK_ACTIONS:
            raise HarnessError(f"hook action must be one of {', '.join(HOOK_ACTIONS)}")
        if self.txn < 1:
            raise HarnessError("hook txn must be >= 1")


@dataclass
class ProcessorConfig:
    """One processor instance: everything it needs, shipped as JSON (``--config``)."""

    instance: int
    slot: int
    bootstrap: str
    input_topic: str
    output_topic: str
    output_partitions: int
    group_id: str
    history_path: str
    txn_id_prefix: str = "eos"
    variant: str = "eos"
    txn_id_strategy: str = "unique"
    txn_size: int = 50
    commit_interval_ms: int = 200
    abort_probability: float = 0.0
    seed: int = 0
    transaction_timeout_ms: int = 10000
    session_timeout_ms: int = 10000
    group_protocol: str = "classic"
    #: ``--client-config``: settings of this instance's producer and consumer, applied last.
    client_config: dict[str, str] = field(default_factory=dict)
    #: A secured cluster's ``security`` object for the client (docs/client-contract.md): the
    #: protocol and files (CA, certificate and key, or a SCRAM user and its password file).
    security: dict[str, str] | None = None
    #: ``--txn-delay-ms``: a seeded random pause in [0, this] ms between the operations of
    #: each transaction (its produce calls, the offsets, the commit).
    txn_delay_ms: int = 0
    #: Bound on each blocking client call (send_offsets, commit, abort, committed).
    call_timeout_s: float = 30.0
    #: False only to measure the cost of recording (bench/eos_throughput.py).
    record_history: bool = True
    hook: Hook | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def transactional(self) -> bool:
        return self.variant != "at-least-once"

    @property
    def transactional_id(self) -> str | None:
        if not self.transactional:
            return None
        if self.txn_id_strategy == "static":
            return f"{self.txn_id_prefix}-slot-{self.slot}"
        return f"{self.txn_id_prefix}-p{self.instance}"

    def validate(self) -> None:
        if self.variant not in VARIANTS:
            raise HarnessError(f"variant must be one of {', '.join(VARIANTS)}")
        if self.txn_id_strategy not in TXN_ID_STRATEGIES:
            raise HarnessError("transactional.id strategy must be 'unique' or 'static'")
        if self.txn_size < 1 or self.commit_interval_ms < 1:
            raise HarnessError("transaction size and commit interval must be positive")
        if not 0.0 <= self.abort_probability <= 1.0:
            raise HarnessError("abort probability must be between 0 and 1")
        if self.session_timeout_ms < 1000 or self.transaction_timeout_ms < 1000:
            raise HarnessError("session and transaction timeouts must be at least 1000 ms")
        if self.txn_delay_ms < 0:
            raise HarnessError(f"--txn-delay-ms must be >= 0, not {self.txn_delay_ms}")
        problem = client_settings_problem(self.client_config, self.group_protocol)
        if problem is not None:
            raise HarnessError(problem)
        if self.hook is not None:
            self.hook.validate()

    def to_json(self) -> str:
        return jsonconfig.to_json(self)

    @classmethod
    def from_json(cls, text: str) -> ProcessorConfig:
        cfg = jsonconfig.from_json(
            cls, text, "processor", nested={"hook": lambda h: Hook(**h) if h else None}
        )
        cfg.validate()
        return cfg


@dataclass
class EosOptions:
    """The whole workload: topics, processors and how the pipeline is fed and judged."""

    variant: str = "eos"
    processors: int = 3
    partitions: int = 6
    values: int = 5000
    seed_batch: int = 50
    #: Every n-th seeder batch is a poison batch written in a transaction and aborted; a
    #: processor that reads uncommitted data turns it into output. 0 disables it.
    poison_every: int = 10
    poison_batch: int = 5
    txn_size: int = 50
    commit_interval_ms: int = 200
    abort_probability: float = 0.0
    txn_id_strategy: str = "unique"
    transaction_timeout_ms: int = 10000
    session_timeout_ms: int = 10000
    group_protocol: str = "classic"
    #: ``--client-config``: librdkafka settings of every processor's producer and consumer.
    client_config: dict[str, str] = field(default_factory=dict)
    #: ``--txn-delay-ms``: a seeded random pause in [0, this] ms between the operations of
    #: each transaction.
    txn_delay_ms: int = 0
    #: One of :data:`CLIENTS`; its manifest's ``default = true`` when not given.
    client: str = field(default_factory=lambda: client_registry.default("eos"))
    #: ``--client-python``: the interpreter of the confluent-kafka processes (None: the
    #: harness's own).
    client_python: str | None = None
    #: False only to measure the cost of recording; such a run cannot be checked.
    record_history: bool = True
    seed: int = 0
    #: Suffix for topic, group and transactional-id names, so runs can share a cluster.
    name_suffix: str = ""
    drain_timeout_s: float = 90.0
    stop_timeout_s: float = 30.0
    #: Ask every broker for hanging transactions at the end (a JVM per broker: a few seconds).
    find_hanging: bool = True
    #: Test-only hooks keyed by slot; each applies to the first instance of that slot only.
    hooks: dict[int, Hook] = field(default_factory=dict)

    @property
    def input_topic(self) -> str:
        return f"eos-input{self.name_suffix}"

    @property
    def output_topic(self) -> str:
        return f"eos-output{self.name_suffix}"

    @property
    def group_id(self) -> str:
        return f"eos-group{self.name_suffix}"

    @property
    def txn_id_prefix(self) -> str:
        return f"eos{self.name_suffix}"

    def validate(self) -> None:
        if self.variant not in VARIANTS:
            raise HarnessError(f"--variant must be one of {', '.join(VARIANTS)}")
        if self.processors < 1:
            raise HarnessError("--processors must be at least 1")
        if self.client not in CLIENTS:
            raise HarnessError(f"--client must be one of {', '.join(CLIENTS)}")
        manifest = client_registry.get(self.client)
        self._ability_refusals(manifest)
        problem = client_python_problem(self.client_python, manifest, "eos")
        if problem is not None:
            raise HarnessError(problem)
        if self.partitions < 1:
            raise HarnessError("--partitions must be at least 1")
        if self.values < 1:
            raise HarnessError("--values must be at least 1")
        if self.values > 999_999:
            raise HarnessError("--values must be below 1000000 (values are v000000..v999999)")
        if self.seed_batch < 1:
            raise HarnessError("the seed batch must be at least 1")
        for slot, hook in self.hooks.items():
            if not 0 <= slot < self.processors:
                raise HarnessError(f"hook for slot {slot}, but slots are 0..{self.processors - 1}")
            hook.validate()
        # A processor config carries the remaining checks (strategy, timeouts, probability,
        # client settings); the client library itself judges the settings last.
        cfg = self.processor_config(0, 0, "", "")
        cfg.validate()
        if manifest.abilities.probe_client_config and self.client_config:
            problem = probe_client_settings(
                self.client_config,
                self.group_protocol,
                transactional=cfg.transactional,
                producer=PRODUCER_SETTINGS,
                transaction_timeout_ms=self.transaction_timeout_ms,
                session_timeout_ms=self.session_timeout_ms,
                python=self.client_python,
            )
            if problem is not None:
                raise HarnessError(problem)

    def _ability_refusals(self, m: client_registry.Manifest) -> None:
        """What the client's manifest says it cannot do, refused before the run starts (its
        processors would refuse it too, one exit status 2 after another; Kafka's copier has
        fixed command-line options, and would silently drop a knob it cannot take)."""
        ab = m.abilities
        if self.variant not in ab.variants:
            raise HarnessError(
                f"--variant {self.variant}: client {m.name} runs only {', '.join(ab.variants)}"
            )
        if self.group_protocol not in ab.group_protocols:
            raise HarnessError(
                f"--group-protocol {self.group_protocol}: client {m.name} runs only "
                f"{', '.join(ab.group_protocols)}"
            )
        if self.hooks and not ab.hooks:
            raise HarnessError(f"client {m.name} has no hook points")
        if self.abort_probability and not ab.aborts:
            raise HarnessError(f"--abort-probability: client {m.name} makes no deliberate aborts")
        if self.client_config and not ab.client_config:
            raise HarnessError(f"--client-config: client {m.name} takes no client settings")
        if self.txn_delay_ms and not ab.txn_delay:
            raise HarnessError(
                f"--txn-delay-ms: client {m.name} has no pause between its operations"
            )

    def processor_config(
        self, instance: int, slot: int, bootstrap: str, history_path: str
    ) -> ProcessorConfig:
        return ProcessorConfig(
            instance=instance,
            slot=slot,
            bootstrap=bootstrap,
            input_topic=self.input_topic,
            output_topic=self.output_topic,
            output_partitions=self.partitions,
            group_id=self.group_id,
            history_path=history_path,
            txn_id_prefix=self.txn_id_prefix,
            variant=self.variant,
            txn_id_strategy=self.txn_id_strategy,
            txn_size=self.txn_size,
            commit_interval_ms=self.commit_interval_ms,
            abort_probability=self.abort_probability,
            seed=self.seed * 1000 + instance,
            transaction_timeout_ms=self.transaction_timeout_ms,
            session_timeout_ms=self.session_timeout_ms,
            group_protocol=self.group_protocol,
            client_config=dict(self.client_config),
            txn_delay_ms=self.txn_delay_ms,
            record_history=self.record_history,
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hooks"] = {str(k): asdict(v) for k, v in self.hooks.items()}
        out["input_topic"] = self.input_topic
        out["output_topic"] = self.output_topic
        out["group_id"] = self.group_id
        out["client_findings"] = client_registry.findings(self.client)
        return out

    def name_parts(self) -> list[str]:
        """The test name says which broken variant and which client, when not the defaults."""
        usual = (("eos", self.variant), (client_registry.default("eos"), self.client))
        return [p for default, p in usual if p != default]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> EosOptions:
        """The inverse of :meth:`to_dict` (its derived names are skipped); an unknown key is
        an error, so a misspelt option never silently keeps its default."""
        derived = ("input_topic", "output_topic", "group_id", "client_findings")
        data = {k: v for k, v in raw.items() if k not in derived}
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise HarnessError(f"unknown eos option(s): {', '.join(unknown)}")
        hooks = data.pop("hooks", None) or {}
        parsed = {int(k): h if isinstance(h, Hook) else Hook(**h) for k, h in hooks.items()}
        return cls(**data, hooks=parsed)
