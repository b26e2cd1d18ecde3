"""Where a new group member starts while a transaction's offset commit is still pending.

KIP-447: a consumer that fetches committed offsets with ``require_stable`` while a
transaction holds pending offsets for its partition is answered UNSTABLE_OFFSET_COMMIT and
must wait for that transaction to end; it must never start below the last stable commit.
The second test is F5's smallest reproduction (docs/findings.md), classic against KIP-848.
"""

from __future__ import annotations

import time
import uuid

import pytest

pytestmark = pytest.mark.cluster


def _poll_until(consumers, seconds: float, want) -> dict:  # type: ignore[no-untyped-def]
    """Poll every consumer; the first offset each saw per partition, until ``want(seen)``."""
    seen: dict = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not want(seen):
        for name, consumer in consumers.items():
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.setdefault((name, msg.partition()), int(msg.offset()))
    return seen


def _pending_at_5(c, protocol: str, partitions: int):  # type: ignore[no-untyped-def]
    """A group whose every input partition has offset 3 committed and partition 0 offset 5
    pending in an open transaction (its first member gone): the consumer settings, the
    input topic and the producer whose transaction is still open."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    src, out = f"src-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    c.ensure_topic(src, partitions, 3, {"min.insync.replicas": "2"})
    c.ensure_topic(out, 1, 3, {"min.insync.replicas": "2"})
    plain = Producer({"bootstrap.servers": c.bootstrap, "log_level": 0})
    for i in range(10):
        for p in range(partitions):
            plain.produce(src, value=str(i).encode(), partition=p)
    assert plain.flush(30) == 0
    conf = {
        "bootstrap.servers": c.bootstrap,
        "group.id": f"g-{uuid.uuid4().hex[:8]}",
        "group.protocol": protocol.split("-")[0],
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "log_level": 0,
    }
    if protocol.startswith("classic"):
        conf["session.timeout.ms"] = 6000
    first = Consumer(conf)
    first.subscribe([src])
    got = _poll_until({"a": first}, 30, lambda s: len(s) == partitions)
    assert set(got.values()) == {0}
    producer = Producer(
        {"bootstrap.servers": c.bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(30)
    for offsets, commit in (({p: 3 for p in range(partitions)}, True), ({0: 5}, False)):
        producer.begin_transaction()
        producer.produce(out, value=b"x", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(src, p, o) for p, o in offsets.items()],
            first.consumer_group_metadata(),
            30,
        )
        if commit:
            producer.commit_transaction(30)
    assert producer.flush(30) == 0
    first.close()
    return conf, src, producer


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_new_member_waits_for_pending_transactional_offsets(healthy_cluster, protocol) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer

    conf, src, producer = _pending_at_5(healthy_cluster, protocol, 1)
    second = Consumer(conf)
    second.subscribe([src])
    before = _poll_until({"b": second}, 20, lambda s: bool(s))
    producer.commit_transaction(30)
    # A deadline, not a pause: a loaded CI machine once needed more than 20 s here.
    after = _poll_until({"b": second}, 60, lambda s: bool(s)) if not before else {}
    second.close()
    assert not before, f"started at {before} while offset 5 was pending (3 committed)"
    assert after == {("b", 0): 5}


#: docs/findings.md, F5: librdkafka 2.16.1 starts the waiting partition at
#: auto.offset.reset (offset 0, below the committed 3) when a rebalance lands while it
#: waits, with the classic eager protocol and with KIP-848's. Strict: a release that fixes
#: it turns this test red, so the finding is revisited. (With cooperative-sticky the race is
#: lost in about half of the tries, too unsteady for a test.)
F5 = pytest.mark.xfail(
    strict=True,
    reason="F5: librdkafka resets a partition whose committed offset is pending when a "
    "rebalance lands while it waits",
)


@pytest.mark.parametrize(
    "protocol", [pytest.param("classic-eager", marks=F5), pytest.param("consumer", marks=F5)]
)
def test_a_member_waiting_on_pending_offsets_keeps_waiting_when_its_assignment_grows(
    healthy_cluster, protocol
) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer

    conf, src, producer = _pending_at_5(healthy_cluster, protocol, 2)
    members = {"b": Consumer(conf), "c": Consumer(conf)}
    for m in members.values():
        m.subscribe([src])
    # Partition 1 (stable at 3) is read by whoever holds it; partition 0 waits.
    seen = _poll_until(members, 30, lambda s: any(p == 1 for _, p in s))
    holder_of_1 = next(name for name, p in seen if p == 1)
    waiter = "c" if holder_of_1 == "b" else "b"
    members.pop(holder_of_1).close()  # the waiter's assignment grows by partition 1
    seen.update(_poll_until(members, 20, lambda s: (waiter, 0) in s))
    producer.commit_transaction(30)
    after = _poll_until(members, 20, lambda s: (waiter, 0) in s)
    members[waiter].close()
    assert (waiter, 0) not in seen, f"partition 0 started at {seen.get((waiter, 0))} while pending"
    assert after.get((waiter, 0)) == 5
