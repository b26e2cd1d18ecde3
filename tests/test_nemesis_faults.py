"""Every fault kind on a real cluster: its effect observed while active, gone after stop."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from common.waits import wait_for
from history import Recorder, read_process_file
from nemeses.engine import Nemesis
from nemeses.kinds import KINDS
from nemeses.schedule import Event, Schedule
from nemeses.targets import FaultContext, resolve_broker
from tests.fake_clients import NoClients
from tests.kafka_io import commit_one_then_begin_next

pytestmark = pytest.mark.cluster


@dataclass
class Clients(NoClients):
    """A stand-in for a workload supervisor: real OS processes and a real producer's id."""

    bootstrap: str
    group_id: str = "g-nemesis"
    input_topic: str = "in"
    output_topic: str = "out"
    session_timeout_s: float = 6.0
    transaction_timeout_s: float = 10.0
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    tids: dict[int, str] = field(default_factory=dict)

    def processor_pids(self) -> dict[int, int]:
        return {i: p.pid for i, p in self.procs.items() if p.poll() is None}

    def transactional_ids(self) -> dict[int, str]:
        return dict(self.tids)


@pytest.fixture
def ctx(healthy_cluster):  # type: ignore[no-untyped-def]
    c = healthy_cluster
    clients = Clients(c.bootstrap, input_topic=f"in-{uuid.uuid4().hex[:6]}")
    clients.output_topic = clients.input_topic.replace("in-", "out-")
    for t in (clients.input_topic, clients.output_topic):
        c.ensure_topic(t, 3, 3)
    for i in (1, 2):
        clients.procs[i] = subprocess.Popen(["sleep", "600"], env=c.env)
    yield FaultContext(c, clients)
    for p in clients.procs.values():
        p.kill()
        p.wait()


def _api_versions_rtt(port: int, timeout: float = 10.0) -> float:
    req = bytes.fromhex("0000000a00120000000000010000")
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(req)
        if len(s.recv(4)) != 4:
            raise OSError("short response")
    return time.monotonic() - t0


def _proxy_port(c, node_id: int) -> int:  # type: ignore[no-untyped-def]
    return int(c.toxiproxy.proxies()[c.proxy_name(node_id)]["listen"].rsplit(":", 1)[1])


def _run(ctx: FaultContext, kind: str, **params):  # type: ignore[no-untyped-def]
    return KINDS[kind].start(ctx, params)


def _stop(ctx: FaultContext, kind: str, details) -> None:  # type: ignore[no-untyped-def]
    KINDS[kind].stop(ctx, details)


def test_roles_resolve_to_the_brokers_answers(ctx: FaultContext) -> None:
    c = ctx.cluster
    node, why = resolve_broker(ctx, {"role": "group-coordinator"})
    assert node == c.group_coordinator("g-nemesis") and "group coordinator" in why
    node, why = resolve_broker(ctx, {"role": "controller"})
    assert node == c.active_controller()
    node, why = resolve_broker(ctx, {"role": "leader", "pick": 3})
    assert node == c.leader(ctx.clients.output_topic, 1)


def test_partition(ctx: FaultContext) -> None:
    c = ctx.cluster
    if not c.uses_netns:
        pytest.skip("needs namespaces")
    d = _run(ctx, "partition", shape="isolate", role="random", pick=0, seed=1)
    (a, b) = d["pairs"][0]
    assert not c.can_reach(a, b) and c.net.rules(a)
    _stop(ctx, "partition", d)
    assert c.can_reach(a, b) and not c.net.rules(a)


def test_a_closed_listener_stops_the_peers_but_not_the_brokers_own_connections(
    ctx: FaultContext,
) -> None:
    """What ``controller-cut`` shuts the cut broker's followers out with: its peers cannot
    reach its inter-broker listener, while it still reaches theirs (it goes on fetching as
    a follower) and its other listeners stay open."""
    from harness.substrate.process.node import CLIENT_PORT, INTERNAL_PORT

    c = ctx.cluster
    if not c.uses_netns:
        pytest.skip("needs namespaces")
    a, b = sorted(c.node_ids())[:2]
    ip_a, ip_b = c.node(a).net.ip, c.node(b).net.ip
    try:
        c.net.close_listener(a, INTERNAL_PORT)
        assert not c.net.can_connect(b, ip_a, INTERNAL_PORT)
        assert c.net.can_connect(a, ip_b, INTERNAL_PORT)
        assert c.net.can_connect(b, ip_a, CLIENT_PORT)
    finally:
        c.heal()
    assert c.net.can_connect(b, ip_a, INTERNAL_PORT) and not c.net.rules(a)


def test_client_cut_down_and_timeout(ctx: FaultContext) -> None:
    c = ctx.cluster
    d = _run(ctx, "client-cut", mode="down", role="random", pick=0)
    port = _proxy_port(c, d["targets"][0])
    with pytest.raises(OSError):
        _api_versions_rtt(port, timeout=2)
    _stop(ctx, "client-cut", d)
    assert _api_versions_rtt(port) < 1
    d = _run(ctx, "client-cut", mode="timeout", role="random", pick=1)
    port = _proxy_port(c, d["targets"][0])
    with pytest.raises(OSError):
        _api_versions_rtt(port, timeout=2)  # the request is swallowed: no answer
    _stop(ctx, "client-cut", d)
    assert _api_versions_rtt(port) < 1


def test_slow_and_late_request(ctx: FaultContext) -> None:
    c = ctx.cluster
    d = _run(
        ctx,
        "slow",
        mode="latency",
        attributes={"latency": 600, "jitter": 0},
        stream="downstream",
        role="random",
        pick=2,
    )
    port = _proxy_port(c, d["targets"][0])
    assert _api_versions_rtt(port) >= 0.6
    _stop(ctx, "slow", d)
    assert _api_versions_rtt(port) < 0.6
    d = _run(ctx, "late-request", role="random", pick=0, delay_ms=1500)
    port = _proxy_port(c, d["targets"][0])
    assert _api_versions_rtt(port) >= 1.5
    _stop(ctx, "late-request", d)
    assert [t["name"] for t in c.toxiproxy.toxics(c.proxy_name(d["targets"][0]))] == ["kafka_hold"]


def _processor_producer(ctx: FaultContext, prefix: str) -> tuple[Clients, str, Any]:
    """A transactional producer, initialised, that the stand-in supervisor lists as
    processor 1 (so processor-aimed faults find its transactional id)."""
    from confluent_kafka import Producer

    clients = ctx.clients
    assert isinstance(clients, Clients)
    tid = f"{prefix}-{uuid.uuid4().hex[:8]}"
    clients.tids = {1: tid}
    producer = Producer(
        {"log_level": 0, "bootstrap.servers": ctx.cluster.bootstrap, "transactional.id": tid}
    )
    producer.init_transactions(30)
    return clients, tid, producer


def test_late_endtxn_delivers_the_held_commit_after_the_next_transaction_began(
    ctx: FaultContext,
) -> None:
    """The fault aims at the processor's coordinator and says, from the proxy, when the
    EndTxn was held, what released it and what the broker answered the late copy."""
    from confluent_kafka import KafkaException

    c = ctx.cluster
    clients, tid, producer = _processor_producer(ctx, "late")
    d = _run(ctx, "late-endtxn", pick=0, end_txn="commit", release_delay_ms=200)
    assert d["targets"] == [c.txn_coordinator(tid)] and d["transactional_id"] == tid
    commit_one_then_begin_next(producer, clients.output_topic)
    healed = KINDS["late-endtxn"].stop(ctx, d)
    assert healed["late_delivered"] == 1
    (held,) = healed["held"]
    assert held["committed"] is True and held["trigger"] == "api_key 24"
    assert held["error_code"] == 0  # TV0: the coordinator took it for T2's
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(10)


def test_late_produce_delivers_the_held_batch_after_its_transaction_aborted(
    ctx: FaultContext, tmp_path: Path
) -> None:
    """The fault aims at an output partition's leader, holds the producer's first batch (the
    client's retry goes through), and delivers the original after the abort's EndTxn: the
    stop's record says which batch (producer, epoch, partition, sequence) and what the leader
    said, and the log dump shows the abort marker before it and the batch not appended
    (partition verification and the producer's sequence both refuse it)."""
    from harness.substrate.evidence import read_logdump

    c = ctx.cluster
    clients, tid, producer = _processor_producer(ctx, "latep")
    d = _run(ctx, "late-produce", pick=0, release_delay_ms=500)
    leader = c.leader(clients.output_topic, 0)
    assert d["targets"] == c.node_ids() and d["transactional_id"] == tid
    producer.begin_transaction()
    producer.produce(clients.output_topic, value=b"aborted", partition=0)
    assert producer.flush(30) == 0
    producer.abort_transaction(30)
    proxy = c.proxy_name(leader)
    arm = d["arms"][str(leader)]
    wait_for(
        lambda: all(e.get("answered_at_ms") for e in c.toxiproxy.held_events(proxy, arm)),
        timeout=20,
        what="the late Produce answered",
    )
    healed = KINDS["late-produce"].stop(ctx, d)
    assert healed["late_delivered"] == 1
    (held,) = healed["held"]
    assert held["node"] == leader and held["trigger"] == "api_key 26"
    assert held["released_at_ms"] >= held["trigger_at_ms"]
    assert (held["topic"], held["partition"]) == (clients.output_topic, 0)
    assert (held["base_sequence"], held["producer_epoch"]) == (0, 0)
    dump = read_logdump(c._write_logdump(tmp_path))
    rows = [
        r
        for r in dump
        if (r["topic"], r["partition"], r["node"]) == (clients.output_topic, 0, leader)
    ]
    assert [(r["producerId"], r["sequence"], r.get("marker")) for r in rows] == [
        (held["producer_id"], 0, None),  # the client's retry
        (held["producer_id"], -1, "ABORT"),
    ]
    assert rows[1]["create_time"] < held["released_at_ms"]  # late: after the abort
    assert held["error_code"] != 0  # and refused, not appended


def test_broker_pause_and_kill(ctx: FaultContext) -> None:
    c = ctx.cluster
    d = _run(ctx, "pause", role="random", pick=1)
    target = d["targets"][0]
    assert c.node_state(target) == "T"
    _stop(ctx, "pause", d)
    assert c.node_state(target) != "T"
    d = _run(ctx, "kill", role="random", pick=2, clean=False)
    target = d["targets"][0]
    assert not c.node_alive(target)
    _stop(ctx, "kill", d)
    assert c.node_alive(target) and target in c.registered_brokers()


def test_rolling_restart_replaces_every_broker(ctx: FaultContext) -> None:
    c = ctx.cluster
    before = {n.node_id: n.pid for n in c.nodes}
    d = _run(ctx, "restart", clean=False, seed=4)
    assert sorted(d["targets"]) == sorted(before)
    assert all(n.pid != before[n.node_id] for n in c.nodes)
    assert c.registered_brokers() == set(before)


def test_processor_pause_zombie_and_kill(ctx: FaultContext) -> None:
    clients = ctx.clients
    assert clients is not None
    for kind in ("pause-processor", "zombie"):
        d = _run(ctx, kind, pick=0)
        pid = d["pid"]
        assert Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] == "T"
        _stop(ctx, kind, d)
        assert Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "T"
    d = _run(ctx, "kill-processor", pick=1)
    assert d["targets"][0] not in clients.processor_pids()


def test_add_partitions_grows_the_input_topic_led_and_replicated(ctx: FaultContext) -> None:
    c, topic = ctx.cluster, ctx.clients.input_topic
    d = _run(ctx, "add-partitions", add=2)
    assert d["topic"] == topic and d["partitions"] == [3, 5]
    assert c.partition_count(topic) == 5
    assert all(c.leader(topic, p) is not None for p in range(5))
    assert KINDS["add-partitions"].instant and KINDS["add-partitions"].bug_probe


def test_hijack_fences_the_live_producer(ctx: FaultContext) -> None:
    from confluent_kafka import KafkaException, Producer

    clients = ctx.clients
    assert clients is not None
    tid = f"victim-{uuid.uuid4().hex[:6]}"
    victim = Producer(
        {"bootstrap.servers": clients.bootstrap, "transactional.id": tid, "log_level": 0}
    )
    victim.init_transactions(30)
    clients.tids = {1: tid}
    d = _run(ctx, "hijack", pick=0)
    assert d["transactional_id"] == tid
    with pytest.raises(KafkaException) as err:
        victim.begin_transaction()
        victim.produce(clients.output_topic, b"zombie", partition=0)
        victim.commit_transaction(30)
    assert err.value.args[0].fatal() or "fenced" in str(err.value).lower()


def test_engine_records_faults_and_heals_when_stopped_early(
    ctx: FaultContext, tmp_path: Path
) -> None:
    c = ctx.cluster
    sched = Schedule(
        0,
        ["pause", "zombie"],
        60,
        1,
        30,
        [
            Event(0.0, "pause-processor", {"pick": 0}, 0.5),
            Event(1.0, "pause", {"role": "random", "pick": 0}, 60.0),
        ],
    )
    path = tmp_path / "nemesis.jsonl"
    with Recorder(path, "nemesis") as rec:
        nem = Nemesis(ctx, sched, rec)
        nem.start()
        deadline = time.monotonic() + 30
        while not any(n.state() == "T" for n in c.nodes) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(n.state() == "T" for n in c.nodes), "the broker pause never started"
        nem.stop()  # long before the pause was due to end
    assert all(n.state() != "T" for n in c.nodes)
    assert all(
        Path(f"/proc/{p}/stat").read_text().rsplit(") ", 1)[1][0] != "T"
        for p in ctx.clients.processor_pids().values()
    )
    _, ops, _ = read_process_file(path)
    seen = [(o["type"], o["f"], o["value"]["kind"]) for o in ops]
    assert ("ok", "start", "pause-processor") in seen
    assert ("ok", "stop", "pause-processor") in seen
    assert ("ok", "start", "pause") in seen and ("ok", "stop", "pause") in seen
    assert [e["kind"] for e in nem.executed] == ["pause-processor", "pause"]
    assert nem.executed[1]["targets"] and nem.executed[1]["why"] == "random node"
