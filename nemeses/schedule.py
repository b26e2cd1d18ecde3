"""Seeded fault schedules: what happens when, saved with the run and replayable exactly.

A schedule is plain data: events at offsets from the start of the run, each a fault kind,
its parameters (roles, shapes, sub-choices, all drawn from the seed) and a duration. The
same seed and options give the same schedule; a saved schedule replays the same kinds,
roles and timing. Which *node* a role hits is decided at injection and recorded then.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from history.moments import MOMENTS
from nemeses.faults.moments import crash_actions, crash_moments
from nemeses.kinds import KINDS

SCHEDULE_FORMAT = 1
#: Seconds between two events of a stream kind (crash-clients), and how long each event's
#: processors stay armed: short enough that every moment of the cycle comes up in 60 s,
#: long enough apart that processors rejoin and commit between crashes.
STREAM_INTERVAL = 8.0
STREAM_WINDOW = 6.0


@dataclass
class Event:
    at: float
    kind: str
    params: dict[str, Any]
    duration: float


@dataclass
class Schedule:
    seed: int
    kinds: list[str]
    time_limit: float
    interval: float
    duration: float
    events: list[Event] = field(default_factory=list)
    #: Kinds ``all`` left out in this environment, with the reason.
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self, executed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        out = {"schedule_format": SCHEDULE_FORMAT, **asdict(self)}
        if executed is not None:
            out["executed"] = executed
        return out

    def save(self, path: Path, executed: list[dict[str, Any]] | None = None) -> None:
        path.write_text(json.dumps(self.to_json(executed), indent=1))


def generate(
    kinds: list[str],
    *,
    seed: int,
    time_limit: float,
    interval: float = 10.0,
    duration: float = 10.0,
    nodes: int = 3,
    has_clients: bool = True,
    session_timeout_s: float = 10.0,
    skipped: dict[str, str] | None = None,
    duration_range: tuple[float, float] | None = None,
    pinned: dict[str, dict[str, Any]] | None = None,
    stream_interval: float = STREAM_INTERVAL,
) -> Schedule:
    """Faults one after another: ``interval`` of calm, then a fault for about ``duration``
    (or for a length drawn from ``duration_range``, as named recipes ask); beside them, each
    stream kind every ``stream_interval`` seconds from the start (clients that take long to
    start and rejoin, such as Connect workers, ask for a longer one). ``pinned`` fixes some
    parameters of a kind over the ones the seed draws."""
    rng = random.Random(seed)
    pinned = pinned or {}
    sched = Schedule(seed, list(kinds), time_limit, interval, duration, skipped=dict(skipped or {}))
    streams = [k for k in kinds if KINDS[k].stream]
    serial = [k for k in kinds if not KINDS[k].stream]
    for name in streams:
        order = rng.sample(MOMENTS, len(MOMENTS))
        t, n = stream_interval / 2, 0
        while t < time_limit - 1:
            moments = crash_moments(order, n)
            params = {
                **KINDS[name].params(rng, nodes, has_clients),
                "moments": moments,
                "actions": crash_actions(moments, n),
            }
            sched.events.append(Event(round(t, 1), name, params, STREAM_WINDOW))
            t, n = t + stream_interval, n + 1
    t = interval
    while serial and t < time_limit - 1:
        name = rng.choice(serial)
        kind = KINDS[name]
        params = {**kind.params(rng, nodes, has_clients), **pinned.get(name, {})}
        if kind.instant:
            dur = 0.0
        elif kind.zombie or (kind.zombie_share and rng.random() < kind.zombie_share):
            # Past the session timeout by enough for the group to move on; an asked-for
            # duration that is longer lengthens it (the successor's takeover then has room
            # on a loaded machine), without a draw of its own so seeds keep their schedules.
            dur = round(max(session_timeout_s + 5.0 + rng.uniform(0, 3), duration), 1)
        elif kind.min_duration_s:
            dur = round(max(kind.min_duration_s + rng.uniform(0, 3), duration), 1)
        elif duration_range is not None:
            dur = round(rng.uniform(*duration_range), 1)
        else:
            dur = round(rng.uniform(0.5 * duration, 1.5 * duration), 1)
        sched.events.append(Event(round(t, 1), name, params, dur))
        t += max(dur, 1.0) + interval
    sched.events.sort(key=lambda e: e.at)
    return sched


def load(path: Path) -> Schedule:
    """Read a saved schedule; a malformed file is a one-line ValueError."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(f"schedule file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"schedule {path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("schedule_format") != SCHEDULE_FORMAT:
        raise ValueError(f"schedule {path}: expected schedule_format {SCHEDULE_FORMAT}")
    try:
        events = [
            Event(float(e["at"]), str(e["kind"]), dict(e["params"]), float(e["duration"]))
            for e in data["events"]
        ]
        sched = Schedule(
            int(data["seed"]),
            list(data["kinds"]),
            float(data["time_limit"]),
            float(data["interval"]),
            float(data["duration"]),
            events,
            dict(data.get("skipped") or {}),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"schedule {path}: malformed event or field ({exc})") from None
    unknown = [e.kind for e in events if e.kind not in KINDS]
    if unknown:
        raise ValueError(f"schedule {path}: unknown fault kind {unknown[0]!r}")
    return sched
