"""Where a run's time went: how much of the load made progress, and what the processes spent
their time on instead.

Why: a run's throughput alone cannot tell a slow harness from a cluster and a group that spend
the run recovering ("1.8 txn/s" under faults, 30 without). Jepsen draws availability for the
same reason. Progress is counted in whole seconds of the load: a second is available when an
op that moves the workload forward completed in it. Plain counts from the history, printed
beside the verdict, never part of it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from history import Op
from history.schema import CUTS_CLIENT, STOPS_CLIENT, fault_traits

SECOND_NS = 1_000_000_000

#: The traits of a fault (in its ``start`` op) that stop or cut off a processor while it lives
#: (the crash stream's kills are not time spent: the successor's way to its first commit is).
HOLDS_PROCESS = frozenset({STOPS_CLIENT, CUTS_CLIENT})


@dataclass
class Availability:
    """Seconds of the load that counted (work was waiting), and those that made progress."""

    available: int = 0
    counted: int = 0

    @property
    def share(self) -> float:
        return self.available / self.counted if self.counted else 0.0


def availability(
    progress_ns: Iterable[int],
    start_ns: int,
    end_ns: int,
    waiting: Callable[[int, int], bool] = lambda a, b: True,
) -> Availability:
    """Whole seconds from ``start_ns`` to ``end_ns``: those in which ``waiting(begin, end)``
    holds are counted, and of those, the ones in which a progress time falls are available."""
    n = max(0, (end_ns - start_ns) // SECOND_NS)
    hit = [False] * n
    for t in progress_ns:
        k = (t - start_ns) // SECOND_NS
        if 0 <= k < n:
            hit[k] = True
    out = Availability()
    for k in range(n):
        begin = start_ns + k * SECOND_NS
        if waiting(begin, begin + SECOND_NS):
            out.counted += 1
            out.available += hit[k]
    return out


@dataclass
class InstanceTime:
    """One processor instance's time, in seconds (None: it never got there)."""

    spawned_ns: int | None = None
    to_first_commit: float | None = None
    starting: float | None = None
    unassigned: float = 0.0
    stopped_by_faults: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "to_first_commit_s": _r(self.to_first_commit),
            "starting_s": _r(self.starting),
            "unassigned_s": _r(self.unassigned),
            "stopped_by_faults_s": _r(self.stopped_by_faults),
        }


@dataclass
class TimeUse:
    availability: Availability = field(default_factory=Availability)
    instances: dict[int, InstanceTime] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "available_s": self.availability.available,
            "counted_s": self.availability.counted,
            "availability": round(self.availability.share, 3),
            "instances": {str(i): t.to_dict() for i, t in sorted(self.instances.items())},
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def instance_times(ops: list[Op]) -> dict[int, InstanceTime]:
    """Per processor instance: spawn (the supervisor's ``spawn`` ok) to its first committed
    transaction; its ``start`` (clients built, ``init_transactions``, subscribed); time
    without partitions from a ``revoke`` or ``lost`` callback to its next ``assign``; time
    stopped or cut off by a fault aimed at it (one whose ``start`` declares such a trait)."""
    out: dict[int, InstanceTime] = {}
    start_at: dict[int, int] = {}
    lost_at: dict[int, int] = {}
    faults: dict[tuple[Any, ...], tuple[int, list[int]]] = {}
    for op in ops:
        proc, f, typ, v = op["process"], op["f"], op["type"], op.get("value")
        if proc == "supervisor" and f == "spawn" and typ == "ok" and isinstance(v, dict):
            out.setdefault(int(v["instance"]), InstanceTime()).spawned_ns = op["time"]
        elif isinstance(proc, int):
            it = out.setdefault(proc, InstanceTime())
            if f == "start" and typ == "invoke":
                start_at[proc] = op["time"]
            elif f == "start" and typ == "ok" and proc in start_at:
                it.starting = (op["time"] - start_at[proc]) / SECOND_NS
            elif f == "txn" and typ == "ok" and it.to_first_commit is None:
                if it.spawned_ns is not None:
                    it.to_first_commit = (op["time"] - it.spawned_ns) / SECOND_NS
            elif f == "rebalance" and typ == "ok" and isinstance(v, dict):
                if v.get("event") in ("revoke", "lost"):
                    lost_at.setdefault(proc, op["time"])
                elif v.get("event") == "assign" and proc in lost_at:
                    it.unassigned += (op["time"] - lost_at.pop(proc)) / SECOND_NS
        elif proc == "nemesis" and typ == "ok" and isinstance(v, dict):
            kind = v.get("kind")
            key = (kind, tuple(v.get("targets") or ()))
            if f == "start" and fault_traits(v) & HOLDS_PROCESS:
                targets = [t for t in v.get("targets") or () if isinstance(t, int)]
                faults[key] = (op["time"], targets)
            elif f == "stop" and key in faults:
                began, targets = faults.pop(key)
                for t in targets:
                    out.setdefault(t, InstanceTime()).stopped_by_faults += (
                        op["time"] - began
                    ) / SECOND_NS
    return out


def instances_line(times: dict[int, InstanceTime]) -> str | None:
    """The instances' time in one line (medians and maxima, sums)."""
    if not times:
        return None

    def spread(xs: list[float]) -> str:
        return f"median {statistics.median(xs):.1f} s (max {max(xs):.1f} s)" if xs else "none"

    first = [t.to_first_commit for t in times.values() if t.to_first_commit is not None]
    starting = [t.starting for t in times.values() if t.starting is not None]
    never = sum(1 for t in times.values() if t.to_first_commit is None)
    unassigned = sum(t.unassigned for t in times.values())
    stopped = sum(t.stopped_by_faults for t in times.values())
    return (
        f"instances: {len(times)} ({never} never committed); spawn to first commit "
        f"{spread(first)}; starting (clients, init_transactions) {spread(starting)}; "
        f"without partitions after a revoke {unassigned:.1f} s in all; stopped or cut off by "
        f"faults {stopped:.1f} s in all"
    )


def availability_line(a: Availability, what: str, counted: str) -> str:
    return (
        f"availability: {what} in {a.available} of the {a.counted} s {counted} "
        f"({100 * a.share:.0f}%)"
    )
