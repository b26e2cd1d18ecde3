"""What the streams workload's pieces agree on: its options and the instance configuration.

The supervisor (``workloads.streams.supervisor``) ships each instance of the Kafka Streams
application (``workloads/java/streams``, an OS process of its own) an :class:`InstanceConfig`
as JSON on its command line. The record headers and the group-key rule are part of the
history format (``history.streams_records``), because the checkers read them too.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from common.errors import HarnessError

#: ``eos`` runs ``processing.guarantee=exactly_once_v2``; ``at-least-once`` is the
#: broken-on-purpose variant (``at_least_once``): hard kills make it process inputs twice.
VARIANTS = ("eos", "at-least-once")
GUARANTEES = {"eos": "exactly_once_v2", "at-least-once": "at_least_once"}
#: ``group.protocol`` of the instances: the classic protocol, or KIP-1071's streams
#: rebalance protocol (the broker assigns the tasks).
GROUP_PROTOCOLS = ("classic", "streams")
STREAMS_PROTOCOL_SINCE = "4.3.0"


def protocol_needs(group_protocol: str) -> tuple[str, str] | None:
    """The oldest Kafka a group protocol runs on, and what needs it (``WorkloadSpec``)."""
    if group_protocol == "streams":
        return STREAMS_PROTOCOL_SINCE, "--group-protocol streams"
    return None


#: The state store's name in the application (its changelog is
#: ``<application id>-aggregates-changelog``).
STORE = "aggregates"


@dataclass
class InstanceConfig:
    """One instance of the application: everything it needs, shipped as JSON (``--config``)."""

    instance: int
    slot: int
    bootstrap: str
    application_id: str
    input_topic: str
    output_topic: str
    aggregate_topic: str
    history_path: str
    state_dir: str
    guarantee: str
    threads: int
    standby: int
    groups: int
    commit_interval_ms: int | None
    session_timeout_ms: int
    transaction_timeout_ms: int
    group_protocol: str = "classic"
    client_config: dict[str, str] = field(default_factory=dict)
    #: A secured cluster's ``security`` object (docs/client-contract.md): files only, never
    #: a secret, since the configuration travels on the command line; None on plaintext.
    security: dict[str, str] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


@dataclass
class StreamsOptions:
    """The whole workload: topics, instances, the application's settings and the feed."""

    variant: str = "eos"
    #: Instances of the application kept alive (each an OS process, a JVM).
    processors: int = 3
    #: ``num.stream.threads`` of each instance.
    threads: int = 1
    #: ``num.standby.replicas``.
    standby: int = 0
    partitions: int = 6
    values: int = 5000
    seed_batch: int = 50
    #: Every n-th seeder batch is written in a transaction the seeder aborts (0: none).
    poison_every: int = 10
    poison_batch: int = 5
    #: Group keys per input partition the aggregate counts by (``history.streams_records``).
    groups: int = 4
    #: ``commit.interval.ms``; None: Streams' default for the guarantee (100 ms under
    #: exactly_once_v2, 30 s under at_least_once, as an application left to its defaults).
    commit_interval_ms: int | None = None
    transaction_timeout_ms: int = 10000
    session_timeout_ms: int = 10000
    group_protocol: str = "classic"
    #: ``--client-config``: Kafka Streams settings of every instance, applied last.
    client_config: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    #: Suffix for topic, application and transactional-id names, so runs share a cluster.
    name_suffix: str = ""
    drain_timeout_s: float = 120.0
    stop_timeout_s: float = 40.0
    find_hanging: bool = True

    @property
    def input_topic(self) -> str:
        return f"streams-input{self.name_suffix}"

    @property
    def output_topic(self) -> str:
        return f"streams-output{self.name_suffix}"

    @property
    def aggregate_topic(self) -> str:
        return f"streams-aggregates{self.name_suffix}"

    @property
    def group_id(self) -> str:
        """The application id, which is its consumer group's id."""
        return f"streams-app{self.name_suffix}"

    @property
    def changelog_topic(self) -> str:
        return f"{self.group_id}-{STORE}-changelog"

    @property
    def txn_id_prefix(self) -> str:
        """Only the seeder's poison transactions use it (Streams names its producers)."""
        return f"streams{self.name_suffix}"

    @property
    def guarantee(self) -> str:
        return GUARANTEES[self.variant]

    def validate(self) -> None:
        if self.variant not in VARIANTS:
            raise HarnessError(f"--variant must be one of {', '.join(VARIANTS)} for streams")
        if self.processors < 1:
            raise HarnessError("--processors must be at least 1")
        if not 1 <= self.threads <= 8:
            raise HarnessError("--stream-threads must be between 1 and 8")
        if self.standby not in (0, 1, 2):
            raise HarnessError("--standby-replicas must be 0, 1 or 2")
        if self.partitions < 1:
            raise HarnessError("--partitions must be at least 1")
        if not 1 <= self.values <= 999_999:
            raise HarnessError("--values must be between 1 and 999999")
        if self.groups < 1:
            raise HarnessError("--groups must be at least 1")
        if self.commit_interval_ms is not None and self.commit_interval_ms < 1:
            raise HarnessError("--commit-interval-ms must be positive")
        if self.session_timeout_ms < 1000 or self.transaction_timeout_ms < 1000:
            raise HarnessError("session and transaction timeouts must be at least 1000 ms")
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise HarnessError(
                f"--group-protocol must be one of {', '.join(GROUP_PROTOCOLS)} for streams"
            )

    def instance_config(
        self, instance: int, slot: int, bootstrap: str, history_path: str, state_dir: str
    ) -> InstanceConfig:
        return InstanceConfig(
            instance=instance,
            slot=slot,
            bootstrap=bootstrap,
            application_id=self.group_id,
            input_topic=self.input_topic,
            output_topic=self.output_topic,
            aggregate_topic=self.aggregate_topic,
            history_path=history_path,
            state_dir=state_dir,
            guarantee=self.guarantee,
            threads=self.threads,
            standby=self.standby,
            groups=self.groups,
            commit_interval_ms=self.commit_interval_ms,
            session_timeout_ms=self.session_timeout_ms,
            transaction_timeout_ms=self.transaction_timeout_ms,
            group_protocol=self.group_protocol,
            client_config=dict(self.client_config),
        )

    def name_parts(self) -> list[str]:
        parts = [] if self.variant == "eos" else [self.variant]
        if self.group_protocol != "classic":
            parts.append(f"{self.group_protocol}-protocol")
        if self.threads != 1:
            parts.append(f"t{self.threads}")
        if self.standby:
            parts.append(f"standby{self.standby}")
        return parts

    def to_dict(self) -> dict[str, Any]:
        """The options and the names derived from them (the checkers read the topics)."""
        out = asdict(self)
        for name in DERIVED:
            out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> StreamsOptions:
        """The inverse of :meth:`to_dict`; an unknown key is an error."""
        data = {k: v for k, v in raw.items() if k not in DERIVED}
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise HarnessError(f"unknown streams option(s): {', '.join(unknown)}")
        return cls(**data)


#: Names :meth:`StreamsOptions.to_dict` adds from the options.
DERIVED = (
    "input_topic",
    "output_topic",
    "aggregate_topic",
    "changelog_topic",
    "group_id",
    "guarantee",
)
