"""One client of the Jepsen-style ``queue`` workload, as its own OS process.

``python -m workloads.queue.client --config JSON`` runs a single logical Jepsen *process*: one
producer, one consumer, one history file whose process id is an int. Being an OS process of its
own is the point: the harness can SIGSTOP it (a GC pause), SIGKILL it (a crash) and replace it
with a fresh process under a new id, exactly as Jepsen replaces a crashed client.

Keys and values (the mapping the history relies on):

* The workload uses ONE topic with ``keys`` partitions. Key ``k`` (an int 0..keys-1) *is*
  partition ``k`` of that topic, so ``["send", 3, v]`` produces to partition 3 and the poll
  result ``{"3": [...]}`` lists records read from partition 3. Sends and assign/subscribe
  values use int keys; poll results use string keys because JSON object keys are strings (the
  checker compares keys as strings).
* A value is the int ``process * VALUE_STRIDE + n`` (``n`` counts this process's sends from 0),
  written to Kafka as its decimal ASCII text. Values are therefore unique across the whole run,
  and a value tells which process sent it.

Ops (chosen by an RNG seeded with ``(seed, process)``, paced to at most ``rate`` per second):

* ``send`` / ``poll`` / ``txn``: lists of micro-ops ``["send", k, v]`` / ``["poll"]``. In
  transactional mode every such op runs inside one Kafka transaction; offsets of what its polls
  returned are added with ``send_offsets_to_transaction(positions, consumer_group_metadata())``
  before the commit. Completions carry ``["send", k, [offset, v]]`` and
  ``["poll", {k: [[offset, v], ...]}]``; micro-ops never executed keep their invoke form.
* ``assign`` / ``subscribe``: value is a list of keys. ``assign`` changes the manual assignment
  incrementally (partitions kept keep their position, new ones start at the group's committed
  offset). ``subscribe`` subscribes to the topic (Kafka decides which partitions this consumer
  gets); rebalance callbacks seen during an op are attached to its completion as
  ``rebalance_log: [{"type": "assigned"|"revoked"|"lost", "keys": [...]}, ...]``.
* ``crash``: recorded as invoke + ``info``, then the process exits; the supervisor starts a
  successor with a new process id.

Outcomes: ``ok`` = committed (or acknowledged, without transactions); ``fail`` = definitely not
applied (the transaction was aborted, or never reached its commit); ``info`` = unknown
(timeouts, fatal errors during the commit). After an ``info`` the process exits, because its
uncertain op may still take effect and Jepsen continues such a client under a new id.

Exit status: 0 time limit or SIGTERM, 2 bad configuration, 3 clients could not start, 7 the
supervisor went away, 10 deliberate crash, 11 an op's outcome is unknown, 12 the producer or
consumer is unusable, 13 the consumer could not rewind after an abort.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import random
import signal
import sys
import threading
from dataclasses import asdict
from time import monotonic_ns
from types import FrameType
from typing import Any, Final

from history import OpType, Recorder
from workloads.clientinfo import error_info, warn
from workloads.clients import (
    REBALANCE_EVENTS,
    Calls,
    ClientError,
    Exit,
    TxnDelay,
    announce_library,
    make_clients,
    subscribe,
)
from workloads.queue.config import (
    EXIT_BAD_CONFIG,
    EXIT_CRASH,
    EXIT_INIT,
    EXIT_OK,
    EXIT_ORPHANED,
    EXIT_REWIND,
    EXIT_UNCERTAIN,
    EXIT_UNUSABLE,
    OP_FS,
    SUB_VIAS,
    VALUE_STRIDE,
    BadConfig,
    ClientConfig,
    decode_value,
)

Mop = list[Any]

#: How a rebalance event is named in a completion's ``rebalance_log`` (Jepsen's words).
_REBALANCE_TYPES: Final = dict(zip(REBALANCE_EVENTS, ("assigned", "revoked", "lost"), strict=True))


def _timeout(stage: str, message: str) -> ClientError:
    return ClientError(
        {
            "stage": stage,
            "code": "TIMED_OUT",
            "message": message,
            "fatal": False,
            "abortable": False,
            "retriable": True,
        }
    )


class QueueClient:
    """The process's state and loop; one thread, so one Recorder."""

    def __init__(self, cfg: ClientConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(f"queue:{cfg.seed}:{cfg.process}")
        self.parent = os.getppid()
        self.stopping: str | None = None
        self.wake = threading.Event()
        started = monotonic_ns()
        end = started + int(cfg.time_limit * 1e9)
        if cfg.end_monotonic_ns is not None:
            end = min(end, cfg.end_monotonic_ns)
        self.end_ns = end
        self.next_value = 0
        self.producer: Any = None
        self.consumer: Any = None
        self.assigned: set[int] = set()
        self.subscribed = False
        self.rebalance_log: list[dict[str, Any]] = []
        self.calls = Calls(f"process {cfg.process}", cfg.op_timeout_s, floor_s=0.5, wake=self.wake)
        #: ``--txn-delay-ms``: between micro-ops, before a transaction's offsets and commit;
        #: a stop request cuts it short.
        self.delay = TxnDelay(cfg.txn_delay_ms, f"{cfg.seed}:{cfg.process}", self.wake.wait)
        self.rec = Recorder(
            cfg.history_path,
            cfg.process,
            meta={
                "workload": "queue",
                "role": "client",
                "pid": os.getpid(),
                "config": asdict(cfg),
            },
        )

    # --- signals -----------------------------------------------------------------------

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        # Only a flag: the op in progress completes (commit or abort) before the loop exits.
        self.stopping = "sigterm" if signum == signal.SIGTERM else "sigint"
        self.wake.set()

    # --- clients -----------------------------------------------------------------------

    def _make_clients(self) -> None:
        cfg = self.cfg
        self.producer, self.consumer = make_clients(
            cfg,
            "queue",
            cfg.process,
            cfg.transactional_id if cfg.txn else None,
            read_committed=cfg.read_committed,
            group_protocol=cfg.group_protocol,
            producer=cfg.producer_settings(),
            settings=cfg.client_config,
        )
        if cfg.txn:
            try:
                self.calls.bounded("init", self.producer.init_transactions, cfg.op_timeout_s)
            except Exception as exc:
                raise Exit(EXIT_INIT, f"init_transactions failed: {exc}") from None

    def _close(self) -> None:
        self.calls.close(self.consumer, self.producer)

    # --- the generator -----------------------------------------------------------------

    def _value(self) -> int:
        n = self.next_value
        if n >= VALUE_STRIDE:
            raise Exit(EXIT_OK, "value space exhausted")
        self.next_value += 1
        return self.cfg.process * VALUE_STRIDE + n

    def _keys(self) -> list[int]:
        k = self.cfg.keys
        return sorted(self.rng.sample(range(k), self.rng.randint(1, k)))

    def next_op(self, first: bool) -> tuple[str, Any]:
        """Jepsen's mix: mostly send/poll/txn over random keys, sometimes a consumer change or
        a crash. The first op always sets up the consumer, or its polls would read nothing."""
        cfg, rng = self.cfg, self.rng
        if first:
            return cfg.sub_via, self._keys()
        r = rng.random()
        if r < cfg.crash_p:
            return "crash", None
        if r < cfg.crash_p + cfg.sub_p:
            return cfg.sub_via, self._keys()
        kinds = [f for f in OP_FS if cfg.weights.get(f, 0) > 0]
        f = rng.choices(kinds, [cfg.weights[k] for k in kinds])[0]
        if f == "poll":
            return f, [["poll"]]
        if f == "send":
            n = rng.randint(1, cfg.max_txn_len)
            return f, [["send", rng.randrange(cfg.keys), self._value()] for _ in range(n)]
        n = rng.randint(2, cfg.max_txn_len)
        kinds_of = ["send", "poll"] + [rng.choice(("send", "poll")) for _ in range(n - 2)]
        rng.shuffle(kinds_of)
        mops: list[Mop] = [
            ["send", rng.randrange(cfg.keys), self._value()] if m == "send" else ["poll"]
            for m in kinds_of
        ]
        return f, mops

    # --- micro-ops ---------------------------------------------------------------------

    def _send(self, k: int, v: int) -> int | None:
        """Produce one record and wait for its acknowledgement: Jepsen's sends are synchronous,
        so the offset is known before the next micro-op runs."""
        from confluent_kafka import KafkaError, KafkaException

        box: list[tuple[Any, Any]] = []

        def delivered(err: Any, msg: Any) -> None:
            box.append((err, msg))

        try:
            self.producer.produce(
                self.cfg.topic, value=str(v).encode(), partition=k, on_delivery=delivered
            )
        except BufferError as exc:
            raise ClientError(error_info(exc, "send")) from None
        except KafkaException as exc:
            raise ClientError(error_info(exc, "send")) from None
        self.producer.flush(self.cfg.op_timeout_s)
        if not box:
            raise _timeout("send", f"no acknowledgement within {self.cfg.op_timeout_s}s")
        err, msg = box[0]
        if err is not None:
            assert isinstance(err, KafkaError)
            raise ClientError(error_info(KafkaException(err), "send"))
        offset = msg.offset()
        return offset if offset is not None and offset >= 0 else None

    def _poll(self) -> dict[str, list[list[Any]]]:
        """One consumer poll: records per key in offset order (what Kafka returned)."""
        from confluent_kafka import KafkaError, KafkaException

        try:
            msgs = self.consumer.consume(self.cfg.max_poll_records, self.cfg.poll_ms / 1000)
        except (KafkaException, RuntimeError) as exc:
            raise ClientError(error_info(exc, "poll")) from None
        out: dict[str, list[list[Any]]] = {}
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal():
                    raise ClientError(error_info(KafkaException(err), "poll"))
                warn(f"process {self.cfg.process}: consumer event: {err}")
                continue
            if m.topic() != self.cfg.topic:
                continue
            out.setdefault(str(m.partition()), []).append([m.offset(), decode_value(m.value())])
        return out

    # --- rebalance callbacks -----------------------------------------------------------

    def _rebalanced(self, event: str, partitions: list[Any]) -> None:
        keys = sorted(tp.partition for tp in partitions if tp.topic == self.cfg.topic)
        self.rebalance_log.append({"type": _REBALANCE_TYPES[event], "keys": keys})

    # --- recording ---------------------------------------------------------------------

    def _complete(self, type_: OpType, f: str, value: Any, error: Any = None) -> None:
        extra: dict[str, Any] = {}
        if self.rebalance_log:
            extra["rebalance_log"] = self.rebalance_log
            self.rebalance_log = []
        self.rec.record(type_, f, value, error, extra)

    # --- ops ---------------------------------------------------------------------------

    def perform(self, f: str, value: Any) -> None:
        """Run one op, recording invoke and completion; raises :class:`Exit` to end."""
        self.rebalance_log = []
        self.rec.invoke(f, value)
        if f == "crash":
            self._complete("info", f, value, {"code": "crash", "message": "deliberate crash"})
            raise Exit(EXIT_CRASH, "crash")
        if f in SUB_VIAS:
            self._change_consumer(f, value)
        elif self.cfg.txn:
            self._transaction(f, value)
        else:
            self._plain(f, value)

    def _change_consumer(self, f: str, keys: list[int]) -> None:
        from confluent_kafka import TopicPartition

        topic = self.cfg.topic
        try:
            if f == "assign":
                new = set(keys)
                # Incremental, so partitions that stay assigned keep their position, like the
                # Java client's assign(); a plain assign() would reset them to the committed
                # offset and make the consumer re-read (a nonmonotonic poll it never did).
                removed, added = self.assigned - new, new - self.assigned
                if removed:
                    self.consumer.incremental_unassign(
                        [TopicPartition(topic, p) for p in sorted(removed)]
                    )
                self.assigned -= removed
                if added:
                    self.consumer.incremental_assign(
                        [TopicPartition(topic, p) for p in sorted(added)]
                    )
                self.assigned |= added
            elif not self.subscribed:
                # Every key lives in the one topic: subscribing to it is what "subscribe to
                # these keys" means, and re-subscribing to the same topic changes nothing.
                subscribe(self.consumer, [topic], self._rebalanced)
                self.subscribed = True
        except Exception as exc:
            # Possibly half applied (unassigned but not yet assigned): outcome unknown.
            self._complete("info", f, keys, error_info(exc, f))
            raise Exit(EXIT_UNCERTAIN, f"{f} failed") from None
        self._complete("ok", f, keys)

    def _run_mops(self, mops: list[Mop], done: list[Mop], first: dict[int, int]) -> None:
        """Execute micro-ops in order, writing each completed form into ``done`` as it runs,
        so an op that fails half-way still records what it did (Jepsen's mutable value)."""
        for i, mop in enumerate(mops):
            if i:
                self.delay()
            if mop[0] == "send":
                _, k, v = mop
                done[i] = ["send", k, [self._send(k, v), v]]
            else:
                result = self._poll()
                done[i] = ["poll", result]
                for key, pairs in result.items():
                    first.setdefault(int(key), pairs[0][0])

    def _plain(self, f: str, mops: list[Mop]) -> None:
        """Without transactions: sends are acknowledged one by one, polls just read."""
        from confluent_kafka import TopicPartition

        done: list[Mop] = [list(m) for m in mops]
        first: dict[int, int] = {}
        try:
            self._run_mops(mops, done, first)
        except ClientError as exc:
            # A failed send may still have been written (timeouts); earlier sends were.
            self._complete("info", f, done, exc.info)
            raise Exit(EXIT_UNCERTAIN, "op outcome unknown") from None
        if self.subscribed and first:
            # Jepsen commits a subscribed consumer's position after each poll outside
            # transactions, so the group resumes there after a rebalance.
            positions = [
                TopicPartition(self.cfg.topic, k, off + 1) for k, off in _last_offsets(done).items()
            ]
            try:
                self.consumer.commit(offsets=positions, asynchronous=False)
            except Exception as exc:
                # The reads happened whatever the commit did; Jepsen records such an op ok.
                warn(f"process {self.cfg.process}: offset commit after poll failed: {exc}")
        self._complete("ok", f, done)

    def _transaction(self, f: str, mops: list[Mop]) -> None:
        """One op = one Kafka transaction: begin, micro-ops, offsets, commit (or abort)."""
        from confluent_kafka import KafkaException, TopicPartition

        cfg = self.cfg
        done: list[Mop] = [list(m) for m in mops]
        first: dict[int, int] = {}
        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            self._complete("fail", f, done, error_info(exc, "begin"))
            raise Exit(EXIT_UNUSABLE, "begin_transaction failed") from None
        try:
            self._run_mops(mops, done, first)
            last = _last_offsets(done)
            if last:
                positions = [TopicPartition(cfg.topic, k, off + 1) for k, off in last.items()]
                self.delay()
                self.calls.call(
                    "send-offsets",
                    lambda t: self.producer.send_offsets_to_transaction(
                        positions, self.consumer.consumer_group_metadata(), t
                    ),
                )
        except ClientError as exc:
            # The commit was never requested, so the transaction cannot have committed.
            self._abort(f, done, first, exc.info, committing=False)
            return
        if cfg.abort_p > 0 and self.rng.random() < cfg.abort_p:
            reason = {"code": "deliberate-abort", "message": "aborted on purpose"}
            self._abort(f, done, first, reason, committing=False)
            return
        self.delay()
        try:
            self.calls.call("commit", self.producer.commit_transaction)
        except ClientError as exc:
            if exc.info.get("abortable") and not exc.info.get("fatal"):
                self._abort(f, done, first, exc.info, committing=True)
                return
            # Fatal (e.g. fenced) or still timing out: the commit may or may not have landed.
            self._complete("info", f, done, exc.info)
            raise Exit(EXIT_UNCERTAIN, "commit outcome unknown") from None
        self._complete("ok", f, done)

    def _abort(
        self,
        f: str,
        done: list[Mop],
        first: dict[int, int],
        reason: dict[str, Any],
        *,
        committing: bool,
    ) -> None:
        """Abort, record the outcome, and rewind the consumer to where the op started."""
        try:
            if self.calls.hung is not None:
                # A transactional call is still running: an abort would only conflict with it.
                raise ClientError(
                    {"stage": "abort", "code": "NOT_ATTEMPTED", "hung": self.calls.hung}
                )
            self.calls.call("abort", self.producer.abort_transaction)
        except ClientError as exc:
            info = {**reason, "abort_error": exc.info}
            if committing:
                # A commit was requested and the abort did not go through: unknown.
                self._complete("info", f, done, info)
                raise Exit(EXIT_UNCERTAIN, "abort after commit failed") from None
            # No commit was ever requested: the coordinator can only abort it (on timeout or
            # when fenced), so the failure is definite; but this producer is unusable.
            self._complete("fail", f, done, info)
            raise Exit(EXIT_UNUSABLE, "abort failed") from None
        self._complete("fail", f, done, reason)
        if reason.get("fatal"):
            raise Exit(EXIT_UNUSABLE, "fatal client error")
        self._rewind(first)

    def _rewind(self, first: dict[int, int]) -> None:
        """After an abort the polled records were not consumed: seek back to the first offset
        this op read from each partition, so the next poll re-reads them (the checker holds an
        aborted consumer to its last committed position)."""
        from confluent_kafka import TopicPartition

        if not first:
            return
        try:
            current = {tp.partition for tp in self.consumer.assignment()}
            for k, off in sorted(first.items()):
                if k in current:
                    self.consumer.seek(TopicPartition(self.cfg.topic, k, off))
        except Exception as exc:
            warn(f"process {self.cfg.process}: rewind failed: {exc}")
            raise Exit(EXIT_REWIND, "rewind failed") from None

    # --- the loop ----------------------------------------------------------------------

    def _pace(self, due_ns: int) -> None:
        """Rate limiting, not synchronisation: wait for the op's slot (or a stop request)."""
        delay = (due_ns - monotonic_ns()) / 1e9
        if delay > 0:
            self.wake.wait(delay)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        code, reason = EXIT_OK, "time limit"
        try:
            self._make_clients()
            interval = int(1e9 / self.cfg.rate) if self.cfg.rate > 0 else 0
            due = monotonic_ns()
            first = True
            while True:
                if self.stopping is not None:
                    reason = self.stopping
                    break
                if os.getppid() != self.parent:
                    raise Exit(EXIT_ORPHANED, "orphaned")
                if monotonic_ns() >= self.end_ns:
                    break
                self._pace(due)
                if self.stopping is not None or monotonic_ns() >= self.end_ns:
                    continue
                due = max(due + interval, monotonic_ns() - interval)
                f, value = self.next_op(first)
                first = False
                self.perform(f, value)
        except Exit as stop:
            code, reason = stop.code, stop.reason
        if code != EXIT_OK:
            warn(f"process {self.cfg.process}: exiting with {code}: {reason}")
        if code != EXIT_ORPHANED:
            self._close()
        self.rec.close()
        return code


def _last_offsets(done: list[Mop]) -> dict[int, int]:
    """The highest offset each key's polls returned in this op: what it consumed."""
    last: dict[int, int] = {}
    for mop in done:
        if mop[0] == "poll" and len(mop) == 2:
            for key, pairs in mop[1].items():
                if pairs:
                    k = int(key)
                    last[k] = max(last.get(k, -1), pairs[-1][0])
    return last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="ClientConfig as JSON")
    args = parser.parse_args(argv)
    try:
        cfg = ClientConfig.from_json(args.config)
        cfg.validate()
    except (BadConfig, json.JSONDecodeError, TypeError) as exc:
        print(f"queue_client: bad configuration: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    announce_library()
    client = QueueClient(cfg)
    return client.calls.exit(client.run())


if __name__ == "__main__":
    # A client stuck inside a client-library call cannot explain itself; SIGUSR1 (sent by the
    # supervisor to a client still running after the time limit) dumps every thread's stack to
    # stderr, i.e. the client's log. Registered first, so SIGUSR1 never kills a client.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    sys.exit(main())
