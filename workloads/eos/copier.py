"""The second eos client: Kafka's own Java ``TransactionalMessageCopier`` (kafka-tools).

librdkafka (and so confluent-kafka) does not implement KIP-890's transaction version 2; the
Java 4.x client does. Running Kafka's own copier in group mode with group-metadata offset
commits (``--group-mode --use-group-metadata``) puts the same consume-transform-produce loop
on the Java client, so both protocols are covered and judged the same way: by the seeder's
acknowledged values against the final read_committed drain.

The copier copies each record as is, to the output partition numbered like its input
partition, and exits once it has consumed what was in its assigned partitions when they
were assigned; the supervisor starts a successor, as for any processor that exits. The
copier prints one JSON object per line; a reader thread turns them into history ops.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from history import Recorder
from workloads.java_clients import JVM_OPTS
from workloads.processes import PROJECT_ROOT, in_group

if TYPE_CHECKING:
    from workloads.eos.supervisor import EosWorkload

COPIER_CLASS = "org.apache.kafka.tools.TransactionalMessageCopier"


def copier_command(
    prefix: list[str],
    *,
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    group_id: str,
    transactional_id: str,
    txn_size: int,
    transaction_timeout_ms: int,
    random_aborts: bool,
) -> list[str]:
    cmd = [
        *prefix,
        "--broker-list", bootstrap,
        "--input-topic", input_topic,
        "--input-partition", "0",
        "--output-topic", output_topic,
        "--consumer-group", group_id,
        "--transactional-id", transactional_id,
        "--transaction-size", str(txn_size),
        "--transaction-timeout", str(transaction_timeout_ms),
        "--max-messages", "-1",
        "--group-mode",
        "--use-group-metadata",
    ]  # fmt: skip
    if random_aborts:
        cmd.append("--enable-random-aborts")
    return cmd


def parse_line(line: str) -> tuple[str, dict[str, Any]] | None:
    """One line of copier output as (f, value), or None for anything that is not an event."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    # Kafka 3.x prints {"progress": id, ...} and {"shutdown_complete": id, ...}; 4.x prints
    # {"transactionalId": id, "stage": "ProcessLoop" | "RebalanceComplete" | ...}.
    tid = event.get("transactionalId", event.get("progress", event.get("shutdown_complete")))
    if tid is None:
        return None
    stage = event.get("stage")
    value = {
        "transactional_id": tid,
        "stage": stage,
        "total_processed": event.get("totalProcessed"),
        "consumed": event.get("consumed"),
        "remaining": event.get("remaining"),
    }
    if "shutdown_complete" in event or stage == "ShutdownComplete":
        return "exit", value
    return "progress", value


class CopierEvents(threading.Thread):
    """Reads one copier's stdout and records its events in the instance's history file.

    Progress lines come every poll loop; only changes of (stage, totals) are recorded, so an
    idle copier does not flood the history.
    """

    def __init__(self, stream: IO[bytes], history: Path, instance: int, meta: dict[str, Any]):
        super().__init__(name=f"copier-{instance}", daemon=True)
        self.stream = stream
        self.recorder = Recorder(history, instance, meta)
        self.recorder.ok("start", {"client": "java-copier", **meta})

    def run(self) -> None:
        last: tuple[Any, ...] | None = None
        try:
            for raw in self.stream:
                parsed = parse_line(raw.decode(errors="replace"))
                if parsed is None:
                    continue
                f, value = parsed
                key = (f, value.get("stage"), value.get("total_processed"), value.get("remaining"))
                if f == "progress" and key == last:
                    continue
                last = key
                self.recorder.ok(f, value)
        finally:
            self.recorder.close()


def start_copier(
    cmd: list[str],
    env: dict[str, str],
    log: IO[bytes],
    history: Path,
    instance: int,
    meta: dict[str, Any],
    cwd: Path,
) -> tuple[subprocess.Popen[bytes], CopierEvents]:
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,
    )
    assert proc.stdout is not None
    reader = CopierEvents(proc.stdout, history, instance, meta)
    reader.start()
    return proc, reader


def spawn(
    workload: EosWorkload,
    instance: int,
    cfg: Any,
    env: dict[str, str],
    logf: IO[bytes],
    gid: int | None,
) -> subprocess.Popen[bytes]:
    """The copier as one slot's processor (the manifest's ``adapter.eos``: the supervisor
    calls this instead of starting ``start.eos``), as group ``gid`` when given."""
    o = workload.options
    cmd = copier_command(
        workload.cluster.tool_command("TransactionalMessageCopier", JVM_OPTS),
        bootstrap=workload.cluster.bootstrap,
        input_topic=o.input_topic,
        output_topic=o.output_topic,
        group_id=o.group_id,
        transactional_id=cfg.transactional_id,
        txn_size=o.txn_size,
        transaction_timeout_ms=o.transaction_timeout_ms,
        random_aborts=o.abort_probability > 0,
    )
    meta = {"instance": instance, "slot": cfg.slot, "transactional_id": cfg.transactional_id}
    proc, _reader = start_copier(
        in_group(cmd, gid), env, logf, Path(cfg.history_path), instance, meta, PROJECT_ROOT
    )
    return proc
