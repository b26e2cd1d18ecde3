"""The client processes as faults see them: one protocol both sides hold to.

Why in ``history/``: the workloads implement it and the nemeses act through it, and neither
may import the other; this package is the contract both stand on. Every member is required:
a workload that lacks an ability says so explicitly (no hook points: ``hooks`` False and
``fired_hook`` None; no roles among its processes: ``processor_roles`` empty and
``aim_processor`` None), so a fault never guesses from a missing attribute. Each workload
package's ``control`` module holds the object that satisfies it.

Instances are the processes' history process ids; pids, group ids and transactional ids are
of the live ones, looked up when a fault asks.

A group's state may live beyond its group coordinator's partition of ``__consumer_offsets``:
a share group (KIP-932) keeps each share partition's state in a partition of
``__share_group_state``, led by a share coordinator. The clients name that state by its
coordinator keys (:meth:`ClientControl.state_keys`), not by partitions: which partition holds
a key depends on the brokers' settings, which only the cluster's side knows, and on Kafka's
hash, which the harness computes (``harness.kafka.coordinators``).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable


class StateKey(NamedTuple):
    """One piece of the clients' group state on an internal topic: its leader is the
    coordinator of that state, a target for faults aimed at the group's coordinators."""

    #: The internal topic that holds it (``__share_group_state``).
    topic: str
    #: The coordinator key Kafka hashes to choose the topic's partition.
    key: str
    #: What its leader is to the group (``share coordinator``).
    coordinator: str
    #: Whose state it is, for a reader of the history (``<input topic>-<partition>``).
    holds: str


@runtime_checkable
class ClientControl(Protocol):
    """The client processes a fault may pause, kill, cut off, arm or impersonate."""

    @property
    def bootstrap(self) -> str:
        """The brokers' client addresses (an impostor producer connects there)."""
        ...

    @property
    def group_id(self) -> str:
        """The consumer group the processes form (its coordinator is a fault's target)."""
        ...

    @property
    def input_topic(self) -> str: ...

    @property
    def output_topic(self) -> str: ...

    @property
    def session_timeout_s(self) -> float:
        """How long a paused process stays a member: a zombie pause outlasts it."""
        ...

    @property
    def transaction_timeout_s(self) -> float:
        """How long a late request is held so that it arrives after its transaction."""
        ...

    @property
    def pause_at_commit(self) -> bool:
        """Whether processors stop themselves at their next offset commit on SIGUSR1 (a
        zombie made between produce and commit); False: a zombie is an outside SIGSTOP."""
        ...

    @property
    def hooks(self) -> bool:
        """Whether processors can be armed to kill or stop themselves at a protocol moment
        (``history.moments``): :meth:`arm_hook` and :meth:`fired_hook` work."""
        ...

    @property
    def crash_interval_s(self) -> float | None:
        """Seconds between two crash-clients events, for processes that take long to start
        and rejoin (JVMs restoring state); None: the schedule's own spacing."""
        ...

    @property
    def processor_roles(self) -> tuple[str, ...]:
        """Roles among the processes that processor faults may aim at (a Connect group's
        leader, a task's worker) through :meth:`aim_processor`; empty: interchangeable."""
        ...

    def processor_pids(self) -> dict[int, int]:
        """Live processes: instance -> OS pid (what a pause or kill signals)."""
        ...

    def processor_gids(self) -> dict[int, int]:
        """Live processes that run with a group id of their own (their supervisor slot's):
        instance -> gid, what ``cut-processor`` cuts off the network; empty: none."""
        ...

    def transactional_ids(self) -> dict[int, str]:
        """Live processes' transactional ids (what a hijack fences); empty: none."""
        ...

    def state_keys(self) -> tuple[StateKey, ...]:
        """The clients' group state beyond the group coordinator's own partition (a share
        group's share-partition state); empty: none, or not known yet. Never raises: a fault
        asks while brokers fail, and aims at the group coordinator instead."""
        ...

    def aim_processor(self, role: str, pick: int) -> tuple[int, str] | None:
        """The live instance in ``role`` now and why, or None (no such role, nobody in it)."""
        ...

    def processor_ready(self, instance: int) -> bool:
        """Whether a (re)started instance is serving again (a rolling restart waits for it
        before it stops the next one); clients that cannot tell answer whether it runs."""
        ...

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        """Make ``instance`` kill or stop itself at moment ``at`` (empty: disarm); raises
        when it cannot be armed (starting, gone, or a client without :attr:`hooks`)."""
        ...

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        """The armed moment that fired (``at``, ``action``, ``txn``, ``pid``), or None."""
        ...
