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
``processes/supervisor.jsonl`` (spawns, exits), ``processes/final.jsonl``,
``logs/member-<process>.log``.
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
from history import Recorder
from workloads import client_registry, finalreads
from workloads.processes import Child, Supervisor, child_env, spawn_command
from workloads.seeder import SeedResult, seed_in_child
from workloads.share.options import ISOLATIONS, VARIANTS, ShareOptions
from workloads.share.report import FIGURES, REPORT
from workloads.spec import Option, Variant, WorkloadSpec

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster

log = logging.getLogger("workloads.share.supervisor")

#: How often the drain looks at what is left.
DRAIN_POLL_S = 1.0
#: A member lives at most this long past the load and the drain (a safety stop of its own).
MEMBER_SLACK_S = 120.0


class ShareWorkload(Supervisor):
    """One share run's members. Use as a context manager so no member outlives it."""

    min_lifetime_s = 1.0
    monitor_interval_s = 0.1

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

    def __enter__(self) -> ShareWorkload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _supervisor_meta(self) -> dict[str, Any]:
        return {"workload": "share", "role": "supervisor", **self.options.to_dict()}

    # --- set-up ----------------------------------------------------------------------

    def setup(self) -> None:
        """The input and output topics, and the group's settings before any member joins
        (a share group starts at the latest offset unless told otherwise)."""
        o = self.options
        self.cluster.ensure_topic(o.input_topic, o.partitions, timeout=60)
        self.cluster.ensure_topic(o.output_topic, o.partitions, timeout=60)
        configure_group(self.cluster.bootstrap, o.group_id, o.group_settings())

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
        with Recorder(self.processes_dir / "final.jsonl", "final", meta) as rec:
            ends = finalreads.record_watermarks(rec, internal, o.input_topic, o.partitions)
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
                    for p in range(o.partitions)
                ]
                value = {"group": o.group_id, "partitions": parts, "drained": drained}
                rec.ok("share-state", value)
            finalreads.record_reads(rec, internal, o.output_topic, o.partitions)
        return ends is not None and starts is not None

    def finish(self) -> bool:
        """After the load and the faults: drain, stop the members, record the final state."""
        drained = self.drain()
        codes = self.stop_members()
        log.info("share members stopped: %s", codes)
        observed = self.record_final(drained)
        return drained and observed

    def close(self) -> None:
        """Idempotent: no member outlives the workload, every file is closed."""
        self._stop_children(5.0, "processes")
        self._close_files()


# --- what the harness asks of Kafka -------------------------------------------------------


def configure_group(bootstrap: str, group: str, settings: dict[str, str]) -> None:
    """Set a group's dynamic settings (``incrementalAlterConfigs`` on the GROUP resource)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    last: Exception | None = None
    for _attempt in range(5):
        try:
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(timeout=30)
            return
        except Exception as exc:  # a broker still electing: asked again
            last = exc
            time.sleep(1)
    raise HarnessError(f"could not set the share group's settings {sorted(settings)}: {last}")


def share_start_offsets(cluster: Cluster, group: str, topic: str) -> dict[int, int | None]:
    """The group's start offset per partition of ``topic``, as Kafka's own
    ``kafka-share-groups.sh --describe --offsets`` reports it (None: not initialised)."""
    text = cluster.run_tool(
        "ShareGroupCommand",
        "--bootstrap-server",
        cluster.internal_bootstrap,
        "--describe",
        "--group",
        group,
        "--offsets",
    )
    starts: dict[int, int | None] = {}
    for row in _rows(text):
        if row.get("TOPIC") == topic and row.get("PARTITION", "").isdigit():
            start = row.get("START-OFFSET", "-")
            starts[int(row["PARTITION"])] = int(start) if start.lstrip("-").isdigit() else None
    return starts


def _rows(text: str) -> list[dict[str, str]]:
    """The rows of a tool's space-aligned table (the header line names the columns)."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    header = next((i for i, ln in enumerate(lines) if "GROUP" in ln and "TOPIC" in ln), None)
    if header is None:
        return []
    names = lines[header]
    return [dict(zip(names, ln, strict=False)) for ln in lines[header + 1 :]]


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
