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

from nemeses.kinds import KINDS

SCHEDULE_FORMAT = 1


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
) -> Schedule:
    """Faults one after another: ``interval`` of calm, then a fault for about ``duration``."""
    rng = random.Random(seed)
    sched = Schedule(seed, list(kinds), time_limit, interval, duration)
    if not kinds:
        return sched
    t = interval
    while t < time_limit - 1:
        name = rng.choice(kinds)
        kind = KINDS[name]
        params = kind.params(rng, nodes, has_clients)
        if kind.instant:
            dur = 0.0
        elif kind.zombie:
            dur = round(session_timeout_s + 5.0 + rng.uniform(0, 3), 1)
        else:
            dur = round(rng.uniform(0.5 * duration, 1.5 * duration), 1)
        sched.events.append(Event(round(t, 1), name, params, dur))
        t += max(dur, 1.0) + interval
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
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"schedule {path}: malformed event or field ({exc})") from None
    unknown = [e.kind for e in events if e.kind not in KINDS]
    if unknown:
        raise ValueError(f"schedule {path}: unknown fault kind {unknown[0]!r}")
    return sched
