"""Final-state observations of a run, recorded under process ``"final"`` (the eos, connect and
streams workloads share them).

After the processors stop, what Kafka durably holds is the verdict's raw material: every
output record as a read_committed reader and as a read_uncommitted reader sees it, the
group's committed input offsets, each partition's last stable offset against its high
watermark (a gap means a transaction is still open) and the brokers' own list of hanging
transactions. Observations go through the brokers' internal listeners so that a toxic left
behind on the client path cannot distort them.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from common.errors import HarnessError
from common.kafkaconf import secured
from history import Recorder
from history.eos_records import decode_headers

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster

QUIET = {"log_level": 0}


def _consumer(bootstrap: str, isolation: str, eof: bool = False) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        secured(
            {
                **QUIET,
                "bootstrap.servers": bootstrap,
                "group.id": "eos-final-observer",  # never joins or commits: assign() only
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "enable.partition.eof": eof,
                "fetch.wait.max.ms": 100,
            }
        )
    )


def read_partition(
    consumer: Any, topic: str, partition: int, timeout: float
) -> tuple[list[list[Any]], bool]:
    """Every record from the start to the partition's end for this consumer's isolation level
    (the LSO for read_committed, the high watermark otherwise); ``True`` if the end was seen."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    records: list[list[Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return records, True
                continue
            key = msg.key()
            records.append(
                [
                    msg.offset(),
                    None if key is None else key.decode("utf-8", "replace"),
                    None if msg.value() is None else msg.value().decode("utf-8", "replace"),
                    decode_headers(msg.headers()),
                ]
            )
        return records, False
    finally:
        consumer.unassign()


def _read_one(
    bootstrap: str, topic: str, partition: int, isolation: str, timeout: float
) -> list[Any]:
    """[records, complete] of one partition (runs in a child process).

    The topic's metadata is asked for first: a consumer that learns its partition's leader
    only after ``assign`` delivers its first record half a second later (measured: a read of
    834 records 0.61 s without the request, 0.11 s after it; a run's final reads are twelve
    of these). A failed request changes nothing but that delay."""
    from confluent_kafka import KafkaException

    consumer = _consumer(bootstrap, isolation, eof=True)
    try:
        with contextlib.suppress(KafkaException):
            consumer.list_topics(topic, timeout=10)
        return list(read_partition(consumer, topic, partition, timeout))
    finally:
        consumer.close()


def _watermarks(bootstrap: str, topic: str, partitions: int) -> list[dict[str, int]]:
    from confluent_kafka import TopicPartition

    committed = _consumer(bootstrap, "read_committed")
    uncommitted = _consumer(bootstrap, "read_uncommitted")
    try:
        rows = []
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            low, lso = committed.get_watermark_offsets(tp, timeout=10, cached=False)
            _, hwm = uncommitted.get_watermark_offsets(tp, timeout=10, cached=False)
            rows.append({"partition": p, "low": low, "lso": lso, "hwm": hwm})
        return rows
    finally:
        committed.close()
        uncommitted.close()


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        secured({"bootstrap.servers": bootstrap, "log_level": 0, "socket.timeout.ms": 5000})
    )


def _group_offsets(bootstrap: str, group: str) -> list[list[Any]]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = _admin(bootstrap)  # held until the result is in: a collected client never answers
    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=15
    )
    got = futures[group].result(timeout=20)
    return sorted([tp.topic, tp.partition, tp.offset] for tp in got.topic_partitions)


def _group_state(bootstrap: str, group: str) -> dict[str, Any]:
    admin = _admin(bootstrap)  # held until the result is in: a collected client never answers
    desc = admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=10)
    return {"state": desc.state.name, "members": len(desc.members)}


#: Observations made by short-lived children (``python -m workloads.finalreads CALL ARGS``).
#: Group queries are among them: librdkafka's admin client has aborted the harness process
#: (``rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0' failed``) on the
#: call after a timed-out one, and segfaulted in its group code; a child takes the crash.
_CHILD_CALLS = {
    "read_one": _read_one,
    "watermarks": _watermarks,
    "group_offsets": _group_offsets,
    "group_state": _group_state,
}


class ReaderCrashed(RuntimeError):
    """The reader process died (a native client crash) or failed."""


def _in_child(call: str, *args: Any, timeout: float = 600.0) -> Any:
    """Run a consumer-side observation in a child process and return its JSON result.

    librdkafka has crashed (SIGSEGV in its consumer-group code) inside long-lived harness
    processes; a crash in a short-lived reader costs one retry, not the whole run.
    """
    import json
    import subprocess
    import sys

    last = ""
    for _attempt in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "workloads.finalreads", call, json.dumps(args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode == 0:
            return json.loads(proc.stdout)
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    raise ReaderCrashed(f"{call} failed twice: {last}")


def read_in_child(
    bootstrap: str, topic: str, partition: int, isolation: str, timeout: float
) -> tuple[list[list[Any]], bool]:
    """Every record of one partition to its end for ``isolation`` (a tombstone's value is
    None), read by a child; ``True`` if the end was seen."""
    records, complete = _in_child("read_one", bootstrap, topic, partition, isolation, timeout)
    return records, bool(complete)


def record_reads(
    rec: Recorder, bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
) -> None:
    """One ``read`` op per (isolation level, partition) of ``topic``, each read by a child."""
    for isolation in ("read_committed", "read_uncommitted"):
        for p in range(partitions):
            ask = {"topic": topic, "partition": p, "isolation": isolation}
            rec.invoke("read", ask)
            try:
                records, complete = _in_child("read_one", bootstrap, topic, p, isolation, timeout)
            except ReaderCrashed as exc:
                rec.info(
                    "read", {**ask, "records": []}, {"code": "READER_FAILED", "message": str(exc)}
                )
                continue
            value = {**ask, "records": records}
            if complete:
                rec.ok("read", value)
            else:
                rec.info("read", value, {"code": "TIMED_OUT", "message": "end not reached"})


def record_group_offsets(rec: Recorder, cluster: Cluster, group: str) -> None:
    rec.invoke("group-offsets", {"group": group})
    try:
        offsets = _in_child("group_offsets", cluster.internal_bootstrap, group, timeout=60)
    except ReaderCrashed as exc:
        # No answer: the offsets are unknown, not absent (checkers then use the drain's last
        # observation).
        rec.info("group-offsets", {"group": group}, {"code": "QUERY_FAILED", "message": str(exc)})
        return
    rec.ok("group-offsets", {"group": group, "offsets": offsets})


def group_offsets(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets (no history): what the drain waits on.
    Raises :class:`ReaderCrashed` when the query fails."""
    rows = _in_child("group_offsets", cluster.internal_bootstrap, group, timeout=60)
    return {(t, p): off for t, p, off in rows}


def group_state(cluster: Cluster, group: str) -> tuple[str, int]:
    """The group's state name and member count. Raises :class:`ReaderCrashed` on failure."""
    got = _in_child("group_state", cluster.internal_bootstrap, group, timeout=60)
    return got["state"], got["members"]


#: How often the coordinator aborts timed-out transactions (Kafka's default
#: ``transaction.abort.timed.out.transaction.cleanup.interval.ms``), plus slack.
ABORT_SWEEP_S = 15.0


def record_settle(
    rec: Recorder,
    bootstrap: str,
    topic: str,
    partitions: int,
    transaction_timeout_ms: int,
    poll_s: float = 1.0,
) -> bool:
    """Wait (bounded) until no transaction is open on ``topic`` (LSO == HWM everywhere).

    A processor killed inside a transaction leaves it open until the coordinator aborts it
    (transaction timeout, then the next abort sweep). Its outputs hold the partition's LSO,
    so a read_committed read made meanwhile stops there and misses every later committed
    output: a complete-looking drain that is not. The group's offsets cannot say so (a
    replacement commits past those inputs at once), so the final reads wait here. A
    transaction still open at the deadline is left for the hanging checks to name.
    """
    deadline = time.monotonic() + transaction_timeout_ms / 1000 + ABORT_SWEEP_S
    rec.invoke("settle", {"topic": topic})
    t0 = time.monotonic()
    open_parts: list[int] = []
    while True:
        try:
            rows = _in_child("watermarks", bootstrap, topic, partitions)
            open_parts = [r["partition"] for r in rows if r["lso"] < r["hwm"]]
        except ReaderCrashed:
            open_parts = list(range(partitions))  # unknown: keep waiting until the deadline
        if not open_parts or time.monotonic() >= deadline:
            break
        time.sleep(poll_s)  # polling the brokers' watermarks, a condition, not a guess
    value = {"topic": topic, "open": open_parts, "seconds": round(time.monotonic() - t0, 3)}
    if open_parts:
        rec.info("settle", value, {"code": "TIMED_OUT", "message": "transactions still open"})
        return False
    rec.ok("settle", value)
    return True


def record_watermarks(
    rec: Recorder, bootstrap: str, topic: str, partitions: int
) -> list[dict[str, int]] | None:
    """Per partition: low watermark, last stable offset (read_committed end), high watermark
    (also returned; None when the query failed)."""
    rec.invoke("watermarks", {"topic": topic})
    try:
        rows: list[dict[str, int]] = _in_child("watermarks", bootstrap, topic, partitions)
    except ReaderCrashed as exc:
        rec.fail("watermarks", {"topic": topic}, {"code": "READER_FAILED", "message": str(exc)})
        return None
    rec.ok("watermarks", {"topic": topic, "partitions": rows})
    return rows


def parse_table(text: str) -> list[dict[str, str]]:
    """Rows of a Kafka tool's tab-separated table (header line first, cells space-padded)."""
    lines = [ln for ln in text.splitlines() if "\t" in ln]
    if not lines:
        return []

    def cells(line: str) -> list[str]:
        out = [c.strip() for c in line.split("\t")]
        while out and out[-1] == "":
            out.pop()
        return out

    header = cells(lines[0])
    return [dict(zip(header, cells(ln), strict=False)) for ln in lines[1:]]


def max_timeout_minutes(transaction_timeout_ms: int | None) -> int:
    """``find-hanging --max-transaction-timeout`` for a run whose clients use this timeout.

    The tool only considers transactions whose producer last wrote longer ago than this many
    minutes (15 by default, longer than most runs): a transaction older than every client's
    timeout should have been aborted by its coordinator. So the smallest whole number of
    minutes that covers the run's timeout, at least 1.
    """
    if not transaction_timeout_ms or transaction_timeout_ms <= 0:
        return 15
    return max(1, -(-transaction_timeout_ms // 60_000))


def find_hanging(cluster: Cluster, broker: int, max_minutes: int = 15) -> list[dict[str, str]]:
    out = cluster.run_tool(
        "TransactionsCommand",
        "--bootstrap-server",
        cluster.internal_bootstrap,
        "find-hanging",
        "--broker-id",
        str(broker),
        "--max-transaction-timeout",
        str(max_minutes),
    )
    return parse_table(out)


def record_hanging(
    rec: Recorder, cluster: Cluster, transaction_timeout_ms: int | None = None
) -> None:
    """Kafka's ``TransactionsCommand find-hanging`` for every broker, the JVMs run in parallel,
    looking at transactions older than the run's transaction timeout
    (:func:`max_timeout_minutes`)."""
    brokers = cluster.node_ids()
    minutes = max_timeout_minutes(transaction_timeout_ms)
    rec.invoke("find-hanging", {"brokers": brokers, "max_transaction_timeout_min": minutes})

    def one(broker: int) -> dict[str, Any]:
        try:
            return {"broker": broker, "rows": find_hanging(cluster, broker, minutes)}
        except (HarnessError, OSError) as exc:
            return {"broker": broker, "error": str(exc)}
        except Exception as exc:  # a tool timeout must not lose the rest of the final state
            return {"broker": broker, "error": f"{type(exc).__name__}: {exc}"}

    with ThreadPoolExecutor(max_workers=len(brokers)) as pool:
        results = list(pool.map(one, brokers))
    failed = [r for r in results if "error" in r]
    value = {"brokers": brokers, "max_transaction_timeout_min": minutes, "results": results}
    if len(failed) == len(results):
        rec.fail("find-hanging", value, failed[0]["error"])
    else:
        rec.ok("find-hanging", value)


if __name__ == "__main__":
    import json
    import sys

    result = _CHILD_CALLS[sys.argv[1]](*json.loads(sys.argv[2]))
    sys.stdout.write(json.dumps(result))
