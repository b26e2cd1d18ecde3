"""The toy workload's options, declaration and driver (see the package's docstring)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from common.errors import HarnessError
from history import Recorder
from tests.toyworkload.control import ToyClients
from workloads.drive import Drive, Outcome, Workload
from workloads.spec import Option, WorkloadSpec

#: A value is ``process * 10_000_000 + n``, as the queue history's values are.
STRIDE = 10_000_000


@dataclass
class ToyOptions:
    seed: int = 0
    topic: str = "toy"
    keys: int = 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ToyOptions:
        return cls(**dict(raw))

    def validate(self) -> None:
        if self.keys < 1:
            raise HarnessError("--toy-keys must be at least 1")

    def name_parts(self) -> list[str]:
        return [f"k{self.keys}"]


def _send(rec: Recorder, producer: Producer, topic: str, key: int, value: int) -> bool:
    """One value in a transaction of its own, recorded as the queue history's ``send``."""
    rec.invoke("send", [["send", key, value]])
    got: list[int | None] = []
    try:
        producer.begin_transaction()
        producer.produce(
            topic,
            str(value).encode(),
            partition=key,
            on_delivery=lambda err, msg: got.append(None if err else msg.offset()),
        )
        producer.commit_transaction(10)
    except KafkaException as exc:
        rec.info("send", [["send", key, value]], {"message": str(exc)})
        return False
    rec.ok("send", [["send", key, [got[0] if got else None, value]]])
    return True


def _final_reads(rec: Recorder, bootstrap: str, topic: str, keys: int) -> bool:
    """Every partition read to its end from offset 0 by a fresh read_committed consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-final",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {
            k: consumer.get_watermark_offsets(TopicPartition(topic, k), 10)[1] for k in range(keys)
        }
        rec.invoke("assign", list(range(keys)))
        consumer.assign([TopicPartition(topic, k, 0) for k in range(keys)])
        rec.ok("assign", list(range(keys)))
        position = dict.fromkeys(range(keys), 0)
        deadline = time.monotonic() + 60
        while any(position[k] < ends[k] for k in range(keys)) and time.monotonic() < deadline:
            rec.invoke("poll", [["poll"]])
            polled: dict[int, list[list[int]]] = {}
            for msg in consumer.consume(200, 1.0):
                if msg.error() is None:
                    polled.setdefault(msg.partition(), []).append([msg.offset(), int(msg.value())])
                    position[msg.partition()] = msg.offset() + 1
            rec.ok("poll", [["poll", polled]])
            for k in range(keys):  # markers end a partition past its last record
                position[k] = max(
                    position[k], consumer.position([TopicPartition(topic, k)])[0].offset
                )
        return all(position[k] >= ends[k] for k in range(keys))
    finally:
        consumer.close()


def drive(d: Drive) -> Outcome:
    o: ToyOptions = d.options.workload_options
    d.cluster.ensure_topic(o.topic, o.keys)
    processes = d.run_dir / "processes"
    processes.mkdir(parents=True, exist_ok=True)
    clients = ToyClients(d.cluster.bootstrap, f"{o.topic}-group", o.topic, o.topic)
    producer = Producer(
        {"bootstrap.servers": d.cluster.bootstrap, "transactional.id": f"{o.topic}-0"}
    )
    producer.init_transactions(30)
    meta = {"workload": "queue", "role": "client"}
    with d.faults(None, clients), Recorder(processes / "0.jsonl", 0, meta) as rec:
        deadline = time.monotonic() + d.options.time_limit
        n = 0
        while time.monotonic() < deadline:
            if not _send(rec, producer, o.topic, n % o.keys, n):
                break  # an unknown outcome ends the sender, as a queue client's info does
            n += 1
    producer.flush(10)
    with Recorder(processes / "1.jsonl", 1, {"workload": "queue", "role": "final"}) as rec:
        finished = _final_reads(rec, d.cluster.internal_bootstrap, o.topic, o.keys)
    return Outcome(finished)


SPEC = WorkloadSpec(
    name="toy",
    description="one transactional sender, then final reads (a test of the workload registry)",
    options_type=ToyOptions,
    cli=(Option("--toy-keys", "keys", "partitions of the toy topic", int),),
    checker_suites=("queue",),
    isolate=lambda tag: {"topic": f"toy-{tag}"},
)

WORKLOAD = Workload(SPEC, drive)
