"""One consume-transform-produce processor instance, as its own OS process.

``python -m workloads.eos.processor --config JSON`` runs a single instance: one consumer in
the workload's group, one (transactional) producer, one history file whose process id is the
instance number. Being a separate OS process is the point: the harness can SIGKILL it (a
crash), SIGSTOP it for longer than its session timeout (a zombie, KIP-447's GC-pause scenario)
or SIGTERM it (a clean stop), exactly as happens to real stream processors.

The loop is the textbook exactly-once pattern (Kafka: The Definitive Guide, ch. 8; KIP-447):
poll a batch, begin a transaction, produce one output per input, add the consumer's positions
to the transaction with the consumer group metadata (so the group coordinator can fence a
zombie by generation), commit. Broken variants (see ``workloads.eos.config.VARIANTS``) change
exactly one of those steps so that checkers can be shown to catch the difference.

Exit status: 0 clean stop, 2 bad configuration, 3 fenced, 4 fatal client error, 5 outcome of
a commit unknown, 6 could not rewind after an abort, 7 parent (the harness) went away.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
from dataclasses import asdict
from types import FrameType
from typing import Any

from common.errors import HarnessError
from history import Recorder
from history.eos_records import (
    H_GENERATION,
    H_INSTANCE,
    H_MEMBER_ID,
    H_SRC_OFFSET,
    H_SRC_PARTITION,
    H_SRC_TOPIC,
    H_TXN_ID,
    H_TXN_SEQ,
    transform,
)
from history.moments import DURING_COMMIT
from workloads.clientinfo import (
    error_info,
    is_fenced,
    parse_group_metadata,
    refused_by_cluster,
    warn,
)
from workloads.clients import (
    Calls,
    ClientError,
    Exit,
    TxnDelay,
    announce_library,
    make_clients,
    subscribe,
)
from workloads.eos.config import PRODUCER_SETTINGS, ProcessorConfig, arm_path, fired_path

EXIT_OK = 0
EXIT_BAD_CONFIG = 2
EXIT_FENCED = 3
EXIT_FATAL = 4
EXIT_UNCERTAIN = 5
EXIT_REWIND_FAILED = 6
EXIT_ORPHANED = 7
EXIT_NOT_AUTHORIZED = 8
EXIT_HOOK = 70


def flush_once(producer: Any, timeout: float) -> int:
    """``producer.flush(timeout)``, with a fatal error always raised as a KafkaException.

    When confluent-kafka raises a fatal transactional error (a fenced producer) while it
    dispatches delivery reports, the next report's callback runs with that exception set and
    CPython reports a ``SystemError`` caused by it. Left alone, that ends the process with
    status 1 and no exit op, which the client contract does not allow; it is the fence it
    wraps, and is handled as one."""
    from confluent_kafka import KafkaException

    try:
        return int(producer.flush(timeout))
    except SystemError as exc:
        if isinstance(exc.__cause__, KafkaException):
            raise exc.__cause__ from None
        raise


class _NoRecorder:
    """Records nothing: only for measuring what history recording costs (bench/)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def _noop(self, *args: Any, **kwargs: Any) -> None:
        return None

    invoke = ok = fail = info = record = close = _noop


def deliberate_abort(code: str, message: str) -> ClientError:
    """This transaction is aborted on purpose: the seeded RNG chose it (abort probability),
    or a nemesis armed an abortable failure at a protocol moment. Either way it is an
    abortable client error, and the client takes that path: abort, read the inputs again,
    go on."""
    return ClientError(
        {
            "stage": "deliberate-abort",
            "code": code,
            "message": message,
            "fatal": False,
            "abortable": True,
            "retriable": False,
        }
    )


class Processor:
    """The instance's state and loop; one thread, so one Recorder is enough."""

    def __init__(self, cfg: ProcessorConfig) -> None:
        self.cfg = cfg
        self.tid = cfg.transactional_id
        self.rng = random.Random(cfg.seed)
        recorder = Recorder if cfg.record_history else _NoRecorder
        self.rec = recorder(
            cfg.history_path,
            cfg.instance,
            meta={
                "workload": "eos",
                "role": "processor",
                "instance": cfg.instance,
                "slot": cfg.slot,
                "variant": cfg.variant,
                "transactional_id": self.tid,
                "config": asdict(cfg),
            },
        )
        self.stopping: str | None = None
        self.parent = os.getppid()
        self.seq = 0
        self.committed = 0
        self.failed = 0
        self.hook_fired = False
        self.zombie_requested = False
        #: A moment a nemesis armed at run time (SIGUSR2): {"at", "action", "delay_ms"}.
        self.armed: dict[str, Any] | None = None
        self.consumer: Any = None
        self.producer: Any = None
        self.calls = Calls(f"instance {cfg.instance}", cfg.call_timeout_s, floor_s=1.0)
        #: ``--txn-delay-ms``: between the produce calls, before the offsets, before the commit.
        self.delay = TxnDelay(cfg.txn_delay_ms, cfg.seed)

    # --- signals and hooks -----------------------------------------------------------

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        # Only a flag: the current transaction finishes (or aborts) before the loop exits.
        self.stopping = "sigterm" if signum == signal.SIGTERM else "sigint"

    def _on_usr1(self, signum: int, frame: FrameType | None) -> None:
        # A nemesis asks for a zombie: stop at the next offset commit, mid-transaction, so
        # the commit that follows the resume is the one the group must reject (KIP-447).
        self.zombie_requested = True

    def _on_usr2(self, signum: int, frame: FrameType | None) -> None:
        # A nemesis armed (or, with an empty file, disarmed) a protocol moment: see arm_path.
        try:
            text = arm_path(self.cfg.history_path).read_text().strip()
        except OSError:
            return
        self.armed = json.loads(text) if text else None

    def _fire_armed(self, point: str) -> None:
        """Act at the moment a nemesis armed: say where (the fired file), then act.

        ``during-commit`` is armed at ``before-commit``: a timer acts ``delay_ms`` after the
        commit call began, so the crash lands while EndTxn (or the offset commit) is in flight.
        """
        armed = self.armed
        if armed is None:
            return
        at = armed["at"]
        if at != point and not (at == DURING_COMMIT and point == "before-commit"):
            return
        self.armed = None
        fired = {"at": at, "action": armed["action"], "txn": self.seq, "pid": os.getpid()}
        tmp = fired_path(self.cfg.history_path).with_suffix(".tmp")
        tmp.write_text(json.dumps(fired))
        tmp.replace(fired_path(self.cfg.history_path))
        warn(f"instance {self.cfg.instance}: armed {armed['action']} at {at} of txn {self.seq}")
        if armed["action"] == "abort":
            raise deliberate_abort("INJECTED_ABORT", f"an abortable failure armed at {at}")
        sig = signal.SIGKILL if armed["action"] == "kill" else signal.SIGSTOP
        if at == DURING_COMMIT:
            delay = float(armed.get("delay_ms", 0)) / 1000
            threading.Timer(delay, os.kill, (os.getpid(), sig)).start()
        else:
            os.kill(os.getpid(), sig)  # a stop returns once someone sends SIGCONT

    def _hook(self, point: str) -> None:
        self._fire_armed(point)
        # The zombie stops where a GC pause hurts most: after its outputs are produced and
        # before the first commit step (offsets in the transaction; for variants without that
        # step, the commit itself).
        if self.zombie_requested and point in ("before-offsets", "before-commit"):
            self.zombie_requested = False
            warn(f"instance {self.cfg.instance}: pausing itself before offsets (zombie)")
            os.kill(os.getpid(), signal.SIGSTOP)  # returns once someone sends SIGCONT
            return
        hook = self.cfg.hook
        if hook is None or self.hook_fired or hook.at != point or self.seq < hook.txn:
            return
        self.hook_fired = True
        warn(f"instance {self.cfg.instance}: hook {hook.action} at {point} of txn {self.seq}")
        if hook.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif hook.action == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)  # returns once someone sends SIGCONT
        else:
            os._exit(EXIT_HOOK)

    # --- clients ---------------------------------------------------------------------

    def _make_clients(self) -> None:
        cfg = self.cfg
        self.producer, self.consumer = make_clients(
            cfg,
            "eos",
            cfg.instance,
            self.tid if cfg.transactional else None,
            read_committed=cfg.variant != "read-uncommitted",
            group_protocol=cfg.group_protocol,
            log_level=4,
            producer=PRODUCER_SETTINGS,
            settings=cfg.client_config,
        )

    # --- rebalance callbacks -----------------------------------------------------------

    def _group(self) -> dict[str, Any]:
        meta = parse_group_metadata(self.consumer.consumer_group_metadata())
        try:
            member = self.consumer.memberid()
        except Exception:  # older clients / not joined yet
            member = None
        return {"generation": meta.get("generation"), "member_id": member or meta.get("member_id")}

    def _rebalance(self, event: str, partitions: list[Any]) -> None:
        parts = sorted([tp.topic, tp.partition] for tp in partitions)
        self.rec.invoke("rebalance", {"event": event, "partitions": parts})
        self.rec.ok("rebalance", {"event": event, "partitions": parts, **self._group()})

    # --- the loop ----------------------------------------------------------------------

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGUSR1, self._on_usr1)
        signal.signal(signal.SIGUSR2, self._on_usr2)
        code, reason = EXIT_OK, "stopped"
        try:
            self._start()
            while self.stopping is None:
                if os.getppid() != self.parent:
                    raise Exit(EXIT_ORPHANED, "orphaned")
                self._step()
            reason = self.stopping
        except Exit as stop:
            code, reason = stop.code, stop.reason
        self._close()
        self.rec.invoke("exit", {"reason": reason})
        self.rec.ok(
            "exit",
            {
                "reason": reason,
                "code": code,
                "txns": self.seq,
                "committed": self.committed,
                "failed": self.failed,
            },
        )
        self.rec.close()
        return code

    def _refused(self, info: dict[str, Any]) -> None:
        """Exit with EXIT_NOT_AUTHORIZED, naming the error, when the cluster refused an
        operation for want of an ACL, or the client's login: retrying here cannot help."""
        if refused_by_cluster(info):
            raise Exit(EXIT_NOT_AUTHORIZED, f"not-authorized {info['code']}")

    def _start(self) -> None:
        cfg = self.cfg
        value = {
            "instance": cfg.instance,
            "slot": cfg.slot,
            "pid": os.getpid(),
            "variant": cfg.variant,
            "transactional_id": self.tid,
            "group_id": cfg.group_id,
            "input_topic": cfg.input_topic,
            "output_topic": cfg.output_topic,
            "group_protocol": cfg.group_protocol,
            "client_config": cfg.client_config,
            "txn_delay_ms": cfg.txn_delay_ms,
        }
        self.rec.invoke("start", value)
        self._make_clients()
        if cfg.transactional:
            try:
                self.calls.call("init", self.producer.init_transactions)
            except ClientError as exc:
                self.rec.fail("start", value, exc.info)
                self._refused(exc.info)
                code = EXIT_FENCED if is_fenced(exc.info) else EXIT_FATAL
                raise Exit(code, "init-failed") from None
        subscribe(self.consumer, [cfg.input_topic], self._rebalance)
        self.rec.ok("start", value)

    def _step(self) -> None:
        cfg = self.cfg
        msgs = self.consumer.consume(cfg.txn_size, cfg.commit_interval_ms / 1000)
        batch = []
        for m in msgs:
            if m.error() is None:
                batch.append(m)
            else:
                warn(f"instance {cfg.instance}: consume error: {m.error()}")
                self._refused({"code": m.error().name(), "stage": "poll"})
        if not batch:
            return
        # Captured with the batch: these records were consumed in this generation, and that is
        # the generation the group coordinator must check the offset commit against.
        cgmd = self.consumer.consumer_group_metadata()
        self._process(batch, cgmd, parse_group_metadata(cgmd))

    def _process(self, batch: list[Any], cgmd: bytes, group: dict[str, Any]) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        cfg = self.cfg
        self.seq += 1
        seq = self.seq
        generation = group.get("generation")
        member = group.get("member_id")
        inputs = [[m.partition(), m.offset(), m.value().decode()] for m in batch]
        self.rec.invoke(
            "txn",
            {
                "txn": seq,
                "transactional_id": self.tid,
                "generation": generation,
                "member_id": member,
                "inputs": inputs,
            },
        )
        outputs: list[list[Any]] = [[None, None, None, p, o] for p, o, _ in inputs]
        result: dict[str, Any] = {"txn": seq, "outputs": outputs, "offsets": None}
        delivery_errors: list[Any] = []

        def delivered(i: int) -> Any:
            def cb(err: Any, msg: Any) -> None:
                if err is None:
                    outputs[i][0] = msg.partition()
                    outputs[i][1] = msg.offset()
                else:
                    delivery_errors.append(err)

            return cb

        headers_common = [
            (H_INSTANCE, str(cfg.instance).encode()),
            (H_TXN_ID, (self.tid or "").encode()),
            (H_GENERATION, str(generation).encode()),
            (H_MEMBER_ID, (member or "").encode()),
            (H_TXN_SEQ, str(seq).encode()),
        ]
        stage = "begin"
        try:
            if cfg.transactional:
                self._begin()
            stage = "produce"
            for i, m in enumerate(batch):
                if i:
                    self.delay()
                out_value = transform(m.value().decode())
                outputs[i][2] = out_value
                self.producer.produce(
                    cfg.output_topic,
                    key=m.value(),
                    value=out_value.encode(),
                    partition=m.partition() % cfg.output_partitions,
                    headers=[
                        (H_SRC_TOPIC, m.topic().encode()),
                        (H_SRC_PARTITION, str(m.partition()).encode()),
                        (H_SRC_OFFSET, str(m.offset()).encode()),
                        *headers_common,
                    ],
                    on_delivery=delivered(i),
                )
            self._hook("after-produce")
            stage = "flush"
            self._flush()
            if delivery_errors:
                # Never commit offsets past an input whose output was not written.
                err = delivery_errors[0]
                raise ClientError(
                    {
                        "stage": "produce",
                        "code": err.name(),
                        "message": err.str(),
                        "fatal": bool(err.fatal()),
                        "abortable": True,
                        "retriable": bool(err.retriable()),
                        "failed_outputs": len(delivery_errors),
                    }
                )
            self._hook("after-flush")
            positions = [
                tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0
            ]
            result["offsets"] = sorted([tp.partition, tp.offset] for tp in positions)
            if cfg.variant == "at-least-once":
                stage = "commit-offsets"
                self.delay()
                self._hook("before-offsets")
                self._hook("before-commit")  # its offset commit is its only commit step
                self._commit_offsets(positions)
                self._hook("after-commit")
            else:
                if cfg.abort_probability and self.rng.random() < cfg.abort_probability:
                    raise deliberate_abort(
                        "DELIBERATE_ABORT", "aborted on purpose (abort probability)"
                    )
                if cfg.variant != "offsets-outside-txn":
                    stage = "send-offsets"
                    self.delay()
                    self._hook("before-offsets")
                    self.calls.call(
                        "send-offsets",
                        self.producer.send_offsets_to_transaction,
                        [TopicPartition(tp.topic, tp.partition, tp.offset) for tp in positions],
                        cgmd,
                    )
                stage = "commit"
                self.delay()
                self._hook("before-commit")
                self.calls.call("commit", self.producer.commit_transaction)
                self._hook("after-commit")
                if cfg.variant == "offsets-outside-txn":
                    stage = "commit-offsets"
                    self.delay()
                    self._commit_offsets(positions)
        except ClientError as exc:
            self._failed_txn(result, exc.info)
            return
        except (KafkaException, BufferError) as exc:  # produce() refusing a record
            self._failed_txn(result, error_info(exc, stage))
            return
        self.committed += 1
        self.rec.ok("txn", result)

    def _begin(self) -> None:
        from confluent_kafka import KafkaException

        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            raise ClientError(error_info(exc, "begin")) from None

    def _flush(self) -> None:
        """Wait for every delivery report (output offsets), within the call bound."""
        deadline = time.monotonic() + self.cfg.call_timeout_s
        while flush_once(self.producer, max(0.1, deadline - time.monotonic())) > 0:
            if time.monotonic() >= deadline:
                raise ClientError(
                    {
                        "stage": "flush",
                        "code": "_TIMED_OUT",
                        "message": "outputs not acknowledged within the call timeout",
                        "fatal": False,
                        "abortable": True,
                        "retriable": False,
                    }
                )

    def _commit_offsets(self, positions: list[Any]) -> None:
        from confluent_kafka import KafkaException

        try:
            self.consumer.commit(offsets=positions, asynchronous=False)
        except KafkaException as exc:
            raise ClientError(error_info(exc, "commit-offsets")) from None

    def _failed_txn(self, result: dict[str, Any], info: dict[str, Any]) -> None:
        """Record how a unit of processing ended when it did not commit cleanly, and react.

        * Nothing committed can have happened before the commit step, so errors there are
          ``fail``. A commit that failed with anything but an abortable error may or may not
          have taken effect (a lost EndTxn response, a fence racing a completed commit): that
          is ``info``, and the instance exits so its successor carries a new process id.
        * Without a transaction (at-least-once) outputs may be durable as soon as they are
          produced, and after offsets-outside-txn's commit they are: failures there are
          ``info`` too.
        * Fenced and fatal errors end the instance; abortable ones abort, rewind, continue.
        """
        cfg = self.cfg
        self.failed += 1
        stage = info["stage"]
        fenced = is_fenced(info)
        if stage == "commit-offsets" or (not cfg.transactional and stage != "begin"):
            self.rec.info("txn", result, info)
            raise Exit(EXIT_UNCERTAIN, "uncertain")
        if stage == "commit" and not info["abortable"]:
            self.rec.info("txn", result, info)
            raise Exit(EXIT_FENCED if fenced else EXIT_UNCERTAIN, "uncertain")
        if fenced or info["fatal"]:
            self.rec.fail("txn", result, info)
            self._refused(info)
            raise Exit(EXIT_FENCED if fenced else EXIT_FATAL, "fenced" if fenced else "fatal")
        if cfg.transactional:
            try:
                self.calls.call("abort", self.producer.abort_transaction)
            except ClientError as exc:
                self.rec.fail("txn", result, {**info, "abort_error": exc.info})
                abort_fenced = is_fenced(exc.info)
                raise Exit(
                    EXIT_FENCED if abort_fenced else EXIT_FATAL,
                    "fenced" if abort_fenced else "fatal",
                ) from None
        self.rec.fail("txn", result, info)
        if cfg.variant != "no-rewind":
            self._rewind()

    def _rewind(self) -> None:
        """Seek back to the group's committed offsets: the aborted inputs must be read again."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        assignment = self.consumer.assignment()
        parts = sorted([tp.topic, tp.partition] for tp in assignment)
        self.rec.invoke("rewind", {"partitions": parts})
        if not assignment:
            self.rec.ok("rewind", {"partitions": parts, "offsets": []})
            return
        try:
            committed = self.calls.call("rewind", self.consumer.committed, assignment)
            offsets = []
            for tp in committed:
                if tp.error is not None:
                    raise ClientError(
                        {"stage": "rewind", "code": tp.error.name(), "message": tp.error.str()}
                    )
                offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
                offsets.append([tp.partition, tp.offset])
        except KafkaException as exc:
            self.rec.fail("rewind", {"partitions": parts}, error_info(exc, "rewind"))
            raise Exit(EXIT_REWIND_FAILED, "rewind-failed") from None
        except ClientError as exc:
            self.rec.fail("rewind", {"partitions": parts}, exc.info)
            raise Exit(EXIT_REWIND_FAILED, "rewind-failed") from None
        self.rec.ok("rewind", {"partitions": parts, "offsets": sorted(offsets)})

    def _close(self) -> None:
        """Leave the group (revocation is recorded) and drop the producer without waiting."""
        self.calls.close(self.consumer, self.producer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.eos.processor")
    parser.add_argument("--config", required=True, help="ProcessorConfig as a JSON object")
    args = parser.parse_args(argv)
    try:
        cfg = ProcessorConfig.from_json(args.config)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    announce_library()
    processor = Processor(cfg)
    return processor.calls.exit(processor.run())


if __name__ == "__main__":
    sys.exit(main())
