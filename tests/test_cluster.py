"""The substrate against a real 3-node KRaft cluster: writes, faults and look-ups."""

from __future__ import annotations

import contextlib
import time
import uuid

import pytest

from common.waits import wait_for
from harness.kafka.coordinators import describe_transaction_coordinator
from nemeses.faults.late import END_TXN_API_KEY, NEXT_TXN_API_KEYS
from tests.kafka_io import (
    client_metadata,
    commit_one_then_begin_next,
    read_committed,
    transactional_write,
)

pytestmark = pytest.mark.cluster


def _topic(cluster, partitions: int = 3) -> str:  # type: ignore[no-untyped-def]
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.ensure_topic(name, partitions, 3, {"min.insync.replicas": "2"})
    return name


def _cut_rules(cluster, node_id: int) -> list[str]:  # type: ignore[no-untyped-def]
    """The partition rules in force at ``node_id``: in its namespace (process backend) or in
    its container's KH-PART chain (Docker backend)."""
    if cluster.backend == "docker":
        out = cluster.node(node_id).must_exec(["iptables", "-w", "-S", "KH-PART"])
        return [ln for ln in out.splitlines() if "DROP" in ln]
    return list(cluster.net.rules(node_id))


def test_clients_only_see_toxiproxy_addresses(any_cluster) -> None:  # type: ignore[no-untyped-def]
    c = any_cluster
    proxies = c.toxiproxy.proxies()
    listen = {p["listen"] for p in proxies.values()}
    md = client_metadata(c.bootstrap)
    advertised = {f"{b.host}:{b.port}" for b in md.brokers.values()}
    if c.backend == "docker":
        # toxiproxy listens on every interface of its container; each proxy's port is
        # published on the same port of the host's 127.0.0.1, which the brokers advertise.
        assert {a.rsplit(":", 1)[1] for a in advertised} == {x.rsplit(":", 1)[1] for x in listen}
        assert {a.rsplit(":", 1)[0] for a in advertised} == {"127.0.0.1"}
    else:
        assert advertised == listen
    assert len(advertised) == len(c.nodes)
    if c.backend == "docker":
        assert len({n.ip() for n in c.nodes}) == len(c.nodes)  # one container each
    elif c.uses_netns:
        assert all(n.net.netns for n in c.nodes)
        assert len({n.net.ip for n in c.nodes}) == len(c.nodes)


def test_transactional_multi_partition_round_trip(any_cluster) -> None:  # type: ignore[no-untyped-def]
    c = any_cluster
    topic = _topic(c)
    values = {p: [f"{p}-{i}" for i in range(20)] for p in range(3)}
    transactional_write(c.bootstrap, topic, values)
    got = read_committed(c.bootstrap, topic, 3, expect=60)
    assert got == values


def test_isolating_a_leader_moves_leadership_and_heal_restores_isr(any_cluster) -> None:  # type: ignore[no-untyped-def]
    c = any_cluster
    if not c.uses_netns:
        pytest.skip("partitions need network namespaces")
    topic = _topic(c, partitions=1)
    old = c.leader(topic, 0)
    assert old is not None
    others = [n.node_id for n in c.nodes if n.node_id != old]
    c.isolate(old)
    assert not c.can_reach(old, others[0])
    assert _cut_rules(c, old)
    new = wait_for(
        lambda: (lead := c.leader(topic, 0)) not in (None, old) and lead,
        timeout=60,
        what="leadership to move off the isolated node",
    )
    assert new in others
    c.heal()
    assert c.can_reach(old, others[0])
    wait_for(
        lambda: sorted(c.isr(topic, 0)) == sorted(n.node_id for n in c.nodes),
        timeout=90,
        what="the healed node back in the ISR",
    )


def test_pause_shows_state_t_and_resume_recovers(any_cluster) -> None:  # type: ignore[no-untyped-def]
    c = any_cluster
    node = c.nodes[-1]
    c.pause(node.node_id)
    assert node.state() == "T"
    c.resume(node.node_id)
    assert node.state() in ("S", "R")
    topic = _topic(c)
    transactional_write(c.bootstrap, topic, {0: ["x"], 1: ["y"], 2: ["z"]})
    assert sum(len(v) for v in read_committed(c.bootstrap, topic, 3, expect=3).values()) == 3


def test_kill_and_restart_keeps_data(any_cluster) -> None:  # type: ignore[no-untyped-def]
    c = any_cluster
    topic = _topic(c, partitions=1)
    values = {0: [f"v{i}" for i in range(50)]}
    transactional_write(c.bootstrap, topic, values)
    victim = c.leader(topic, 0)
    assert victim is not None
    pid = c.node(victim).pid
    c.kill(victim)
    assert not c.node(victim).alive()
    data_files = list(c.node(victim).data_dir.glob(f"{topic}-0/*.log"))
    assert data_files and data_files[0].stat().st_size > 0
    c.start_node(victim)
    assert c.node(victim).pid != pid
    wait_for(lambda: victim in c.isr(topic, 0), timeout=90, what="restarted node back in the ISR")
    # Force reads from the restarted node: make it the only one clients can reach.
    for n in c.nodes:
        if n.node_id != victim:
            c.proxy_down(n.node_id)
    try:
        wait_for(lambda: c.leader(topic, 0) is not None, timeout=30, what="a leader")
    finally:
        for n in c.nodes:
            c.proxy_up(n.node_id)
    assert read_committed(c.bootstrap, topic, 1, expect=50) == values


def test_coordinator_lookups_match_the_brokers(any_cluster) -> None:  # type: ignore[no-untyped-def]
    c = any_cluster
    topic = _topic(c, partitions=1)
    txn_id = f"lookup-{uuid.uuid4().hex[:6]}"
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": txn_id, "log_level": 0})
    p.init_transactions(30)
    assert c.txn_coordinator(txn_id) == describe_transaction_coordinator(c, txn_id)
    group = f"grp-{uuid.uuid4().hex[:6]}"
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "log_level": 0})
    consumer.subscribe([topic])
    consumer.poll(2)
    desc = c.admin().describe_consumer_groups([group])[group].result(timeout=15)
    consumer.close()
    assert desc.coordinator.id == c.group_coordinator(group)
    assert c.active_controller() in {n.node_id for n in c.nodes}


def test_toxics_slow_and_cut_client_traffic(any_cluster) -> None:  # type: ignore[no-untyped-def]
    import socket

    c = any_cluster
    node = c.nodes[0]
    port = int(c.bootstrap.split(",")[0].rsplit(":", 1)[1])

    def round_trip() -> float:
        # A Kafka ApiVersions request, timed: a real request/response through the proxy.
        req = bytes.fromhex("0000000a00120000000000010000")
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(req)
            assert len(s.recv(4)) == 4
        return time.monotonic() - t0

    base = round_trip()
    name = c.add_toxic(node.node_id, "latency", {"latency": 400, "jitter": 0})
    slowed = round_trip()
    assert slowed >= 0.4 > base
    c.remove_toxic(node.node_id, name)
    c.proxy_down(node.node_id)

    def answered() -> bool:
        """Whether a request gets any answer. A disabled proxy refuses the connection; on
        the Docker backend the engine's port publisher on the host accepts it first and
        closes it at once, so the client sees the same thing as a refusal: no answer."""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
                s.sendall(bytes.fromhex("0000000a00120000000000010000"))
                return len(s.recv(4)) == 4
        except OSError:
            return False

    assert not answered()
    c.proxy_up(node.node_id)
    assert answered()
    assert round_trip() < 0.4


def test_a_late_endtxn_commits_the_next_transaction_of_a_tv0_client(any_cluster) -> None:  # type: ignore[no-untyped-def]
    """KAFKA-17754 at its smallest: the hold toxic withholds T1's EndTxn(commit), the client's
    retry commits T1, and the original, delivered after T2 began, commits T2 before its
    client ended it; aborting T2 then cannot take back what read_committed already sees.
    librdkafka speaks transaction version 0, which cannot tell T1's EndTxn from T2's."""
    from confluent_kafka import KafkaException, Producer

    c = any_cluster
    topic = _topic(c, 1)
    tid = f"late-{uuid.uuid4().hex[:8]}"
    producer = Producer({"log_level": 0, "bootstrap.servers": c.bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    node = c.txn_coordinator(tid)
    arm = c.hold_request(
        node,
        api_key=END_TXN_API_KEY,
        transactional_id=tid,
        end_txn="commit",
        release_on_api_keys=list(NEXT_TXN_API_KEYS),
        release_delay_ms=300,
        max_hold_ms=30000,
    )
    commit_one_then_begin_next(producer, topic)
    proxy = c.proxy_name(node)
    events: list = []

    def answered() -> bool:
        events[:] = c.toxiproxy.held_events(proxy, arm)
        return bool(events) and bool(events[0].get("answered_at_ms"))

    wait_for(answered, timeout=20, what="the late EndTxn answered")
    late = events[0]
    assert late["committed"] is True and late["trigger"] == "api_key 24"
    assert late["released_at_ms"] >= late["trigger_at_ms"] > late["held_at_ms"]
    assert late["error_code"] == 0  # the coordinator applied it to T2
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(10)
    assert read_committed(c.bootstrap, topic, 1, expect=2, timeout=20)[0] == ["t1", "t2"]
    assert c.release_held(node, arm)[0]["released_at_ms"] == late["released_at_ms"]
    c.heal_all()
    assert [t["name"] for t in c.toxiproxy.toxics(proxy)] == ["kafka_hold"]
