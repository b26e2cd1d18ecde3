"""The share workload's client side: the group's settings, the members, the drain, the final
state.

K members (``workloads.share.member``, or the client's ``start.share`` from its manifest)
are kept alive, one slot each: a member killed by a fault is replaced under a new process id,
as Jepsen replaces a crashed client. The seeder (``workloads.seeder``) feeds the input over
the time limit while the faults act. Once they are healed the members are asked to drain
(accept everything from then on) until every committed input was accepted or archived, or
until the drain's deadline; then they are stopped, and the final state is recorded under
process ``"final"``: the share group's start offset per partition beside the input's ends
(``share-state``), and the output read to its end (``read``).

Layout of a run directory: ``processes/<process>.jsonl`` (members), ``processes/seeder.jsonl``,
``processes/supervisor.jsonl`` (spawns, exits), ``processes/share-monitor.jsonl`` (the start
offsets every few seconds), ``processes/final.jsonl``, ``logs/member-<process>.log``.
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from common.errors import HarnessError
from common.kafkaconf import secured
from history import Recorder
from workloads import client_registry, finalreads
from workloads.processes import Child, Supervisor, child_env, spawn_command
from workloads.seeder import SeedResult, seed_in_child
from workloads.share.options import ISOLATIONS, OFFSET_RESETS, VARIANTS, ShareOptions
from workloads.share.report import FIGURES, REPORT
from workloads.share.state import (
    StartOffsetMonitor,
    broker_setting,
    configure_group,
    share_start_offsets,
)
from workloads.spec import Option, Variant, WorkloadSpec

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster

log = logging.getLogger("workloads.share.supervisor")

#: How often the drain looks at what is left.
DRAIN_POLL_S = 1.0
#: A member lives at most this long past the load and the drain (a safety stop of its own).
MEMBER_SLACK_S = 120.0
#: The group's delivery limit, and the brokers' one that stands for every group where Kafka
#: has no per-group setting (4.2).
DELIVERY_LIMIT_KEY = "share.delivery.count.limit"
BROKER_DELIVERY_LIMIT = "group.share.delivery.count.limit"
#: How long the members may take to be delivered a probe from every input partition before
#: the seeder writes, when the group starts at the latest offset; a new probe goes out
#: every ``PROBE_WAIT_S`` until then.
INIT_TIMEOUT_S = 90.0
PROBE_WAIT_S = 3.0


class ShareWorkload(Supervisor):
    """One share run's members. Use as a context manager so no member outlives it."""

    workload_name = "share"

    def __init__(
        self, options: ShareOptions, cluster: Cluster, run_dir: Path, time_limit: float
    ) -> None:
        options.validate()
        self.options = options
        self.cluster = cluster
        self.time_limit = time_limit
        super().__init__(run_dir)
        self.drain_path = self.run_dir / "share-drain"
        self.seed_result: SeedResult | None = None
        self._command: list[str] | None = None
        self.monitor = StartOffsetMonitor(
            cluster,
            options.group_id,
            options.input_topic,
            self.processes_dir / "share-monitor.jsonl",
            options.monitor_s,
        )

    # --- set-up ----------------------------------------------------------------------

    def setup(self) -> None:
        """The input and output topics, and the group's settings before any member joins
        (a share group starts at the latest offset unless told otherwise)."""
        o = self.options
        self.cluster.ensure_topic(o.input_topic, o.partitions, timeout=60)
        self.cluster.ensure_topic(o.output_topic, o.partitions, timeout=60)
        unknown = configure_group(self.cluster.internal_bootstrap, o.group_id, o.group_settings())
        if unknown == [DELIVERY_LIMIT_KEY]:
            # Kafka 4.2: the limit is the brokers' own, the same for every group.
            got = broker_setting(self.cluster.internal_bootstrap, BROKER_DELIVERY_LIMIT)
            if got != str(o.delivery_limit):
                raise HarnessError(
                    f"this Kafka has no per-group {DELIVERY_LIMIT_KEY} and its brokers' "
                    f"{BROKER_DELIVERY_LIMIT} is {got}: run with --delivery-limit {got}, or "
                    f"--broker-config {BROKER_DELIVERY_LIMIT}={o.delivery_limit}"
                )
        elif unknown:
            raise HarnessError(f"the brokers do not know the group settings {unknown}")

    # --- members ---------------------------------------------------------------------

    def _spawn(self, slot: int, replaces: int | None = None) -> Child:
        with self._lock:
            process = self._allocate_process()
            left = self.time_limit + self.options.drain_timeout_s + MEMBER_SLACK_S
            cfg = self.options.member_config(
                process,
                slot,
                self.cluster.bootstrap,
                str(self.processes_dir / f"{process}.jsonl"),
                str(self.drain_path),
                left,
            )
            env = child_env(self.cluster.env)

            def start(logf: IO[bytes], gid: int | None) -> subprocess.Popen[bytes]:
                assert self._command is not None
                argv = [*self._command, "--config", json.dumps(cfg)]
                return spawn_command(argv, env, logf, gid)

            log_path = self.logs_dir / f"member-{process}.log"
            return self._launch(slot, process, replaces, None, log_path, start)

    def start(self) -> None:
        """Start the members and the thread that replaces the ones that exit."""
        if self._monitor is not None:
            raise HarnessError("members already started")
        manifest = client_registry.get(self.options.client)
        python = self.options.client_python
        self._command = client_registry.command(manifest, "share", self.cluster, python)
        self._start_children(self.options.members, "share-supervisor")
        if self.options.offset_reset == "latest":
            self.probe()
        self.monitor.start()

    def probe(self) -> None:
        """Under ``latest``: write a probe value to each input partition until a member has
        been delivered one from it, so every value the seeder writes afterwards is owed a
        delivery (a share partition that delivered a record has started at or before it).

        Kafka's own view does not tell: ``kafka-share-groups.sh`` shows no start offset for
        a share partition until something was acknowledged. Probes are ``probe`` ops of the
        supervisor (``[value, partition, offset]``); the checkers owe them nothing.
        """
        from confluent_kafka import Producer

        o = self.options
        producer = Producer(
            secured({"bootstrap.servers": self.cluster.bootstrap, "acks": "all", "log_level": 0})
        )
        left = set(range(o.partitions))
        deadline = time.monotonic() + INIT_TIMEOUT_S
        round_ = 0
        while left and time.monotonic() < deadline:
            entries: list[list[Any]] = [[f"probe-{p}-{round_}", p, None] for p in sorted(left)]
            self._record("invoke", "probe", {"values": [e[:2] for e in entries]})
            for entry in entries:

                def landed(err: Any, msg: Any, entry: list[Any] = entry) -> None:
                    if err is None:
                        entry[2] = msg.offset()

                producer.produce(
                    o.input_topic, value=entry[0].encode(), partition=entry[1], on_delivery=landed
                )
            producer.flush(10)
            self._record("ok", "probe", {"values": entries})
            round_ += 1
            until = time.monotonic() + PROBE_WAIT_S
            while left and time.monotonic() < until:
                left -= probed(self.processes_dir)
                time.sleep(0.2)  # members write their histories; a condition, polled
        if left:
            raise HarnessError(
                f"no member was delivered a probe of {o.input_topic} partitions "
                f"{sorted(left)} within {INIT_TIMEOUT_S:.0f}s"
            )

    def seed(self, seconds: float, stop: threading.Event | None = None) -> SeedResult:
        """The seeder, its sends spread over ``seconds`` (the faults act meanwhile)."""
        self.seed_result = seed_in_child(
            self.cluster, self.processes_dir, self.logs_dir, self.options, seconds, stop
        )
        return self.seed_result

    def drain(self) -> bool:
        """Ask every member (the live ones and their successors) to accept all it gets, and
        wait until no committed input is left, or until the drain's deadline: True if
        nothing was left."""
        self.drain_path.touch()
        self._record("invoke", "drain", {})
        deadline = time.monotonic() + self.options.drain_timeout_s
        left = outstanding(self.processes_dir, self.options.delivery_limit)
        while left and time.monotonic() < deadline:
            time.sleep(DRAIN_POLL_S)  # members write their histories; a condition, polled
            left = outstanding(self.processes_dir, self.options.delivery_limit)
        value = {"left": len(left), "examples": sorted(left)[:5]}
        if left:
            self._record("info", "drain", value, {"code": "TIMED_OUT", "message": "inputs left"})
        else:
            self._record("ok", "drain", value)
        return not left

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        """Arm a moment in a live member: the moment goes in a file beside its history, which
        the member looks at at each of its moments (no signal: a JVM must not get SIGUSR2);
        an empty ``at`` disarms. A stale fired file goes first, so :meth:`fired_hook`
        reports only this arming."""
        if instance not in self.processor_pids():
            raise HarnessError(f"member {instance} is not running")
        history = self.processes_dir / f"{instance}.jsonl"
        Path(f"{history}.fired").unlink(missing_ok=True)
        body = json.dumps({"at": at, "action": action, "delay_ms": delay_ms}) if at else ""
        tmp = Path(f"{history}.arm.tmp")
        tmp.write_text(body)
        tmp.replace(f"{history}.arm")

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        """The armed moment that fired in ``instance`` (at, action, round as ``txn``, pid)."""
        try:
            return json.loads(Path(f"{self.processes_dir / str(instance)}.jsonl.fired").read_text())
        except (OSError, ValueError):
            return None

    def stop_members(self, timeout: float = 30.0) -> dict[int, int | None]:
        return self._stop_children(timeout, "processes")

    # --- the final state ------------------------------------------------------------------

    def record_final(self, drained: bool) -> bool:
        """``share-state`` and the output's reads under process ``"final"``; True if every
        observation completed."""
        o = self.options
        internal = self.cluster.internal_bootstrap
        meta = {"workload": "share", "role": "final"}
        # The input may have more partitions than it started with (``add-partitions``).
        try:
            inputs = max(o.partitions, self.cluster.partition_count(o.input_topic))
        except Exception:  # the metadata is not to be had: the count known so far
            inputs = o.partitions
        with Recorder(self.processes_dir / "final.jsonl", "final", meta) as rec:
            ends = finalreads.record_watermarks(rec, internal, o.input_topic, inputs)
            rec.invoke("share-state", {"group": o.group_id})
            try:
                starts = share_start_offsets(self.cluster, o.group_id, o.input_topic)
            except HarnessError as exc:
                error = {"code": "QUERY_FAILED", "message": str(exc)}
                rec.info("share-state", {"group": o.group_id}, error)
                starts = None
            if starts is not None:
                lso = {r["partition"]: r["lso"] for r in ends or []}
                parts = [
                    {"partition": p, "start": starts.get(p), "end": lso.get(p)}
                    for p in range(inputs)
                ]
                value = {"group": o.group_id, "partitions": parts, "drained": drained}
                rec.ok("share-state", value)
            finalreads.record_reads(rec, internal, o.output_topic, o.partitions)
        return ends is not None and starts is not None

    def finish(self) -> bool:
        """After the load and the faults: drain, stop the members, record the final state."""
        drained = self.drain()
        codes = self.stop_members()
        self.monitor.stop()
        log.info("share members stopped: %s", codes)
        observed = self.record_final(drained)
        return drained and observed

    def close(self) -> None:
        """Idempotent: no member outlives the workload, every file is closed."""
        self._stop_children(5.0, "processes")
        self.monitor.stop()
        self._close_files()


# --- what the drain waits for ----------------------------------------------------------


def _ops(path: Path) -> Iterator[dict[str, Any]]:
    """The ops of a history file being written (a torn last line skipped)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return
    for line in lines[1:]:
        try:
            op = json.loads(line)
        except ValueError:
            continue
        if isinstance(op, dict) and op.get("type") in ("invoke", "ok", "info", "fail"):
            yield op


def _taken(ops: Iterator[dict[str, Any]], delivery_limit: int) -> Iterator[str]:
    """The values one member's ops may have settled: accepted or rejected with the broker's
    answer, or with no answer (a commit that raised, or a member killed inside it: the
    acknowledgement may have been taken, and then the record never comes back), or
    received at the delivery limit."""
    pending: list[list[Any]] = []
    for op in ops:
        value = op.get("value") or {}
        if op["f"] == "ack" and op["type"] == "invoke":
            pending = value.get("acks", [])
        elif op["f"] == "ack" and op["type"] == "ok":
            pending = []
            yield from (a[2] for a in value.get("acks", []) if a[3] != "release" and a[4] is None)
        elif op["f"] == "ack":
            yield from (a[2] for a in pending if a[3] != "release")
            pending = []
        elif op["f"] == "poll" and op["type"] == "ok":
            yield from (r[2] for r in value.get("records", []) if r[3] >= delivery_limit)
    yield from (a[2] for a in pending if a[3] != "release")


def probed(processes_dir: Path) -> set[int]:
    """The input partitions some member was delivered a probe value from."""
    found: set[int] = set()
    for path in processes_dir.glob("[0-9]*.jsonl"):
        for op in _ops(path):
            if op["f"] == "poll" and op["type"] == "ok":
                records = (op.get("value") or {}).get("records", [])
                found.update(r[0] for r in records if str(r[2]).startswith("probe-"))
    return found


def outstanding(processes_dir: Path, delivery_limit: int) -> set[str]:
    """Committed inputs (the seeder's acknowledged values) that no member's ops may have
    settled yet (:func:`_taken`): what the drain waits for. The checkers judge the run; this
    only says when to stop waiting."""
    committed: set[str] = set()
    for op in _ops(processes_dir / "seeder.jsonl"):
        if op["f"] == "send" and op["type"] in ("ok", "info"):
            committed.update(v for v, _p, off in op["value"]["values"] if off is not None)
    for path in processes_dir.glob("[0-9]*.jsonl"):
        committed.difference_update(_taken(_ops(path), delivery_limit))
    return committed


# --- the workload's declaration (harness.run.workloads composes it with its driver) -----


SPEC = WorkloadSpec(
    name="share",
    description="members of one share group (KIP-932): acquisitions, locks, acknowledgements",
    options_type=ShareOptions,
    cli=(
        Option("--variant", "variant", choices=VARIANTS),
        Option(
            "--client",
            "client",
            "the client under test (its manifest: workloads/manifests/CLIENT.toml)",
            choices=client_registry.names("share"),
        ),
        Option("--processors", "members", "members of the share group", int, metavar="K"),
        Option("--partitions", "partitions", "input and output partitions", int, metavar="P"),
        Option("--values", "values", "values to seed", int, metavar="N"),
        Option("--lock-ms", "lock_ms", "the group's record lock duration", int, metavar="MS"),
        Option("--delivery-limit", "delivery_limit", "the group's delivery count limit", int),
        Option("--share-isolation", "isolation", "the group's isolation", choices=ISOLATIONS),
        Option(
            "--share-offset-reset",
            "offset_reset",
            "where a new share partition starts (latest: members initialise every partition "
            "before the first write)",
            choices=OFFSET_RESETS,
        ),
        Option(
            "--share-monitor-s",
            "monitor_s",
            "seconds between looks at the group's start offsets (0: the final one only)",
            float,
            metavar="S",
        ),
        Option("--release-p", "release_p", "chance a record is released", float, metavar="P"),
        Option("--reject-p", "reject_p", "chance a record is rejected", float, metavar="P"),
        Option("--max-records", "max_records", "records a poll may return", int, metavar="N"),
        Option("--process-ms", "process_ms", "the work of one poll's records", int, metavar="MS"),
        Option(
            "--client-config",
            "client_config",
            "a share consumer setting of the members (repeatable)",
            action="settings",
        ),
    ),
    checker_suites=("share",),
    isolate=lambda tag: {"topic": f"share-{tag}"},
    needs_kafka=lambda o: ("4.2.0", "the share workload (share groups are GA from 4.2)"),
    figures=FIGURES,
    variants=(
        Variant("correct"),
        Variant("accept-before-process", {"variant": "accept-before-process"}, expect="lost"),
    ),
    load_started=lambda op: isinstance(op["process"], int) and op["f"] == "poll",
    report=REPORT,
)
