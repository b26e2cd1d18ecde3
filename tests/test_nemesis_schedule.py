"""Schedules are deterministic per seed, replay exactly, and reject bad specs clearly."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from nemeses.faults.network import _partition_groups
from nemeses.kinds import KINDS, parse_nemesis
from nemeses.schedule import generate, load


def test_same_seed_same_schedule() -> None:
    kinds = parse_nemesis("all").kinds()
    a = generate(kinds, seed=7, time_limit=300, nodes=3)
    b = generate(kinds, seed=7, time_limit=300, nodes=3)
    c = generate(kinds, seed=8, time_limit=300, nodes=3)
    assert a.to_json() == b.to_json()
    assert a.to_json() != c.to_json()
    assert {e.kind for e in a.events} <= set(kinds)
    assert all(e.at + e.duration <= 300 + 30 for e in a.events)


def test_saved_schedule_replays_identically(tmp_path: Path) -> None:
    sched = generate(parse_nemesis("partition,pause,kill,zombie").kinds(), seed=3, time_limit=120)
    path = tmp_path / "schedule.json"
    sched.save(path, executed=[{"kind": "x"}])
    assert load(path).to_json() == sched.to_json()


def test_zombie_pauses_outlast_the_session_timeout() -> None:
    sched = generate(["zombie"], seed=1, time_limit=200, session_timeout_s=6)
    assert sched.events and all(e.duration > 6 for e in sched.events)
    # A longer asked-for duration lengthens the pause; the seed's other draws stay as they were.
    longer = generate(["zombie"], seed=1, time_limit=200, session_timeout_s=6, duration=20)
    assert [e.duration for e in longer.events] == [20.0] * len(longer.events)
    assert [e.params for e in longer.events][:2] == [e.params for e in sched.events][:2]


def test_all_respects_the_environment() -> None:
    assert "partition" not in parse_nemesis("all").kinds(netns=False)
    assert "zombie" not in parse_nemesis("all").kinds(clients=False)
    assert parse_nemesis("none").kinds() == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("partition,bogus", "unknown nemesis 'bogus'"),
        ("zombie", "--nemesis zombie cannot run here: it needs a workload with processors"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_nemesis(spec).kinds(clients=False)


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


def test_all_streams_crashes_through_every_moment_in_a_minute() -> None:
    """``all`` keeps processors crashing (a steady stream beside the broker faults), and
    the seeded cycle of moments reaches every window of a transaction within 60 s, with
    kills and with abortable failures."""
    from history.moments import ABORT_MOMENTS, MOMENTS
    from nemeses.faults.moments import ARMED_PER_EVENT
    from nemeses.schedule import STREAM_INTERVAL

    sched = generate(parse_nemesis("all").kinds(), seed=7, time_limit=60)
    crashes = [e for e in sched.events if e.kind == "crash-clients"]
    assert len(crashes) >= 60 // STREAM_INTERVAL
    assert all(b.at - a.at == STREAM_INTERVAL for a, b in itertools.pairwise(crashes))
    assert all(len(e.params["moments"]) == ARMED_PER_EVENT for e in crashes)
    # Two consecutive events arm every moment: one firing pair covers the whole cycle.
    for a, b in itertools.pairwise(crashes):
        assert set(a.params["moments"]) | set(b.params["moments"]) == set(MOMENTS)
    # Most events fail one transaction with an abortable error before EndTxn (the abort
    # path is exercised by default) and kills at the others; over the run, every moment is
    # also a kill, and the aborts come at more than one moment.
    aborts, kills = set(), set()
    for e in crashes:
        acts = dict(zip(e.params["moments"], e.params["actions"], strict=True))
        assert list(acts.values()).count("abort") <= 1, acts
        aborts |= {at for at, act in acts.items() if act == "abort"}
        kills |= {at for at, act in acts.items() if act == "kill"}
    assert aborts <= set(ABORT_MOMENTS) and len(aborts) >= 2
    assert sum("abort" in e.params["actions"] for e in crashes) >= len(crashes) // 2 + 1
    assert kills == set(MOMENTS)
    serial = [e for e in sched.events if e.kind != "crash-clients"]
    assert serial and all(a.at + a.duration <= b.at for a, b in itertools.pairwise(serial))
    assert [e.at for e in sched.events] == sorted(e.at for e in sched.events)


def test_moment_params_are_drawn_from_the_seed_and_replay(tmp_path: Path) -> None:
    from history.moments import MOMENTS
    from nemeses.faults.moments import COORDINATOR_MOMENTS

    kinds = parse_nemesis("pause-at,coordinator-at,crash-clients").kinds()
    sched = generate(kinds, seed=5, time_limit=300)
    assert sched.to_json() == generate(kinds, seed=5, time_limit=300).to_json()
    assert generate(kinds, seed=6, time_limit=300).to_json() != sched.to_json()
    for e in sched.events:
        if e.kind == "pause-at":
            assert e.params["at"] in MOMENTS
        if e.kind == "coordinator-at":
            assert e.params["at"] in COORDINATOR_MOMENTS
            assert e.params["fault"] in ("pause", "partition", "client-cut")
    path = tmp_path / "schedule.json"
    sched.save(path)
    assert load(path).to_json() == sched.to_json()


def test_all_skips_hook_kinds_for_clients_without_hooks_and_says_why() -> None:
    from nemeses.kinds import skipped_by_all

    kinds = parse_nemesis("all").kinds(hooks=False)
    assert "pause-at" not in kinds and "coordinator-at" not in kinds
    assert "crash-clients" in kinds  # plain SIGKILLs need no hook points
    skipped = skipped_by_all(hooks=False)
    assert set(skipped) == {
        "pause-at",
        "coordinator-at",
        "late-endtxn",
        "late-produce",
        "leaderless-marker",
        "add-partitions",
        "controller-cut",
    }
    assert "known Kafka bug" in skipped["late-endtxn"]
    assert "hook points" in skipped["pause-at"]
    with pytest.raises(ValueError, match="hook points"):
        parse_nemesis("pause-at").kinds(hooks=False)
    sched = generate(kinds, seed=1, time_limit=60, skipped=skipped)
    assert sched.to_json()["skipped"] == skipped


def test_moments_are_the_processors_hook_points() -> None:
    """The nemesis side names moments the eos processor knows (``during-commit`` is armed
    at ``before-commit`` with a delay)."""
    from history.moments import HOOK_POINTS, MOMENTS
    from nemeses.faults.moments import COORDINATOR_MOMENTS

    assert set(MOMENTS) == {*HOOK_POINTS, "during-commit"}
    assert set(COORDINATOR_MOMENTS) <= set(HOOK_POINTS)


def test_named_recipes_pin_kinds_lengths_and_parameters() -> None:
    """A recipe name is a schedule: its kinds only, lengths from its range, pinned choices
    kept, and the same seed gives the same events."""
    from harness.run.nemesis import plan
    from harness.run.options import RunOptions

    assert parse_nemesis("kafka-17754").kinds() == ["pause"]
    assert parse_nemesis("coordinator-pause").kinds() == ["coordinator-at"]
    with pytest.raises(ValueError, match="recipe: kafka-17754"):
        parse_nemesis("kafka-1").kinds()
    options = RunOptions(workload="eos", time_limit=300, seed=5, nemesis="kafka-17754")
    a, b = plan(options, True, 10.0), plan(options, True, 10.0)
    assert a.to_json() == b.to_json() and len(a.events) >= 8
    assert {e.kind for e in a.events} == {"pause"}
    assert all(0.0 <= e.duration <= 30.0 for e in a.events)
    assert max(e.duration for e in a.events) > 20 and min(e.duration for e in a.events) < 10
    starts = [e.at for e in a.events]
    assert 10 <= (starts[-1] - starts[0]) / (len(starts) - 1) <= 20  # about one every 15 s
    options = RunOptions(workload="eos", time_limit=120, seed=5, nemesis="coordinator-pause")
    events = plan(options, True, 10.0).events
    assert events and all(e.kind == "coordinator-at" for e in events)
    assert all(e.params["fault"] == "pause" and e.params["at"] == "before-commit" for e in events)
    assert all(1.0 <= e.duration <= 15.0 for e in events)
    options = RunOptions(workload="eos", time_limit=120, seed=5, nemesis="coordinator-kill")
    events = plan(options, True, 10.0).events
    assert events and all(e.kind == "coordinator-at" for e in events)
    assert all(e.params["fault"] == "kill" and e.params["at"] == "before-commit" for e in events)
    assert all(8.0 <= e.duration <= 14.0 for e in events)
    for name, kind in (("delayed-endtxn", "late-endtxn"), ("delayed-produce", "late-produce")):
        options = RunOptions(workload="eos", time_limit=60, seed=5, nemesis=name)
        events = plan(options, True, 10.0).events
        assert len(events) >= 4 and {e.kind for e in events} == {kind}
        assert all(6.0 <= e.duration <= 10.0 for e in events)
        assert all(0 <= e.params["release_delay_ms"] < 400 for e in events)
    options = RunOptions(workload="eos", time_limit=120, seed=5, nemesis="kafka-20785")
    events = plan(options, True, 10.0).events
    assert len(events) >= 3 and {e.kind for e in events} == {"pause-at"}
    assert all(e.params["at"] == "before-commit" and 25 <= e.duration <= 28 for e in events)
    options = RunOptions(workload="share", time_limit=60, seed=5, nemesis="kafka-20742")
    events = plan(options, True, 10.0).events
    assert len(events) >= 3 and {e.kind for e in events} == {"add-partitions"}
    assert {e.params["add"] for e in events} <= {1, 2}


def test_a_cluster_without_an_ability_loses_the_kinds_that_need_it() -> None:
    """Abilities are detected on the cluster object, as Jepsen's optional database abilities
    are: ``all`` leaves out what it cannot serve (with the reason), a named kind is refused."""
    from nemeses.control import ABILITIES, abilities_of

    class SignalsOnly:
        def pause(self, node_id: int) -> None: ...
        def resume(self, node_id: int) -> None: ...
        def kill(self, node_id: int) -> None: ...
        def stop_node(self, node_id: int) -> bool: ...
        def start_node(self, node_id: int, timeout: float = 60.0) -> None: ...
        def restart(self, node_id: int, *, clean: bool = False, timeout: float = 60.0) -> None: ...
        def node_state(self, node_id: int) -> str | None: ...
        def node_alive(self, node_id: int) -> bool: ...

    have = abilities_of(SignalsOnly())
    assert have == {"signals"} and abilities_of(None) == set(ABILITIES)
    spec = parse_nemesis("all")
    kinds = spec.kinds(abilities=have)
    assert {"pause", "kill", "restart", "zombie"} <= set(kinds)
    assert not {"partition", "slow", "client-cut", "cut-processor"} & set(kinds)
    assert spec.skipped(abilities=have)["slow"] == "the cluster has no toxics ability"
    refused = "--nemesis slow cannot run here: the cluster has no toxics ability"
    with pytest.raises(ValueError, match=refused):
        parse_nemesis("pause,slow").kinds(abilities=have)


def test_the_harness_backends_have_every_ability_credentials_only_when_secured() -> None:
    from harness.substrate.api import ClusterConfig
    from harness.substrate.backends import REGISTRY
    from nemeses.control import ABILITIES, abilities_of

    plain = set(ABILITIES) - {"credentials", "reauth"}  # a secured cluster's only
    for name, backend in REGISTRY.items():  # built, not started
        assert abilities_of(backend.cluster(ClusterConfig(nodes=1))) == plain, backend
        if name != "ssh":
            tls = backend.cluster(ClusterConfig(nodes=1, security="tls"))
            assert abilities_of(tls) == set(ABILITIES) - {"reauth"}, backend  # SASL's only
            sasl = backend.cluster(ClusterConfig(nodes=1, security="sasl_ssl"))
            assert abilities_of(sasl) == set(ABILITIES), backend


def test_the_engine_records_each_kind_s_traits_in_its_start_ops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a fault does to client processes reaches the workloads through the history: the
    engine writes the kind's traits into the value of its ``start`` invoke and completion."""
    import dataclasses
    from types import SimpleNamespace
    from typing import Any, cast

    from history.schema import CUTS_CLIENT, FAULT_TRAITS, STOPS_CLIENT, fault_traits
    from nemeses.engine import Nemesis
    from nemeses.kinds import FaultKind
    from nemeses.schedule import Event, Schedule
    from nemeses.targets import FaultContext

    holding = {n for n, k in KINDS.items() if k.traits & {STOPS_CLIENT, CUTS_CLIENT}}
    assert holding == {
        "pause-processor",
        "zombie",
        "pause-at",
        "cut-processor",
        "leaderless-marker",
    }
    assert all(k.traits <= FAULT_TRAITS for k in KINDS.values())
    with pytest.raises(ValueError, match="unknown traits"):
        dataclasses.replace(KINDS["zombie"], traits=frozenset({"stops-clients"}))

    def fake(name: str) -> FaultKind:
        return dataclasses.replace(
            KINDS[name], start=lambda ctx, p: {"targets": [0]}, stop=lambda ctx, d: {}
        )

    for name in ("cut-processor", "pause"):
        monkeypatch.setitem(KINDS, name, fake(name))
    recorded: list[tuple[str, str, Any]] = []
    recorder = SimpleNamespace(
        invoke=lambda f, v: recorded.append(("invoke", f, v)),
        ok=lambda f, v: recorded.append(("ok", f, v)),
    )
    events = [Event(0.0, "cut-processor", {"pick": 0}, 1.0), Event(0.0, "pause", {}, 1.0)]
    ctx = cast(FaultContext, SimpleNamespace(cluster=None))
    nem = Nemesis(ctx, Schedule(0, ["cut-processor", "pause"], 10, 1, 1, events), recorder)
    for event in events:
        details = nem._start(event)
        assert details is not None
        nem._finish(event, details)
    starts = {(t, v["kind"]): fault_traits(v) for t, f, v in recorded if f == "start"}
    assert starts == {
        ("invoke", "cut-processor"): {CUTS_CLIENT},
        ("ok", "cut-processor"): {CUTS_CLIENT},
        ("invoke", "pause"): frozenset(),
        ("ok", "pause"): frozenset(),
    }
    assert all("traits" not in v for _, f, v in recorded if f == "stop")
