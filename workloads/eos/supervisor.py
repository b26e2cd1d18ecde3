"""The eos workload's supervisor: topics, K processors kept alive, hook points, its declaration.

The seeder, the processors' supervision, their signals, the drain and the final reads are
every pipeline's (``workloads.pipeline``); what is the eos workload's own is what a processor
is (a Python processor, its Java or other clients' twin named by a manifest, or Kafka's
TransactionalMessageCopier) and the protocol moments it can be armed at. The harness composes
it with a cluster and (elsewhere) nemeses; this module knows nothing about faults beyond
exposing the processors so a nemesis can kill, pause, resume and arm them.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from common.acls import Acl
from common.errors import HarnessError
from common.procfs import catches_signal
from workloads import client_registry
from workloads.clients import CLIENT_KNOBS, group_broker_settings, group_protocol_needs
from workloads.eos.config import (
    CLIENTS,
    TXN_ID_STRATEGIES,
    VARIANTS,
    EosOptions,
    arm_path,
    fired_path,
)
from workloads.eos.report import REPORT
from workloads.pipeline import PipelineWorkload
from workloads.processes import (
    Child,
    child_env,
    spawn_command,
)
from workloads.seeder import seeded_values
from workloads.spec import Figures, Option, Variant, WorkloadSpec

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster

log = logging.getLogger("workloads.eos.supervisor")


class EosWorkload(PipelineWorkload[EosOptions]):
    """One eos test's workload side. Use as a context manager so processors never outlive it."""

    workload_name = "eos"

    def __init__(self, options: EosOptions, cluster: Cluster, run_dir: Path) -> None:
        super().__init__(options, cluster, run_dir)
        #: What the client's manifest says it is and can do (``workloads/manifests``).
        self.manifest = client_registry.get(options.client)

    # --- set-up ----------------------------------------------------------------------

    def setup(self) -> None:
        """Input and output topics: P partitions, the cluster's replication factor and min
        ISR (the run's ``--replication-factor`` and ``--min-insync-replicas``)."""
        o = self.options
        for topic in (o.input_topic, o.output_topic):
            self.cluster.ensure_topic(topic, o.partitions, timeout=60)

    def _spawn(self, slot: int, replaces: int | None = None) -> Child:
        with self._lock:
            instance = self._allocate_process()
            cfg = self.options.processor_config(
                instance,
                slot,
                self.cluster.bootstrap,
                str(self.processes_dir / f"{instance}.jsonl"),
            )
            if replaces is None:
                cfg.hook = self.options.hooks.get(slot)
            cfg.meta = {"run_dir": str(self.run_dir)}
            cfg.security = self.cluster.client_security
            env = child_env(self.cluster.env)

            def start(logf: IO[bytes], gid: int | None) -> subprocess.Popen[bytes]:
                adapter = client_registry.adapter(self.manifest, "eos")
                if adapter is not None:
                    return adapter.spawn(self, instance, cfg, env, logf, gid)
                assert self._client_command is not None
                argv = [*self._client_command, "--config", cfg.to_json()]
                return spawn_command(argv, env, logf, gid)

            log_path = self.logs_dir / f"processor-{instance}.log"
            return self._launch(slot, instance, replaces, cfg.transactional_id, log_path, start)

    def _processor_command(self) -> list[str] | None:
        """The manifest's ``start.eos`` (None for a client its ``adapter.eos`` spawns)."""
        if client_registry.adapter(self.manifest, "eos") is not None:
            return None
        python = self.options.client_python
        return client_registry.command(self.manifest, "eos", self.cluster, python=python)

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        """Arm a protocol moment in a live processor: it kills or stops itself there.

        The moment goes in a file beside the instance's history and SIGUSR2 tells a Python
        processor to read it (any client whose manifest arms by ``signal``); an empty ``at``
        disarms. A Java processor gets no signal: HotSpot
        uses SIGUSR2 itself (a stray one crashes the JVM), so it looks at the file at each hook
        point instead. A stale fired file is removed first, so :meth:`fired_hook` reports only
        this arming.
        """
        pid = self.processor_pids().get(instance)
        signals = self.manifest.abilities.arm == "signal"
        if pid is None or (signals and not catches_signal(pid, signal.SIGUSR2)):
            raise HarnessError(f"processor instance {instance} cannot be armed yet")
        history = str(self.processes_dir / f"{instance}.jsonl")
        fired_path(history).unlink(missing_ok=True)
        body = json.dumps({"at": at, "action": action, "delay_ms": delay_ms}) if at else ""
        tmp = arm_path(history).with_suffix(".tmp")
        tmp.write_text(body)
        tmp.replace(arm_path(history))
        if signals:
            self._signal(instance, signal.SIGUSR2)

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        """The armed moment that fired in ``instance`` (point, action, txn, pid), or None."""
        try:
            return json.loads(fired_path(str(self.processes_dir / f"{instance}.jsonl")).read_text())
        except (OSError, ValueError):
            return None


# --- the workload's declaration (harness.run.workloads composes it with its driver) -----


def _committed_outputs(op: Mapping[str, Any]) -> int | None:
    value = op.get("value")
    if op["f"] != "txn" or not isinstance(value, dict):
        return None
    return len(value.get("outputs") or [])


SPEC = WorkloadSpec(
    name="eos",
    description="consume-transform-produce with transactions (KIP-447)",
    options_type=EosOptions,
    cli=(
        Option("--variant", "variant", choices=VARIANTS),
        Option(
            "--client",
            "client",
            "the client under test (its manifest: workloads/manifests/CLIENT.toml)",
            choices=CLIENTS,
        ),
        Option("--processors", "processors", "processor instances kept alive", int, metavar="K"),
        Option("--partitions", "partitions", "input and output partitions", int, metavar="P"),
        Option("--values", "values", "values to seed", int, metavar="N"),
        Option("--txn-size", "txn_size", "max inputs per transaction", int, metavar="N"),
        Option("--commit-interval-ms", "commit_interval_ms", type=int, metavar="MS"),
        Option("--abort-probability", "abort_probability", type=float, metavar="P"),
        Option("--txn-id-strategy", "txn_id_strategy", choices=TXN_ID_STRATEGIES),
        Option("--transaction-timeout-ms", "transaction_timeout_ms", type=int, metavar="MS"),
        Option("--session-timeout-ms", "session_timeout_ms", type=int, metavar="MS"),
        *CLIENT_KNOBS,
    ),
    checker_suites=("eos",),
    isolate=lambda tag: {"name_suffix": f"-{tag}"},
    broker_settings=lambda o: group_broker_settings(o.group_protocol, o.session_timeout_ms),
    needs_kafka=lambda o: group_protocol_needs(o.group_protocol),
    acls=lambda o: (
        Acl("topic", o.input_topic, "read"),
        Acl("topic", o.output_topic, "write"),
        Acl("group", o.group_id, "read"),
        Acl("transactional_id", o.txn_id_prefix, "write", prefixed=True),
    ),
    figures=Figures(
        throughput=lambda: _committed_outputs,
        fed=lambda: seeded_values,
        latency_fs=("txn",),
        throughput_label="records/s\ncommitted",
        latency_label="txn latency (s)",
        backlog_label="consumer lag\n(seeded - committed)",
        title="throughput, transaction latency and consumer lag, with fault bands",
    ),
    report=REPORT,
    variants=(
        Variant("eos"),
        Variant("at-least-once", {"variant": "at-least-once"}, expect="duplicate"),
        Variant("offsets-outside-txn", {"variant": "offsets-outside-txn"}, expect="duplicate"),
        Variant("read-uncommitted", {"variant": "read-uncommitted"}, expect="aborted-read"),
        Variant("no-rewind", {"variant": "no-rewind"}, expect="lost"),
    ),
    # The pipeline is being fed, or a processor committed.
    load_started=lambda op: (
        (op["process"] == "seeder" and op["f"] == "send")
        or (isinstance(op["process"], int) and op["f"] == "txn")
    ),
)
