"""The share workload's options, and the configuration each member process is given.

A member (``workloads.share.member``, or another client's share member named by its
manifest's ``start.share``: the Java twin on ``KafkaShareConsumer``) reads one JSON object,
:meth:`ShareOptions.member_config`; the keys are the client contract of a share member
(``docs/history-format.md``, "Workload share").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from common.errors import HarnessError
from workloads import client_registry, jsonconfig
from workloads.clients import client_python_problem

#: ``correct`` and the broken-on-purpose ``accept-before-process`` (it acknowledges and
#: commits before it processes: a member killed in between loses the record).
VARIANTS: Final = ("correct", "accept-before-process")
ISOLATIONS: Final = ("read_committed", "read_uncommitted")
#: Where a share partition starts when it is initialised (``share.auto.offset.reset``).
OFFSET_RESETS: Final = ("earliest", "latest")

#: A member's exit statuses: 0 SIGTERM or time limit, 7 the supervisor went away (2, a bad
#: configuration, and 3, a client that could not start: ``workloads.clientmain``).
EXIT_OK: Final = 0
EXIT_ORPHANED: Final = 7

#: The share group's dynamic settings the harness sets before a member joins, by option.
GROUP_SETTINGS: Final = {
    "lock_ms": "share.record.lock.duration.ms",
    "delivery_limit": "share.delivery.count.limit",
    "isolation": "share.isolation.level",
}


@dataclass
class ShareOptions:
    """One share run: the topics, the group, what members do with what they get."""

    #: Names the run's topics and group (``<topic>-in``, ``<topic>-out``, ``<topic>-group``).
    topic: str = "share"
    partitions: int = 3
    members: int = 3
    #: Values the seeder writes over the time limit (in batches of ``seed_batch``); every
    #: ``poison_every``-th batch also writes ``poison_batch`` values in a transaction it aborts.
    values: int = 2000
    seed_batch: int = 50
    poison_every: int = 5
    poison_batch: int = 5
    #: The group's record lock (``share.record.lock.duration.ms``; Kafka's floor is
    #: ``group.share.min.record.lock.duration.ms``, 15 s by default).
    lock_ms: int = 15000
    delivery_limit: int = 5
    isolation: str = "read_committed"
    #: The group's ``share.auto.offset.reset``. ``latest`` (Kafka's default) makes the
    #: members join, and every share partition be initialised, before the first value is
    #: written, so every committed value is still owed a delivery; partitions added later
    #: must start at their beginning (KAFKA-20742).
    offset_reset: str = "earliest"
    #: Seconds between two looks at the share group's start offsets during the run (the
    #: report's start offset over time); 0: only the final one.
    monitor_s: float = 10.0
    #: The chance a member releases / rejects a record instead of accepting it.
    release_p: float = 0.05
    reject_p: float = 0.02
    max_records: int = 50
    #: The work of processing one poll's records (ms, before their writes): a real
    #: application's processing takes time, and faults land inside it.
    process_ms: int = 250
    poll_timeout_ms: int = 500
    commit_timeout_ms: int = 30000
    variant: str = "correct"
    #: After the faults heal: how long members may take to accept what is left.
    drain_timeout_s: float = 120.0
    final_timeout_s: float = 60.0
    seed: int = 0
    client: str = field(default_factory=lambda: client_registry.default("share"))
    client_python: str | None = None
    client_config: dict[str, str] = field(default_factory=dict)

    # What the faults read (``workloads.control.SupervisedControl``): a member missing for
    # the group's session timeout leaves the group; the seeder's aborted transactions.
    session_timeout_ms: int = 45000
    transaction_timeout_ms: int = 60000

    @property
    def input_topic(self) -> str:
        return f"{self.topic}-in"

    @property
    def output_topic(self) -> str:
        return f"{self.topic}-out"

    @property
    def group_id(self) -> str:
        return f"{self.topic}-group"

    @property
    def txn_id_prefix(self) -> str:
        return self.topic

    def group_settings(self) -> dict[str, str]:
        """The share group's settings: where a share partition starts (by default the
        earliest offset: records written before the group's first member joined are
        delivered too), and this run's lock, limit and isolation."""
        mine = {key: str(getattr(self, name)) for name, key in GROUP_SETTINGS.items()}
        return {"share.auto.offset.reset": self.offset_reset, **mine}

    def member_config(
        self, process: int, slot: int, bootstrap: str, history_path: str, drain_path: str,
        time_limit_s: float,
    ) -> dict[str, Any]:  # fmt: skip
        """One member's ``--config``: the share member's client contract."""
        return {
            "process": process,
            "slot": slot,
            "history_path": history_path,
            "bootstrap": bootstrap,
            "group_id": self.group_id,
            "input_topic": self.input_topic,
            "output_topic": self.output_topic,
            "seed": self.seed,
            "release_p": self.release_p,
            "reject_p": self.reject_p,
            "variant": self.variant,
            "max_records": self.max_records,
            "process_ms": self.process_ms,
            "poll_timeout_ms": self.poll_timeout_ms,
            "commit_timeout_ms": self.commit_timeout_ms,
            "drain_path": drain_path,
            "time_limit_s": time_limit_s,
            "client_config": dict(self.client_config),
        }

    def validate(self) -> None:
        """Fail before any cluster work on options a member would refuse anyway."""
        if self.members < 1 or self.partitions < 1:
            raise HarnessError("the share workload needs at least one member and one partition")
        if self.variant not in VARIANTS:
            raise HarnessError(f"--share-variant is one of {', '.join(VARIANTS)}")
        if self.isolation not in ISOLATIONS:
            raise HarnessError(f"--share-isolation is one of {', '.join(ISOLATIONS)}")
        if self.offset_reset not in OFFSET_RESETS:
            raise HarnessError(f"--share-offset-reset is one of {', '.join(OFFSET_RESETS)}")
        if self.monitor_s < 0:
            raise HarnessError("--share-monitor-s must be >= 0")
        if min(self.release_p, self.reject_p) < 0 or self.release_p + self.reject_p >= 1:
            raise HarnessError("--release-p and --reject-p must be >= 0 and sum below 1")
        if self.delivery_limit < 2:
            raise HarnessError("--delivery-limit must be at least 2 (Kafka's floor)")
        if self.process_ms < 0:
            raise HarnessError("--process-ms must be >= 0")
        if self.lock_ms < 1000:
            raise HarnessError("--lock-ms must be at least 1000")
        if self.values < 1 or self.seed_batch < 1:
            raise HarnessError("the share workload's seeder needs values and a batch size")
        clients = client_registry.names("share")
        if self.client not in clients:
            raise HarnessError(f"the share workload's --client is one of {', '.join(clients)}")
        manifest = client_registry.get(self.client)
        problem = client_python_problem(self.client_python, manifest, "share")
        if problem is not None:
            raise HarnessError(problem)

    def to_dict(self) -> dict[str, Any]:
        """The options and the names derived from them (the checkers read both)."""
        return {
            **asdict(self),
            "input_topic": self.input_topic,
            "output_topic": self.output_topic,
            "group_id": self.group_id,
            "client_findings": client_registry.findings(self.client),
        }

    def name_parts(self) -> list[str]:
        client = [] if self.client == client_registry.default("share") else [self.client]
        variant = [] if self.variant == "correct" else [self.variant]
        reset = [] if self.offset_reset == "earliest" else [self.offset_reset]
        return [f"m{self.members}", *variant, *reset, *client]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ShareOptions:
        derived = ("client_findings", "input_topic", "output_topic", "group_id")
        return jsonconfig.from_json(
            cls, {k: v for k, v in raw.items() if k not in derived}, "share"
        )
