"""F5's reproduction, standalone: a rebalance while a member waits on pending transactional
offsets makes librdkafka start the partition at ``auto.offset.reset``.

Needs only confluent-kafka and a running Kafka (3.7 or newer; 4.0 or newer for
``--protocol consumer``):

    python f5_pending_offsets.py --bootstrap localhost:9092 [--protocol classic|consumer]
        [--tries N [--until-reproduced]] [--offset-reset earliest|error] [--debug]

Each try: a fresh two-partition input topic with ten records per partition; a transactional
producer commits offset 3 for both partitions in one transaction (KIP-447,
``send_offsets_to_transaction`` with the group's metadata), then sends offset 5 for partition
0 in a second transaction it leaves open. Members B and C join (read_committed). The one given
partition 0 must wait (its OffsetFetch with ``require_stable`` is answered
UNSTABLE_OFFSET_COMMIT); the one given partition 1 reads it from 3. That one leaves: the
rebalance gives the waiting member partition 1 as well. Expected: it keeps waiting on
partition 0 until the transaction ends, then starts at 5. librdkafka (2.16) reads partition 0
from 0 instead, below the committed 3, while the transaction is still open. With
``--offset-reset error`` the consumer reports the reset as an error instead of reading.
``--debug`` turns on librdkafka's ``debug=cgrp`` on both members (to stderr): the OffsetFetch
answered UNSTABLE_OFFSET_COMMIT, the assignment change, the partition started at INVALID.

Exit status: 1 when any try reproduced it, 0 when every try waited and started at 5,
2 on a setup error.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

#: Group-coordinator errors a member sees while the coordinator moves; it retries them.
TRANSIENT = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}


def poll_until(members: dict[str, Consumer], seconds: float, done: Any) -> dict[Any, Any]:
    """Poll every member; per (member, partition) the first offset it read (or the error it
    got), until ``done(seen)`` or the deadline."""
    seen: dict[Any, Any] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not done(seen):
        for name, consumer in members.items():
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                # A coordinator moving or loading is passing weather, not where a partition
                # started: only a lasting error (such as the offset reset) counts as a start.
                transient = err.retriable() or err.code() in TRANSIENT
                if err.code() != KafkaError._PARTITION_EOF and not transient:
                    seen.setdefault((name, msg.partition()), f"error: {err.str()}")
                continue
            seen.setdefault((name, msg.partition()), int(msg.offset()))
    return seen


def topic(admin: AdminClient, name: str, partitions: int) -> None:
    brokers = len(admin.list_topics(timeout=30).brokers)
    rf = min(3, brokers)
    conf = {"min.insync.replicas": str(min(2, rf))}
    admin.create_topics([NewTopic(name, partitions, rf, config=conf)])[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(name, timeout=10).topics.get(name)
        if t and t.error is None and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} has no leaders after 30 s")


def one_try(args: argparse.Namespace, n: int) -> bool:
    """One reproduction; True when the waiting member did not wait."""
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    tag = uuid.uuid4().hex[:6]
    src, out = f"f5-src-{tag}", f"f5-out-{tag}"
    topic(admin, src, 2)
    topic(admin, out, 1)
    plain = Producer({"bootstrap.servers": args.bootstrap})
    for i in range(10):
        for p in (0, 1):
            plain.produce(src, value=str(i).encode(), partition=p)
    if plain.flush(30):
        raise RuntimeError("the input records were not all acknowledged")
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": f"f5-{tag}",
        "group.protocol": args.protocol,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": args.offset_reset,
        "enable.partition.eof": True,
    }
    if args.protocol == "classic":
        conf["session.timeout.ms"] = 6000
    first = Consumer(conf)
    first.subscribe([src])
    poll_until({"a": first}, 30, lambda s: len(s) == 2)
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": f"f5-{tag}"})
    producer.init_transactions(30)
    for offsets, commit in (({0: 3, 1: 3}, True), ({0: 5}, False)):
        producer.begin_transaction()
        producer.produce(out, value=b"x", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(src, p, o) for p, o in offsets.items()],
            first.consumer_group_metadata(),
            30,
        )
        if commit:
            producer.commit_transaction(30)
    producer.flush(30)
    first.close()
    member_conf = conf | ({"debug": "cgrp"} if args.debug else {})
    members = {"b": Consumer(member_conf), "c": Consumer(member_conf)}
    for m in members.values():
        m.subscribe([src])
    seen = poll_until(members, 30, lambda s: any(p == 1 for _, p in s))
    holder = next((name for name, p in seen if p == 1), None)
    if holder is None:
        raise RuntimeError("no member read partition 1 within 30 s")
    waiter = "c" if holder == "b" else "b"
    members.pop(holder).close()
    seen.update(poll_until(members, 20, lambda s: (waiter, 0) in s))
    early = seen.get((waiter, 0))
    producer.commit_transaction(30)
    after = poll_until(members, 20, lambda s: (waiter, 0) in s).get((waiter, 0))
    members[waiter].close()
    if early is not None:
        print(
            f"try {n}: REPRODUCED: member {waiter} started partition 0 at {early} while "
            "offset 5 was pending (3 committed), after its assignment grew by partition 1"
        )
        return True
    print(f"try {n}: waited: member {waiter} started partition 0 at {after} once it committed")
    return False


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    p.add_argument("--tries", type=int, default=1)
    p.add_argument(
        "--until-reproduced",
        action="store_true",
        help="stop at the first try that reproduces it (the rebalance can miss the wait)",
    )
    p.add_argument("--offset-reset", choices=("earliest", "error"), default="earliest")
    p.add_argument("--debug", action="store_true", help="librdkafka debug=cgrp on the members")
    args = p.parse_args()
    try:
        hits = tried = 0
        for n in range(1, args.tries + 1):
            tried, hits = n, hits + one_try(args, n)
            if hits and args.until_reproduced:
                break
    except Exception as exc:  # setup failed: not a verdict either way
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"reproduced in {hits} of {tried} tries")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
