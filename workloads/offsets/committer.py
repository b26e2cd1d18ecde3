"""One consumer group of the offsets workload, as its own OS process (confluent-kafka).

``python -m workloads.offsets.committer --config JSON`` (the keys:
:meth:`workloads.offsets.options.OffsetsOptions.committer_config`) runs one history process
for one group. Each round it reads the group's committed offset of its partition (again,
until a read completes), then commits the next offset with a plain synchronous commit, the
way an application calls ``commitSync``. Reading before every commit is what makes a lost
commit visible: a group that only kept committing would overwrite the loss with its next
commit. After the stop file
appears it reads once more (the final read) and exits. The ops are documented in
``docs/history-format.md``, "Workload offsets".

Being a process of its own is what lets the harness pause or kill it like any client.

Exit status: 0 stop file, SIGTERM or time limit, 2 bad configuration, 3 the client could
not start, 7 the supervisor went away.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from history import Recorder
from workloads.clientinfo import error_info
from workloads.clientmain import run_client

EXIT_OK, EXIT_ORPHANED = 0, 7

#: The keys of a committer's ``--config`` (unknown keys are ignored; a missing one is a bad
#: configuration).
REQUIRED = (
    "process", "group", "topic", "partition", "bootstrap", "history_path", "stop_path",
    "interval_ms", "read_timeout_s", "time_limit_s", "final_timeout_s", "client_config",
)  # fmt: skip
#: What librdkafka answers for a partition the group has no committed offset for.
NO_OFFSET = -1001


class Committer:
    """The process's loop; one thread, so one Recorder."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        from confluent_kafka import Consumer

        self.cfg = cfg
        self.parent = os.getppid()
        self.stopping: str | None = None
        self.consumer = Consumer(
            {
                "bootstrap.servers": cfg["bootstrap"],
                "group.id": cfg["group"],
                "enable.auto.commit": False,
                # Plain commits, no transactions: a read need not wait for pending
                # transactional offsets (librdkafka's require_stable), which makes the
                # coordinator queue it behind every pending write, other groups' too. Under
                # controller-cut that would hold most committers in a read rather than in a
                # commit on the cut broker (measured: 3 commits there instead of 23).
                "isolation.level": "read_uncommitted",
                "log_level": 3,
                **cfg["client_config"],
            }
        )
        self.recorder = Recorder(
            cfg["history_path"],
            cfg["process"],
            meta={"workload": "offsets", "role": "committer", "group": cfg["group"]},
        )
        self.next_offset = 1

    def _where(self) -> dict[str, Any]:
        c = self.cfg
        return {"group": c["group"], "topic": c["topic"], "partition": c["partition"]}

    def read(self, timeout: float) -> int | bool | None:
        """One ``read`` op: the committed offset (None: none yet), or False if it failed."""
        from confluent_kafka import TopicPartition

        where = self._where()
        self.recorder.invoke("read", where)
        try:
            tp = TopicPartition(where["topic"], where["partition"])
            got = self.consumer.committed([tp], timeout=timeout)[0]
            if got.error is not None:
                raise RuntimeError(str(got.error))
        except Exception as exc:  # a timeout or a coordinator moving: nothing was read
            self.recorder.fail("read", where, error_info(exc, "read"))
            return False
        offset = None if got.offset == NO_OFFSET else got.offset
        self.recorder.ok("read", {**where, "offset": offset})
        return offset

    def commit(self) -> None:
        """One ``commit`` op of the next offset; an error leaves its outcome unknown (a
        timed-out commit may still be written), so it is ``info``."""
        from confluent_kafka import TopicPartition

        value = {**self._where(), "offset": self.next_offset}
        self.next_offset += 1
        self.recorder.invoke("commit", value)
        try:
            tp = TopicPartition(value["topic"], value["partition"], value["offset"])
            self.consumer.commit(offsets=[tp], asynchronous=False)
        except Exception as exc:
            self.recorder.info("commit", value, error_info(exc, "commit"))
            return
        self.recorder.ok("commit", value)

    def run(self) -> int:
        c = self.cfg
        deadline = time.monotonic() + float(c["time_limit_s"])
        stop = Path(c["stop_path"])
        while self.stopping is None:
            if stop.exists():
                return self.final_read()
            if time.monotonic() > deadline:
                self.stopping = "time limit"
            elif os.getppid() != self.parent:
                return EXIT_ORPHANED
            else:
                got = self.read_back(float(c["read_timeout_s"]))
                if got is not False and got is not None:
                    self.next_offset = max(self.next_offset, got + 1)
                self.commit()
                time.sleep(c["interval_ms"] / 1000)
        return EXIT_OK

    def read_back(self, within: float) -> int | bool | None:
        """Read until one read completes, or ``within`` seconds: what :meth:`read` gives.

        The next commit must not go out before the last one acknowledged was read back. A
        read refused right after the coordinator moved (``NOT_COORDINATOR``: librdkafka
        returns it, and finds the new coordinator meanwhile) would otherwise let the next
        commit overwrite a lost one unseen.
        """
        deadline = time.monotonic() + within
        while True:
            got = self.read(float(self.cfg["read_timeout_s"]))
            if got is not False or time.monotonic() > deadline or self.stopping is not None:
                return got
            time.sleep(0.2)  # the coordinator is moving: ask again shortly

    def final_read(self) -> int:
        """Read until one read completes (the cluster may still be settling after the
        faults), or until the final deadline."""
        self.read_back(float(self.cfg["final_timeout_s"]))
        return EXIT_OK

    def close(self) -> None:
        try:
            self.consumer.close()
        finally:
            self.recorder.close()


def main(argv: list[str] | None = None) -> int:
    prog = "python -m workloads.offsets.committer"
    return run_client(argv, prog, "offsets committer", REQUIRED, Committer)


if __name__ == "__main__":
    sys.exit(main())
