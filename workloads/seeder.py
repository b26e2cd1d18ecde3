"""The seeder: a pipeline's only source of input, and the ground truth checkers compare to.

Both pipelines (the eos processors and the streams application) are fed by it
(``workloads.pipeline``).

Every committed input value is unique (``v000123``), written once by an idempotent producer
with ``acks=all`` to a topic with min.insync.replicas 2, so "what should come out" is exactly
the set of values the seeder saw acknowledged. Sends are spread over the test's time limit so
processing (and the faults aimed at it) happens throughout, not in one burst at the start.

Every ``poison_every``-th batch is different: a few *poison* values (``x000007``) written in a
transaction that the seeder then aborts. They are in the log but never committed, so a
read_committed processor must never see them; a processor reading uncommitted data turns them
into output, which is how the ``read-uncommitted`` variant becomes visible to a checker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from common.kafkaconf import secured
from history import Recorder
from history.eos_records import poison_value, seed_value
from workloads.clientinfo import error_info

if TYPE_CHECKING:
    from workloads.base import ClusterAccess

log = logging.getLogger("workloads.seeder")

#: How long an unacknowledged send may stay in flight (rides out elections and partitions).
DELIVERY_TIMEOUT_MS = 120_000
#: How often the seeder asks how many partitions its topic has (a fault may add some).
FOLLOW_S = 2.0


@dataclass
class SeedResult:
    """What the seeder knows for certain: acknowledged values and where they landed."""

    sent: int = 0
    uncertain: int = 0
    poison: int = 0
    seconds: float = 0.0
    #: Per input partition, the offset after the last acknowledged value: the drain target.
    ends: dict[int, int] = field(default_factory=dict)


class Seeder:
    """Writes ``values`` unique values to ``topic`` and records every send as history ops."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        history_path: Path,
        *,
        values: int,
        batch: int = 50,
        seconds: float = 0.0,
        poison_every: int = 0,
        poison_batch: int = 5,
        poison_txn_id: str = "eos-seeder-poison",
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.values = values
        self.batch = batch
        self.seconds = seconds
        self.poison_every = poison_every
        self.poison_batch = poison_batch
        self.poison_txn_id = poison_txn_id
        self.rec = Recorder(
            history_path, "seeder", meta={"workload": "eos", "role": "seeder", **(meta or {})}
        )
        self.result = SeedResult()
        self._done = threading.Event()

    def run(self, stop: threading.Event | None = None) -> SeedResult:
        """Send everything, paced over ``seconds``; returns early (recorded) if ``stop`` is set."""
        from confluent_kafka import Producer

        stop = stop or threading.Event()
        common = secured({"bootstrap.servers": self.bootstrap, "log_level": 3, "linger.ms": 5})
        producer = Producer(
            {
                **common,
                "enable.idempotence": True,
                "acks": "all",
                "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
            }
        )
        follower = threading.Thread(
            target=self._follow, args=(producer, stop), name="seeder-partitions", daemon=True
        )
        follower.start()
        poison = None
        if self.poison_every:
            poison = Producer({**common, "transactional.id": self.poison_txn_id})
            poison.init_transactions(60)
        batches = [
            list(range(i, min(i + self.batch, self.values)))
            for i in range(0, self.values, self.batch)
        ]
        interval = self.seconds / len(batches)
        t0 = time.monotonic()
        poison_next = 0
        try:
            for n, indexes in enumerate(batches):
                if stop.is_set():
                    break
                if poison is not None and n % self.poison_every == self.poison_every - 1:
                    count = self.poison_batch
                    self._send_poison(poison, range(poison_next, poison_next + count))
                    poison_next += count
                self._send(producer, indexes)
                # Pacing (a rate, not synchronisation): the next batch is due at t0 + k*interval.
                stop.wait(max(0.0, t0 + (n + 1) * interval - time.monotonic()))
        finally:
            self._done.set()
            follower.join(timeout=10)
            producer.flush(5)
            if poison is not None:
                poison.flush(5)
            self.rec.close()
        self.result.seconds = time.monotonic() - t0
        return self.result

    def _follow(self, producer: Any, stop: threading.Event) -> None:
        """Keep :attr:`partitions` at the topic's partition count, so partitions added under
        load (the ``add-partitions`` fault) get values too; a metadata request that fails
        (a fault) leaves the count as it was. Only ever grows: Kafka cannot remove one."""
        while not (stop.is_set() or self._done.wait(FOLLOW_S)):
            try:
                meta = producer.list_topics(self.topic, timeout=FOLLOW_S)
            except Exception:  # brokers unreachable for now: asked again next time
                continue
            topic = meta.topics.get(self.topic)
            if topic is not None and topic.error is None:
                self.partitions = max(self.partitions, len(topic.partitions))

    def _send(self, producer: Any, indexes: list[int]) -> None:
        entries: list[list[Any]] = [[seed_value(i), i % self.partitions, None] for i in indexes]
        errors: list[str] = []
        self.rec.invoke("send", {"values": [[v, p] for v, p, _ in entries]})

        def cb_for(entry: list[Any]) -> Any:
            def cb(err: Any, msg: Any) -> None:
                if err is None:
                    entry[2] = msg.offset()
                else:
                    errors.append(str(err))

            return cb

        for entry in entries:
            value, partition, _ = entry
            producer.produce(
                self.topic,
                key=value.encode(),
                value=value.encode(),
                partition=partition,
                on_delivery=cb_for(entry),
            )
        left = producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 10)
        acked = [e for e in entries if e[2] is not None]
        for _value, partition, offset in acked:
            self.result.ends[partition] = max(self.result.ends.get(partition, 0), offset + 1)
        self.result.sent += len(acked)
        if len(acked) == len(entries):
            self.rec.ok("send", {"values": entries})
            return
        # Not acknowledged: the idempotent producer may still have written them.
        self.result.uncertain += len(entries) - len(acked)
        error = {
            "code": "UNACKNOWLEDGED",
            "message": errors[0] if errors else f"{left} sends still in flight after flush",
            "count": len(entries) - len(acked),
        }
        self.rec.info("send", {"values": entries}, error)

    def _send_poison(self, producer: Any, indexes: range) -> None:
        """A transaction whose values must never be seen by a read_committed reader: aborted."""
        from confluent_kafka import KafkaException

        entries: list[list[Any]] = [[poison_value(i), i % self.partitions, None] for i in indexes]
        self.rec.invoke("send-aborted", {"values": [[v, p] for v, p, _ in entries]})

        def cb_for(entry: list[Any]) -> Any:
            def cb(err: Any, msg: Any) -> None:
                if err is None:
                    entry[2] = msg.offset()

            return cb

        error: dict[str, Any] = {
            "code": "DELIBERATE_ABORT",
            "message": "poison values, aborted on purpose",
        }
        try:
            producer.begin_transaction()
            for entry in entries:
                producer.produce(
                    self.topic,
                    key=entry[0].encode(),
                    value=entry[0].encode(),
                    partition=entry[1],
                    on_delivery=cb_for(entry),
                )
            producer.flush(30)
            producer.abort_transaction(60)
        except KafkaException as exc:
            # Never committed either way: an unfinished transaction is aborted by its timeout.
            error = {**error, "abort_error": error_info(exc, "abort")}
        self.result.poison += len(entries)
        self.rec.fail("send-aborted", {"values": entries}, error)


def seeded_values(op: Mapping[str, Any]) -> int | None:
    """How many values a seeder ``send`` op carries (None for any other op): what the
    report's backlog counts as fed, for each workload the seeder feeds."""
    value = op.get("value")
    if op["process"] != "seeder" or op["f"] != "send" or not isinstance(value, dict):
        return None
    return len(value.get("values") or [])


def result_from_history(path: Path, seconds: float) -> SeedResult:
    """What the seeder achieved, read back from its own history (the source of truth).

    Works even if the seeder process died mid-way: every acknowledged value is on disk.
    """
    from history import read_process_file

    result = SeedResult(seconds=seconds)
    try:
        _header, ops, _warnings = read_process_file(path)
    except FileNotFoundError:
        return result
    for op in ops:
        value = op.get("value") or {}
        if op["f"] == "send" and op["type"] in ("ok", "info"):
            for _v, p, offset in value.get("values", []):
                if offset is None:
                    result.uncertain += 1
                else:
                    result.sent += 1
                    result.ends[p] = max(result.ends.get(p, 0), offset + 1)
        elif op["f"] == "send-aborted" and op["type"] != "invoke":
            result.poison += len(value.get("values", []))
    return result


class SeederOptions(Protocol):
    """What a workload's options say of its input: the topic and its partitions, how many
    values in batches of how many, how often a poison batch of how many, and the prefix of
    the poison producer's transactional id."""

    input_topic: str
    partitions: int
    values: int
    seed_batch: int
    poison_every: int
    poison_batch: int

    @property
    def txn_id_prefix(self) -> str: ...


def seed_in_child(
    cluster: ClusterAccess,
    processes_dir: Path,
    logs_dir: Path,
    o: SeederOptions,
    seconds: float,
    stop: threading.Event | None = None,
) -> SeedResult:
    """Run the seeder as its own OS process (``processes_dir/seeder.jsonl``, its log
    ``logs_dir/seeder.log``), its sends spread over ``seconds``; wait for it (SIGTERM when
    ``stop`` is set) and return what its history says it achieved."""
    import json

    from workloads.processes import child_env, spawn_module

    history = processes_dir / "seeder.jsonl"
    full = {
        "bootstrap": cluster.bootstrap,
        "topic": o.input_topic,
        "partitions": o.partitions,
        "history_path": str(history),
        "values": o.values,
        "batch": o.seed_batch,
        "seconds": seconds,
        "poison_every": o.poison_every,
        "poison_batch": o.poison_batch,
        "poison_txn_id": f"{o.txn_id_prefix}-seeder-poison",
        "meta": {"topic": o.input_topic, "partitions": o.partitions},
    }
    env = child_env(cluster.env)
    stop = stop or threading.Event()
    t0 = time.monotonic()
    with open(logs_dir / "seeder.log", "ab") as logf:
        proc = spawn_module("workloads.seeder", ["--config", json.dumps(full)], env, logf)
        try:
            while proc.poll() is None:
                if stop.wait(0.2):
                    proc.terminate()
                    proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if proc.returncode != 0:
        log.warning("seeder exited with %s; see %s", proc.returncode, logs_dir)
    return result_from_history(history, time.monotonic() - t0)


def main() -> None:
    """``python -m workloads.seeder --config JSON``: the seeder as its own OS process.

    A native client crash in the seeder then ends one client process (recorded by what is
    already in its history), not the harness. SIGTERM stops it after the current batch.
    """
    import argparse
    import json
    import signal

    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    cfg = json.loads(parser.parse_args().config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    seeder = Seeder(
        cfg.pop("bootstrap"),
        cfg.pop("topic"),
        cfg.pop("partitions"),
        Path(cfg.pop("history_path")),
        **cfg,
    )
    seeder.run(stop)


if __name__ == "__main__":
    main()
