"""One member of the share workload's group, as its own OS process (confluent-kafka).

``python -m workloads.share.member --config JSON`` (the keys:
:meth:`workloads.share.options.ShareOptions.member_config`) runs one history process: a
``ShareConsumer`` in explicit acknowledgement mode on the input topic and an idempotent
producer to the output topic. Each round it polls, decides each record's acknowledgement
(accept, release or reject, seeded), processes the records it will accept (writes them to the
output), then acknowledges the poll's records and commits the acknowledgements; the
``accept-before-process`` variant commits first. The ops are documented in
``docs/history-format.md``, "Workload share". Being a process of its own is what lets the
harness pause it past its record locks, kill it with records acquired, or cut it off.

Exit status: 0 SIGTERM or time limit, 2 bad configuration, 3 the clients could not start,
7 the supervisor went away.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from history import Recorder
from workloads.clientinfo import error_info, warn
from workloads.clientmain import run_client
from workloads.share.options import EXIT_OK, EXIT_ORPHANED

#: The keys of a member's ``--config`` (unknown keys are ignored, so a newer harness can add
#: some; a missing one is a bad configuration).
REQUIRED = (
    "process", "slot", "history_path", "bootstrap", "group_id", "input_topic", "output_topic",
    "seed", "release_p", "reject_p", "variant", "max_records", "process_ms", "poll_timeout_ms",
    "commit_timeout_ms", "drain_path", "time_limit_s", "client_config",
)  # fmt: skip

Delivery = list[Any]  # [partition, offset, value, delivery_count]


class Member:
    """The process's loop; one thread, so one Recorder."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

        self.cfg = cfg
        self.kinds = {
            "accept": AcknowledgeType.ACCEPT,
            "release": AcknowledgeType.RELEASE,
            "reject": AcknowledgeType.REJECT,
        }
        self.rng = random.Random(f"share:{cfg['seed']}:{cfg['process']}")
        self.parent = os.getppid()
        self.stopping: str | None = None
        self.draining = False
        self.end = time.monotonic() + float(cfg["time_limit_s"])
        self.polled = 0
        self.accepted = 0
        self.rounds = 0
        #: The moment a nemesis armed (``<history>.arm``, as the eos processors read it) and
        #: where it fired (``<history>.fired``).
        self.arm_file = Path(f"{cfg['history_path']}.arm")
        self.fired_file = Path(f"{cfg['history_path']}.fired")
        self.arm_seen: tuple[int, int, int] | None = None
        self.armed: dict[str, Any] | None = None
        self.rec = Recorder(
            cfg["history_path"],
            cfg["process"],
            meta={
                "workload": "share",
                "role": "member",
                "pid": os.getpid(),
                "client": "confluent-kafka",
                "config": cfg,
            },
        )
        settings = {str(k): str(v) for k, v in cfg["client_config"].items()}
        self.consumer = ShareConsumer(
            {
                "bootstrap.servers": cfg["bootstrap"],
                "group.id": cfg["group_id"],
                "share.acknowledgement.mode": "explicit",
                "max.poll.records": cfg["max_records"],
                "log_level": 3,
                **settings,
            }
        )
        self.producer = Producer(
            {
                "bootstrap.servers": cfg["bootstrap"],
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "log_level": 3,
            }
        )
        self.consumer.subscribe([cfg["input_topic"]])

    # --- one round ---------------------------------------------------------------------

    def poll(self) -> list[Any]:
        self.rec.invoke("poll", None)
        try:
            batch = self.consumer.poll(self.cfg["poll_timeout_ms"] / 1000)
        except Exception as exc:
            self.rec.info("poll", None, error_info(exc, "poll"))
            return []
        msgs = [m for m in batch if m.error() is None]
        for m in batch:
            if m.error() is not None:
                warn(f"share member {self.cfg['process']}: poll error {m.error()}")
        records = [[m.partition(), m.offset(), _text(m.value()), m.delivery_count()] for m in msgs]
        self.rec.ok("poll", {"records": records})
        self.polled += len(records)
        return msgs

    def decide(self) -> str:
        """Accept, release or reject, seeded; every record is accepted once draining."""
        if self.draining:
            return "accept"
        x = self.rng.random()
        if x < self.cfg["release_p"]:
            return "release"
        if x < self.cfg["release_p"] + self.cfg["reject_p"]:
            return "reject"
        return "accept"

    def process(self, msgs: list[Any]) -> bool:
        """Write each record to the output and wait for every write's acknowledgement; False
        if some write was not acknowledged (the caller then releases the records instead of
        accepting them, so they come back: accepting them could lose a record whose write
        never landed)."""
        if not msgs:
            return True
        value = {"records": [[m.partition(), m.offset(), _text(m.value())] for m in msgs]}
        self.rec.invoke("process", value)
        time.sleep(self.cfg["process_ms"] / 1000)  # the work itself, simulated
        errors: list[str] = []

        def done(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        for m in msgs:
            headers = {
                "src-partition": str(m.partition()),
                "src-offset": str(m.offset()),
                "member": str(self.cfg["process"]),
                "delivery-count": str(m.delivery_count()),
            }
            self.producer.produce(
                self.cfg["output_topic"],
                key=m.value(),
                value=m.value(),
                headers=list(headers.items()),
                on_delivery=done,
            )
        left = self.producer.flush(self.cfg["commit_timeout_ms"] / 1000)
        if errors or left:
            message = errors[0] if errors else f"{left} writes still in flight"
            self.rec.info("process", value, {"code": "UNACKNOWLEDGED", "message": message})
            return False
        self.rec.ok("process", value)
        return True

    def acknowledge(self, decided: list[tuple[Any, str]]) -> None:
        """Acknowledge every record of the poll and commit; each record's answer recorded."""
        acks = [[m.partition(), m.offset(), _text(m.value()), k] for m, k in decided]
        self.rec.invoke("ack", {"acks": acks})
        try:
            for m, kind in decided:
                self.consumer.acknowledge(m, self.kinds[kind])
            answers = self.consumer.commit_sync(self.cfg["commit_timeout_ms"] / 1000)
        except Exception as exc:
            self.rec.info("ack", {"acks": acks}, error_info(exc, "commit"))
            return
        errors: dict[int, str | None] = {}
        for tp, err in (answers or {}).items():
            got = err if err is not None else getattr(tp, "error", None)
            errors[tp.partition] = None if got is None else _code(got)
        done = [[*a, errors.get(a[0])] for a in acks]
        self.rec.ok("ack", {"acks": done})
        self.accepted += sum(1 for a in done if a[3] == "accept" and a[4] is None)

    # --- armed moments ----------------------------------------------------------------

    def _armed_now(self) -> dict[str, Any] | None:
        """What a nemesis armed, re-read when the arm file changed (each arming replaces it
        by a rename: a new inode, mtime or size); an empty file disarms."""
        try:
            st = self.arm_file.stat()
        except OSError:
            return self.armed
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key != self.arm_seen:
            self.arm_seen = key
            try:
                text = self.arm_file.read_text().strip()
                self.armed = json.loads(text) if text else None
            except (OSError, ValueError) as exc:
                warn(f"share member {self.cfg['process']}: arm file unreadable: {exc}")
        return self.armed

    def hook(self, point: str, decided: list[tuple[Any, str]]) -> list[tuple[Any, str]]:
        """Act at the moment a nemesis armed, if it is ``point``: say where (the fired file),
        then SIGKILL or SIGSTOP this process (``during-commit``: a timer ``delay_ms`` into the
        commit), or for an armed abort hand back the round's records (released) instead of
        acknowledging them as decided. Returns the round's acknowledgements."""
        armed = self._armed_now()
        if armed is None:
            return decided
        at = armed.get("at")
        if at != point and not (at == "during-commit" and point == "before-commit"):
            return decided
        self.armed = None
        action = armed.get("action", "kill")
        fired = {"at": at, "action": action, "txn": self.rounds, "pid": os.getpid()}
        tmp = self.fired_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(fired))
        tmp.replace(self.fired_file)
        warn(f"share member {self.cfg['process']}: armed {action} at {at} of round {self.rounds}")
        if action == "abort":
            return [(m, "release") for m, _k in decided]
        sig = signal.SIGKILL if action == "kill" else signal.SIGSTOP
        if at == "during-commit":
            delay = float(armed.get("delay_ms", 0)) / 1000
            threading.Timer(delay, os.kill, (os.getpid(), sig)).start()
        else:
            os.kill(os.getpid(), sig)  # a stop returns once someone sends SIGCONT
        return decided

    def hooks(self, decided: list[tuple[Any, str]], *points: str) -> list[tuple[Any, str]]:
        for point in points:
            decided = self.hook(point, decided)
        return decided

    def round(self) -> None:
        """One poll's records: decided, processed and acknowledged (the variant: acknowledged
        and then processed), with the armed moments between the steps."""
        msgs = self.poll()
        if not msgs:
            return
        self.rounds += 1
        decided = [(m, self.decide()) for m in msgs]
        chosen = [m for m, kind in decided if kind == "accept"]
        if self.cfg["variant"] == "accept-before-process":
            decided = self.hooks(decided, "before-offsets", "before-commit")
            self.acknowledge(decided)
            self.hooks(decided, "after-commit")
            self.process([m for m, kind in decided if kind == "accept"])
            self.hooks(decided, "after-produce", "after-flush")
            return
        written = self.process(chosen)
        decided = self.hooks(decided, "after-produce", "after-flush", "before-offsets")
        decided = self.hooks(decided, "before-commit")
        if not written:
            decided = [(m, "release" if k == "accept" else k) for m, k in decided]
        self.acknowledge(decided)
        self.hooks(decided, "after-commit")

    # --- the loop ----------------------------------------------------------------------

    def run(self) -> int:
        code = EXIT_OK
        while self.stopping is None:
            if os.getppid() != self.parent:
                self.stopping, code = "orphaned", EXIT_ORPHANED
                break
            if time.monotonic() >= self.end:
                self.stopping = "time-limit"
                break
            if not self.draining and Path(self.cfg["drain_path"]).exists():
                self.rec.invoke("drain", {})
                self.draining = True
                self.rec.ok("drain", {})
            self.round()
        reason = self.stopping or "sigterm"
        self.rec.invoke("exit", {"reason": reason})
        self.rec.ok("exit", {"reason": reason, "polled": self.polled, "accepted": self.accepted})
        return code

    def close(self) -> None:
        for close in (self.consumer.close, lambda: self.producer.flush(5)):
            try:
                close()
            except Exception as exc:  # the history already holds every outcome
                warn(f"share member {self.cfg['process']}: close: {exc}")
        self.rec.close()


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


def _code(err: Any) -> str:
    """An error's code name (a KafkaError's ``name()``; else its class name)."""
    if hasattr(err, "name") and callable(err.name):
        return str(err.name())
    inner = getattr(err, "args", None)
    if inner and hasattr(inner[0], "name"):
        return str(inner[0].name())
    return type(err).__name__


def main(argv: list[str] | None = None) -> int:
    prog = "python -m workloads.share.member"
    return run_client(argv, prog, "share member", REQUIRED, Member)


if __name__ == "__main__":
    sys.exit(main())
