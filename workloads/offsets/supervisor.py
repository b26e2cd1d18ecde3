"""The offsets workload's client side: the committers and the end of a run.

K committers (``workloads.offsets.committer``), one consumer group each, are kept alive one
slot each: a committer killed by a fault is replaced under a new process id and goes on
committing for the same group. When the faults have healed the stop file appears: each
committer reads its group's committed offset once more and exits.

Layout of a run directory: ``processes/<process>.jsonl`` (committers),
``processes/supervisor.jsonl`` (spawns, exits, the end), ``logs/committer-<process>.log``.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from common.errors import HarnessError
from workloads.offsets.committer import EXIT_OK
from workloads.offsets.options import OffsetsOptions
from workloads.processes import Child, Supervisor, child_env, spawn_module
from workloads.spec import Figures, Option, Variant, WorkloadSpec

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster

#: A committer lives at most this long past the time limit and the final read.
COMMITTER_SLACK_S = 120.0


class OffsetsWorkload(Supervisor):
    """One offsets run's committers. Use as a context manager so none outlives it."""

    workload_name = "offsets"

    def __init__(
        self, options: OffsetsOptions, cluster: Cluster, run_dir: Path, time_limit: float
    ) -> None:
        options.validate()
        self.options = options
        self.cluster = cluster
        self.time_limit = time_limit
        super().__init__(run_dir)
        self.stop_path = self.run_dir / "offsets-stop"
        #: Each slot's group (:meth:`setup` places them when ``one_coordinator``).
        self.group_ids = [options.group_of(slot) for slot in range(options.groups)]

    def setup(self) -> None:
        """The topic whose offsets the groups commit (Kafka refuses commits for a topic it
        does not know)."""
        o = self.options
        self.cluster.ensure_topic(o.input_topic, o.partitions, timeout=60)
        if o.one_coordinator:
            self.group_ids = one_coordinator_groups(self.cluster, f"{o.topic}-g", o.groups)

    def _left_s(self) -> float:
        return self.time_limit + self.options.final_timeout_s + COMMITTER_SLACK_S

    def _spawn(self, slot: int, replaces: int | None = None) -> Child:
        with self._lock:
            process = self._allocate_process()
            cfg = self.options.committer_config(
                process,
                slot,
                self.group_ids[slot],
                self.cluster.bootstrap,
                str(self.processes_dir / f"{process}.jsonl"),
                str(self.stop_path),
                self._left_s(),
            )
            env = child_env(self.cluster.env)

            def start(logf: IO[bytes], gid: int | None) -> subprocess.Popen[bytes]:
                args = ["--config", json.dumps(cfg)]
                return spawn_module("workloads.offsets.committer", args, env, logf, gid)

            log_path = self.logs_dir / f"committer-{process}.log"
            return self._launch(slot, process, replaces, None, log_path, start)

    def _may_respawn(self) -> bool:
        return not self.stop_path.exists()

    def start(self) -> None:
        """Start the committers and the thread that replaces the ones that exit."""
        if self._monitor is not None:
            raise HarnessError("committers already started")
        o = self.options
        self._start_children(o.groups, "offsets-supervisor")

    def finish(self) -> bool:
        """Ask every committer for its final read and wait for them to exit; True if each
        exited on its own (its final read done) within the final timeout."""
        self.stop_path.touch()
        self._record("invoke", "final", {})
        self._stop_watching()
        deadline = time.monotonic() + self.options.final_timeout_s + 5
        while time.monotonic() < deadline and any(c.proc.poll() is None for c in self._unreaped()):
            time.sleep(0.2)  # the committers read and exit; a condition, polled
        own = {c.process: c.proc.poll() for c in self._unreaped()}
        self._stop_children(10.0, "processes")
        done = all(code == EXIT_OK for code in own.values())
        self._record("ok", "final", {"exited": [[p, c] for p, c in own.items()], "done": done})
        return done

    def close(self) -> None:
        self._stop_children(10.0, "processes")
        self._close_files()


def one_coordinator_groups(cluster: Cluster, prefix: str, count: int) -> list[str]:
    """``count`` group ids ``<prefix><i>``, for the smallest i, that the
    ``__consumer_offsets`` partition of ``<prefix>0`` holds."""
    log = "__consumer_offsets"
    home = cluster.coordinator_partition(log, f"{prefix}0")
    names = (f"{prefix}{i}" for i in itertools.count())
    placed = (g for g in names if cluster.coordinator_partition(log, g) == home)
    return list(itertools.islice(placed, count))


def _commits(op: Any) -> int | None:
    return 1 if op.get("f") == "commit" and isinstance(op.get("process"), int) else None


# --- the workload's declaration (harness.run.workloads composes it with its driver) -----


SPEC = WorkloadSpec(
    name="offsets",
    description="consumer groups commit offsets with a synchronous commit and read each one "
    "back: an acknowledged commit must never read back lower (KAFKA-20634)",
    options_type=OffsetsOptions,
    cli=(
        Option("--offsets-groups", "groups", "committers, one consumer group each", int),
        Option(
            "--offsets-one-coordinator",
            "one_coordinator",
            "name the groups so that one broker coordinates them all",
            action="store_true",
        ),
        Option("--offsets-interval-ms", "interval_ms", "pause between a committer's rounds", int),
        Option(
            "--client-config",
            "client_config",
            "a consumer setting of the committers (repeatable)",
            action="settings",
        ),
    ),
    checker_suites=("offsets",),
    isolate=lambda tag: {"topic": f"offsets-{tag}"},
    needs_kafka=lambda o: None,
    figures=Figures(
        throughput=lambda: _commits,
        latency_fs=("commit", "read"),
        throughput_label="commits/s",
    ),
    variants=(Variant("correct"),),
    load_started=lambda op: isinstance(op["process"], int) and op["f"] == "commit",
)
