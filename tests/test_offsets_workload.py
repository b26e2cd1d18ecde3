"""The offsets workload's logic and the ``controller-cut`` fault, against fakes: options,
the committer's configuration, the state keys a fault aims with, the tally, and which broker
the fault cuts and what it waits for. The real thing runs in ``harness/test_scenarios.py``
(the fault on a shared cluster) and ``tests/test_kafka_20634_run.py`` (a kept 4.3.0 run)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from common.errors import HarnessError
from nemeses.faults import quorum
from nemeses.faults.base import FaultError
from nemeses.targets import FaultContext
from tests.fake_clients import NoClients
from workloads.clientmain import EXIT_BAD_CONFIG
from workloads.offsets import committer
from workloads.offsets.driver import summarize
from workloads.offsets.options import OffsetsOptions


def test_each_committer_gets_every_key_it_requires_and_a_group_of_its_own() -> None:
    o = OffsetsOptions(topic="t", groups=3, partitions=2)
    cfgs = [
        o.committer_config(10 + s, s, o.group_of(s), "b:1", f"/h/{s}", "/stop", 30.0)
        for s in range(3)
    ]
    assert all(set(committer.REQUIRED) <= set(c) for c in cfgs)
    assert [c["group"] for c in cfgs] == ["t-g0", "t-g1", "t-g2"]
    assert [c["partition"] for c in cfgs] == [0, 1, 0]
    assert {c["topic"] for c in cfgs} == {"t-in"}
    assert o.group_id == "t-g0"


def test_options_round_trip_and_refuse_what_a_committer_could_not_run() -> None:
    o = OffsetsOptions(topic="x", groups=5, interval_ms=7)
    assert OffsetsOptions.from_dict(o.to_dict()) == o
    assert o.name_parts() == ["g5"]
    for bad in ({"groups": 0}, {"partitions": 0}, {"interval_ms": -1}, {"read_timeout_s": 0}):
        with pytest.raises(HarnessError):
            OffsetsOptions(**bad).validate()  # type: ignore[arg-type]


def test_a_committer_with_a_bad_config_exits_2_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert committer.main(["--config", json.dumps({"process": 0})]) == EXIT_BAD_CONFIG
    err = capsys.readouterr().err.strip()
    assert err.startswith("offsets committer: bad --config: missing group") and "\n" not in err


def test_the_tally_counts_commits_by_outcome_and_reads() -> None:
    def op(process: Any, type_: str, f: str) -> dict[str, Any]:
        return {"process": process, "type": type_, "f": f, "value": {}}

    ops = [
        op(0, "invoke", "commit"), op(0, "ok", "commit"),
        op(0, "invoke", "commit"), op(0, "info", "commit"),
        op(1, "invoke", "read"), op(1, "ok", "read"),
        op(1, "invoke", "read"), op(1, "fail", "read"),
        op("supervisor", "ok", "spawn"),
    ]  # fmt: skip
    summary = summarize(ops)  # type: ignore[arg-type]
    assert summary.tally == {"acknowledged": 1, "unknown": 1, "reads": 1, "reads_failed": 1}
    assert summarize([]).tally is None


# --- the controller-cut fault, against fakes --------------------------------------------------


class Cluster:
    """Three brokers; ``__consumer_offsets`` has four partitions, 0-2 led by node 1 and 3 by
    node 2; cutting node 1 from the controllers moves its partitions to node 3."""

    uses_netns = True

    def __init__(self) -> None:
        self.leaders = {0: 1, 1: 1, 2: 1, 3: 2}
        self.calls: list[tuple[str, int]] = []

    def node_ids(self) -> list[int]:
        return [1, 2, 3]

    def partition_count(self, topic: str) -> int:
        return len(self.leaders)

    def leader(self, topic: str, partition: int) -> int | None:
        return self.leaders[partition]

    def coordinator_partition(self, topic: str, key: str) -> int:
        return int(key.rsplit("-", 1)[-1].lstrip("g")) % 4

    def cut_controller(self, node: int, *, followers: bool = False) -> None:
        self.calls.append(("cut", node))
        self.followers = followers
        self.leaders = {p: 3 if n == node else n for p, n in self.leaders.items()}

    def isr(self, topic: str, partition: int) -> list[int]:
        return [1, 2, 3]

    def heal(self) -> None:
        self.calls.append(("heal", 0))

    def registered_brokers(self) -> set[int]:
        return {1, 2, 3}


class Groups(NoClients):
    """Groups g0 (the group id), g1, g3, g5: three of them on node 1's partitions 0 and 1,
    none on its partition 2."""

    group_id = "t-g0"

    def state_keys(self) -> tuple[Any, ...]:
        from history.clientcontrol import StateKey

        return tuple(
            StateKey(quorum.OFFSETS, f"t-g{i}", "group coordinator", f"t-g{i}") for i in (1, 3, 5)
        )


def test_the_fault_cuts_the_broker_that_coordinates_most_groups_and_waits_for_a_move() -> None:
    cluster = Cluster()
    # No client path with one address per broker: the fault cuts and waits, and writes
    # nothing past the divergence (it has nowhere to aim).
    details = quorum.controller_cut_start(FaultContext(cluster, Groups()), {"pick": 5})  # type: ignore[arg-type]
    assert cluster.calls == [("cut", 1)] and cluster.followers
    assert details["targets"] == [1] and details["led"] == [0, 1, 2]
    # Aimed at the partitions of node 1 that hold the clients' groups.
    assert details["moved"] == [0, 1] and details["late_groups"] == 0
    assert "3 of the clients' 4 groups" in details["why"]
    assert quorum.controller_cut_stop(FaultContext(cluster, Groups()), details) == {"healed": True}  # type: ignore[arg-type]
    assert cluster.calls[-1] == ("heal", 0)


def test_the_fault_refuses_a_cluster_without_namespaces_and_names_an_unmoved_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loopback = Cluster()
    loopback.uses_netns = False
    with pytest.raises(FaultError, match="network namespaces"):
        quorum.controller_cut_start(FaultContext(loopback, Groups()), {"pick": 0})  # type: ignore[arg-type]

    class Stuck(Cluster):
        def cut_controller(self, node: int, *, followers: bool = False) -> None:
            self.calls.append(("cut", node))  # the controller never moves anything

    monkeypatch.setattr(quorum, "MOVE_TIMEOUT_S", 0.3)
    with pytest.raises(FaultError, match=r"__consumer_offsets partitions \[0, 1\] of node 1 moved"):
        quorum.controller_cut_start(FaultContext(Stuck(), Groups()), {"pick": 0})  # type: ignore[arg-type]


def test_one_coordinator_names_groups_that_one_offsets_partition_holds() -> None:
    from harness.kafka.coordinators import partition_for
    from workloads.offsets.supervisor import one_coordinator_groups

    class Hashing:
        def coordinator_partition(self, topic: str, key: str) -> int:
            return partition_for(key, 10)

    names = one_coordinator_groups(Hashing(), "t-g", 5)  # type: ignore[arg-type]
    assert len(set(names)) == 5 and names[0] == "t-g0"
    assert {partition_for(g, 10) for g in names} == {partition_for("t-g0", 10)}


def test_the_committers_name_every_group_as_state_on_the_offsets_log(tmp_path: Any) -> None:
    import types

    from workloads.offsets.control import OffsetsClients
    from workloads.offsets.supervisor import OffsetsWorkload

    cluster = types.SimpleNamespace(dir=tmp_path, bootstrap="b:1", env={})
    workload = OffsetsWorkload(OffsetsOptions(topic="t", groups=3), cluster, tmp_path, 30.0)  # type: ignore[arg-type]
    try:
        clients = OffsetsClients(workload)
        assert clients.group_id == "t-g0"
        assert [(k.topic, k.key) for k in clients.state_keys()] == [
            (quorum.OFFSETS, "t-g1"),
            (quorum.OFFSETS, "t-g2"),
        ]
    finally:
        workload.close()
