"""Schedules are deterministic per seed, replay exactly, and reject bad specs clearly."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from nemeses.faults import _partition_groups
from nemeses.kinds import KINDS, parse_kinds
from nemeses.schedule import generate, load


def test_same_seed_same_schedule() -> None:
    kinds = parse_kinds("all")
    a = generate(kinds, seed=7, time_limit=300, nodes=3)
    b = generate(kinds, seed=7, time_limit=300, nodes=3)
    c = generate(kinds, seed=8, time_limit=300, nodes=3)
    assert a.to_json() == b.to_json()
    assert a.to_json() != c.to_json()
    assert {e.kind for e in a.events} <= set(kinds)
    assert all(e.at + e.duration <= 300 + 30 for e in a.events)


def test_saved_schedule_replays_identically(tmp_path: Path) -> None:
    sched = generate(parse_kinds("partition,pause,kill,zombie"), seed=3, time_limit=120)
    path = tmp_path / "schedule.json"
    sched.save(path, executed=[{"kind": "x"}])
    assert load(path).to_json() == sched.to_json()


def test_zombie_pauses_outlast_the_session_timeout() -> None:
    sched = generate(["zombie"], seed=1, time_limit=200, session_timeout_s=6)
    assert sched.events and all(e.duration > 6 for e in sched.events)


def test_all_respects_the_environment() -> None:
    assert "partition" not in parse_kinds("all", netns=False)
    assert "zombie" not in parse_kinds("all", clients=False)
    assert parse_kinds("none") == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [("partition,bogus", "unknown nemesis 'bogus'"), ("zombie", "need a workload")],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_kinds(spec, clients=False)


def test_malformed_schedule_file(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"schedule_format": 1, "events": [{"at": 1}]}))
    with pytest.raises(ValueError, match="malformed"):
        load(bad)
    bad.write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        load(bad)


@pytest.mark.parametrize("n", [3, 5])
def test_partition_shapes(n: int) -> None:
    nodes = list(range(1, n + 1))
    rng = random.Random(0)
    (iso,) = _partition_groups(nodes, "isolate", 2, rng)
    assert iso[0] == [2] and sorted(iso[1]) == [x for x in nodes if x != 2]
    (halves,) = _partition_groups(nodes, "halves", 2, rng)
    assert 2 in halves[0] and len(halves[0]) < len(halves[1])
    (bridge,) = _partition_groups(nodes, "bridge", 2, rng)
    assert 2 not in bridge[0] + bridge[1] and bridge[0] and bridge[1]
    if n >= 5:
        ring = _partition_groups(nodes, "ring", 1, rng)
        # Each node keeps exactly its two ring neighbours.
        cut = {frozenset((a[0], b[0])) for a, b in ring}
        for x in nodes:
            assert sum(1 for y in nodes if y != x and frozenset((x, y)) not in cut) == 2


def test_every_kind_is_described() -> None:
    assert all(k.description for k in KINDS.values())
