"""Faults aimed at a share group's coordinators: the share coordinators' keys and partitions
as Kafka computes them, the share clients' state keys, and ``group-coordinator`` choosing
between the group coordinator and a share coordinator (and nothing new for other groups)."""

from __future__ import annotations

import random
import types
from pathlib import Path
from typing import Any

import pytest

from harness.kafka.coordinators import log_partition_for
from harness.substrate.abilities.lookups import MetadataLookups
from history.clientcontrol import StateKey
from nemeses.targets import ROLE_SHIFT, FaultContext, choose_broker_role, resolve_broker
from tests.fake_clients import NoClients
from workloads.share import control as share_control
from workloads.share.control import ShareClients, kafka_uuid, share_coordinator_key

STATE = "__share_group_state"

#: (group, topic id, partition, coordinator key, partition of 10, partition of 50), printed by
#: a throwaway Java program run against Kafka's own jars (4.2.2, 4.3.1 and 4.4.0 printed the
#: same): ``SharePartitionKey.getInstance(group, Uuid.fromString(id), p).asCoordinatorKey()``,
#: and ``ShareCoordinatorService.partitionFor(key)`` on an instance whose partition count was
#: set to 10, then 50 (the count a broker passes it: the topic's partitions, or
#: ``share.coordinator.state.topic.num.partitions`` before the topic exists). The first two
#: groups' keys have negative hashes; the ids hold ``-`` and ``_``, where confluent-kafka
#: would write ``+`` and ``/``.
KAFKA_VECTORS = [
    ("share-group", "AAAAAAAAAAAAAAAAAAAAAA", 0, "share-group:AAAAAAAAAAAAAAAAAAAAAA:0", 5, 25),
    ("share-group", "AAAAAAAAAAAAAAAAAAAAAA", 3, "share-group:AAAAAAAAAAAAAAAAAAAAAA:3", 2, 22),
    ("share-group", "xyNPQu3jSXGJ8aHh2TTGbg", 1, "share-group:xyNPQu3jSXGJ8aHh2TTGbg:1", 3, 43),
    (
        "my-share-group",
        "-f_TqU2iRz6X0sLqYyW0Xw",
        2,
        "my-share-group:-f_TqU2iRz6X0sLqYyW0Xw:2",
        9,
        49,
    ),
    (
        "my-share-group",
        "-f_TqU2iRz6X0sLqYyW0Xw",
        3,
        "my-share-group:-f_TqU2iRz6X0sLqYyW0Xw:3",
        0,
        0,
    ),
    ("g", "bKj1e2r3S-a_Rt9Z1x2y3w", 0, "g:bKj1e2r3S-a_Rt9Z1x2y3w:0", 6, 6),
    ("g", "bKj1e2r3S-a_Rt9Z1x2y3w", 1, "g:bKj1e2r3S-a_Rt9Z1x2y3w:1", 5, 5),
]


@pytest.mark.parametrize(("group", "topic_id", "partition", "key", "of10", "of50"), KAFKA_VECTORS)
def test_keys_and_partitions_are_kafka_s(
    group: str, topic_id: str, partition: int, key: str, of10: int, of50: int
) -> None:
    assert share_coordinator_key(group, topic_id, partition) == key
    sized = {"share.coordinator.state.topic.num.partitions": "10"}
    assert log_partition_for(STATE, key, sized) == of10
    assert log_partition_for(STATE, key, {}) == of50  # Kafka's default size


def test_topic_ids_are_written_as_kafka_writes_them() -> None:
    """Java: ``new Uuid(0x1234567890abcdefL, 0xfedcba0987654321L).toString()``."""
    from confluent_kafka import Uuid

    least = 0xFEDCBA0987654321 - (1 << 64)  # a Java long
    assert kafka_uuid(0x1234567890ABCDEF, least) == "EjRWeJCrze_-3LoJh2VDIQ"
    assert kafka_uuid(0x1234567890ABCDEF, 0xFEDCBA0987654321) == "EjRWeJCrze_-3LoJh2VDIQ"
    assert kafka_uuid(0, 0) == "AAAAAAAAAAAAAAAAAAAAAA"
    # confluent-kafka's own string form is the standard alphabet's: not Kafka's key.
    theirs = Uuid(0x1234567890ABCDEF, least)
    assert str(theirs) == "EjRWeJCrze/+3LoJh2VDIQ"
    mine = kafka_uuid(theirs.get_most_significant_bits(), theirs.get_least_significant_bits())
    assert mine == "EjRWeJCrze_-3LoJh2VDIQ"


class _Lookups(MetadataLookups[Any]):
    """The lookups' arithmetic alone: leaders are asked of nobody, only recorded."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = settings
        self.asked: list[tuple[str, int]] = []

    def leader(self, topic: str, partition: int) -> int | None:
        self.asked.append((topic, partition))
        return partition


def test_the_cluster_places_each_coordinator_key_by_its_log_s_size() -> None:
    c = _Lookups(
        {
            "offsets.topic.num.partitions": "7",
            "transaction.state.log.num.partitions": "11",
            "share.coordinator.state.topic.num.partitions": "10",
        }
    )
    assert c.coordinator_partition(STATE, KAFKA_VECTORS[0][3]) == KAFKA_VECTORS[0][4]
    c.group_coordinator("hello")  # "hello".hashCode() is 99162322
    c.txn_coordinator("hello")
    assert c.asked == [("__consumer_offsets", 99162322 % 7), ("__transaction_state", 99162322 % 11)]


def _share_clients(tmp_path: Path) -> tuple[ShareClients, Any]:
    from workloads.share.options import ShareOptions
    from workloads.share.supervisor import ShareWorkload

    cluster = types.SimpleNamespace(
        dir=tmp_path, bootstrap="localhost:9092", internal_bootstrap="localhost:9093", env={}
    )
    options = ShareOptions(topic="t", partitions=2)
    workload = ShareWorkload(options, cluster, tmp_path, time_limit=30)  # type: ignore[arg-type]
    return ShareClients(workload), workload


def test_share_clients_name_each_input_partition_s_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clients, workload = _share_clients(tmp_path)
    asked: list[tuple[str, str]] = []
    answers: list[Any] = [OSError("brokers down"), ("xyNPQu3jSXGJ8aHh2TTGbg", 3)]

    def describe(bootstrap: str, topic: str, timeout: float) -> tuple[str, int]:
        asked.append((bootstrap, topic))
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(share_control, "describe_input", describe)
    try:
        assert clients.state_keys() == ()  # a failed look-up: nothing, no exception
        keys = clients.state_keys()
        assert clients.state_keys() == keys  # looked up once, then kept
    finally:
        workload.close()
    assert asked == [("localhost:9093", "t-in")] * 2
    tid = "xyNPQu3jSXGJ8aHh2TTGbg"
    assert keys == tuple(
        StateKey(STATE, f"t-group:{tid}:{p}", "share coordinator", f"t-in-{p}") for p in range(3)
    )


def test_other_workloads_name_no_state(tmp_path: Path) -> None:
    from tests.test_client_control import SUPERVISORS, _control_class

    for package, make in SUPERVISORS.items():
        if package in (
            "share",
            "offsets",
        ):  # offsets: every group's, tests/test_offsets_workload.py
            continue
        supervisor = make(tmp_path / package)
        try:
            assert _control_class(package)(supervisor).state_keys() == ()
        finally:
            supervisor.close()


class FakeCluster:
    """Three brokers; the group coordinator is node 1, a state partition p is led by node
    ``2 + p % 2`` (so every share coordinator differs from the group coordinator)."""

    def __init__(self, group_coordinator: int | None = 1, led: bool = True) -> None:
        self.coordinator = group_coordinator
        self.led = led

    def node_ids(self) -> list[int]:
        return [3, 1, 2]

    def group_coordinator(self, group_id: str) -> int | None:
        return self.coordinator

    def leader(self, topic: str, partition: int) -> int | None:
        if not self.led:
            raise RuntimeError(f"no live broker has metadata for {topic}-{partition}")
        return 2 + partition % 2

    def coordinator_partition(self, topic: str, key: str) -> int:
        return log_partition_for(topic, key, {"share.coordinator.state.topic.num.partitions": "10"})


class ShareLike(NoClients):
    """A share group over input ``in`` with the vectors' first topic id and three partitions."""

    group_id = "share-group"

    def state_keys(self) -> tuple[StateKey, ...]:
        tid = KAFKA_VECTORS[0][1]
        return tuple(
            StateKey(STATE, f"share-group:{tid}:{p}", "share coordinator", f"in-{p}")
            for p in range(3)
        )


def _resolve(cluster: Any, clients: Any, pick: int) -> tuple[int, str]:
    return resolve_broker(
        FaultContext(cluster, clients), {"role": "group-coordinator", "pick": pick}
    )


def test_a_share_group_s_pick_chooses_the_group_or_a_share_coordinator() -> None:
    cluster, clients = FakeCluster(), ShareLike()
    assert _resolve(cluster, clients, 5) == (1, "group coordinator of share-group")
    # Partitions 5, 4, 3 of 10 (the vectors): led by nodes 3, 2, 3.
    for k, (state_partition, node) in enumerate([(5, 3), (4, 2), (3, 3)], start=1):
        got = _resolve(cluster, clients, 5 | (k << ROLE_SHIFT))
        where = f"leader of {STATE}-{state_partition}, for in-{k - 1}"
        why = f"share coordinator of share-group ({where})"
        assert got == (node, why)
    # The choice wraps around: four choices, the fifth is the group coordinator again.
    assert _resolve(cluster, clients, 4 << ROLE_SHIFT)[0] == 1
    # A state log nobody knows yet: a random node, and the history says so.
    node, why = _resolve(FakeCluster(led=False), clients, 1 << ROLE_SHIFT)  # 2**20 % 3 == 1
    assert node == 2 and why.endswith(f"{STATE}-5, for in-0) unavailable; random node")


def _old_rule(cluster: FakeCluster, group: str, pick: int) -> tuple[int, str]:
    """``group-coordinator`` as it resolved before state keys existed."""
    node, why = cluster.group_coordinator(group), f"group coordinator of {group}"
    if node is None:
        return sorted(cluster.node_ids())[pick % 3], why + " unavailable; random node"
    return node, why


@pytest.mark.parametrize("coordinator", [1, 3, None])
def test_groups_without_state_keys_resolve_as_before(coordinator: int | None) -> None:
    rng = random.Random(7)
    picks = [0, 1, 2, (1 << ROLE_SHIFT) - 1, 1 << ROLE_SHIFT, (1 << 30) - 1]
    picks += [choose_broker_role(rng, True)["pick"] for _ in range(200)]
    for cluster in (FakeCluster(coordinator),):
        for pick in picks:
            assert _resolve(cluster, NoClients(), pick) == _old_rule(cluster, "g", pick)
