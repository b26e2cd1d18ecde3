"""The offsets workload's options, and the configuration each committer process is given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from common.errors import HarnessError
from workloads import jsonconfig


@dataclass
class OffsetsOptions:
    """One offsets run: how many groups commit, and how often."""

    #: Names the run's topic (``<topic>-in``, whose offsets the groups commit) and groups
    #: (``<topic>-g<slot>``).
    topic: str = "offsets"
    #: Committer processes, one consumer group each (a killed one is replaced in its slot,
    #: under a new process id, and goes on with the same group).
    groups: int = 12
    #: Partitions of the input topic; group k commits partition k modulo this.
    partitions: int = 1
    #: Name the groups so that one ``__consumer_offsets`` partition holds them all (one
    #: broker coordinates every group, as when an application's groups share a name's
    #: hash); False: ``<topic>-g<slot>``, spread over the coordinators by their hash.
    one_coordinator: bool = False
    #: Pause between a committer's rounds (read, then commit).
    interval_ms: int = 20
    #: How long one read of the committed offset may take.
    read_timeout_s: float = 10.0
    #: After the faults heal: how long the committers may take to read their offsets once
    #: more.
    final_timeout_s: float = 60.0
    seed: int = 0
    client_config: dict[str, str] = field(default_factory=dict)

    # What the faults read (``workloads.control.SupervisedControl``); no transactions here.
    session_timeout_ms: int = 45000
    transaction_timeout_ms: int = 60000

    @property
    def input_topic(self) -> str:
        return f"{self.topic}-in"

    @property
    def output_topic(self) -> str:
        return self.input_topic

    @property
    def group_id(self) -> str:
        """The first committer's group (what a fault aimed at "the group" hits)."""
        return self.group_of(0)

    def group_of(self, slot: int) -> str:
        """Slot ``slot``'s group when the groups are spread (``one_coordinator`` False)."""
        return f"{self.topic}-g{slot}"

    def committer_config(
        self, process: int, slot: int, group: str, bootstrap: str, history_path: str,
        stop_path: str, time_limit_s: float,
    ) -> dict[str, Any]:  # fmt: skip
        """One committer's ``--config`` (``workloads.offsets.committer.REQUIRED``)."""
        return {
            "process": process,
            "group": group,
            "topic": self.input_topic,
            "partition": slot % self.partitions,
            "bootstrap": bootstrap,
            "history_path": history_path,
            "stop_path": stop_path,
            "interval_ms": self.interval_ms,
            "read_timeout_s": self.read_timeout_s,
            "time_limit_s": time_limit_s,
            "final_timeout_s": self.final_timeout_s,
            "client_config": dict(self.client_config),
        }

    def validate(self) -> None:
        """Fail before any cluster work on options a committer would refuse anyway."""
        if self.groups < 1 or self.partitions < 1:
            raise HarnessError("the offsets workload needs at least one group and one partition")
        if self.interval_ms < 0:
            raise HarnessError("--offsets-interval-ms must be >= 0")
        if self.read_timeout_s <= 0 or self.final_timeout_s <= 0:
            raise HarnessError("the offsets workload's timeouts must be positive")

    def to_dict(self) -> dict[str, Any]:
        """The options and the names derived from them (the checkers read both)."""
        return {**asdict(self), "input_topic": self.input_topic, "group_id": self.group_id}

    def name_parts(self) -> list[str]:
        return [f"g{self.groups}", *(["one-coordinator"] if self.one_coordinator else [])]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> OffsetsOptions:
        derived = ("input_topic", "group_id")
        return jsonconfig.from_json(
            cls, {k: v for k, v in raw.items() if k not in derived}, "offsets"
        )
