"""What decides a run, and what its fault injectors are handed.

Split from the runner so the nemesis wiring and the workload drivers can name these types
without importing the runner that calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from common.errors import HarnessError
from common.settings import format_settings
from harness.kafka.versions import DEFAULT_KAFKA_VERSION
from history import Recorder
from nemeses.kinds import NemesisSpec, parse_nemesis

if TYPE_CHECKING:
    from harness.substrate.api import Cluster
    from history.clientcontrol import ClientControl
    from workloads.spec import WorkloadOptions


@dataclass
class RunOptions:
    """Everything that decides what a run does; written to ``config.json``."""

    workload: str = "eos"
    time_limit: float = 60.0
    seed: int = 0
    kafka_version: str = DEFAULT_KAFKA_VERSION
    transaction_version: int | None = None
    nodes: int = 3
    network: str = "auto"
    #: ``--broker-config``: over the harness's defaults (``harness.substrate.api``).
    broker_settings: dict[str, str] = field(default_factory=dict)
    #: Of the workload's topics and the internal ones (None: ``min(3, nodes)``).
    replication_factor: int | None = None
    #: ``min.insync.replicas`` of the same topics (None: ``min(2, replication factor)``).
    min_insync_replicas: int | None = None
    #: ``--broker-patch``: a fix or a delay given to every broker (``harness.kafka.brokerpatch``).
    broker_patch: str | None = None
    #: ``--security``: plaintext, tls or sasl_ssl (``harness.kafka.security``).
    security: str = "plaintext"
    #: ``--withhold-acl``: a resource kind whose ACLs the clients under test do not get
    #: (to see how a client fails that lacks them).
    withhold_acl: str | None = None
    store: Path = Path("store")
    #: ``--nemesis``, parsed once (a string given here is parsed in ``__post_init__``).
    nemesis: NemesisSpec = field(default_factory=NemesisSpec)
    nemesis_interval: float = 10.0
    nemesis_duration: float = 10.0
    replay: Path | None = None
    #: The options dataclass of ``workload`` (its spec's ``options_type``); None: its defaults.
    workload_options: WorkloadOptions | None = None
    #: Where brokers run: ``process`` (JVMs here), ``docker`` or ``auto``
    #: (``harness.substrate.backends``).
    backend: str = "auto"
    #: The machines of ``backend="ssh"``: a hosts file (``harness.substrate.ssh.hosts``).
    hosts: str | None = None
    #: ``--accept-new-host-keys``: trust the hosts' unknown SSH host keys on first use.
    accept_new_host_keys: bool = False
    #: Set by ``harness.run.workloads.complete``: the workload's options are filled in,
    #: validated and adjusted to the run, which then validates them no more.
    completed: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.nemesis, str):
            try:
                self.nemesis = parse_nemesis(self.nemesis)
            except ValueError as exc:
                raise HarnessError(str(exc)) from None

    @property
    def test_name(self) -> str:
        parts = [self.workload]
        if self.workload_options is not None:
            parts += self.workload_options.name_parts()
        if self.replay is not None:
            parts.append("replay")
        elif not self.nemesis.none:
            parts.append(self.nemesis.text.replace(",", "+"))
        return "-".join(parts)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["store"] = str(self.store)
        out["nemesis"] = self.nemesis.text
        out["replay"] = str(self.replay) if self.replay else None
        out["workload_options"] = (
            self.workload_options.to_dict() if self.workload_options is not None else None
        )
        out["test_name"] = self.test_name
        del out["completed"]
        return out


def repro_args(options: Mapping[str, Any]) -> list[str]:
    """The flags of ``python -m harness run`` that give these run options again (``options``
    as ``config.json`` holds them; the workload's own flags are its spec's to spell)."""
    args: list[str] = []
    for flag, key in (
        ("--time-limit", "time_limit"),
        ("--seed", "seed"),
        ("--kafka-version", "kafka_version"),
        ("--transaction-version", "transaction_version"),
        ("--nodes", "nodes"),
        ("--replication-factor", "replication_factor"),
        ("--min-insync-replicas", "min_insync_replicas"),
        ("--broker-patch", "broker_patch"),
        ("--security", "security"),
        ("--withhold-acl", "withhold_acl"),
    ):
        if options.get(key) not in (None, "plaintext"):
            args += [flag, str(options[key])]
    return args + format_settings(dict(options.get("broker_settings") or {}), "--broker-config")


@dataclass
class RunContext:
    """What a nemesis gets: the cluster, the workload, its client processes, where to record."""

    cluster: Cluster
    #: The running workload object of the driver (``EosWorkload``, ``QueueWorkload``).
    workload: Any
    options: RunOptions
    run_dir: Path
    #: The workload as faults see it (pids to pause or kill, transactional ids to hijack):
    #: its package's ``control`` object; None only for faults of the cluster alone (the
    #: pytest plugin's ``nemesis`` fixture without clients), where no client kind runs.
    clients: ClientControl | None

    @property
    def processes_dir(self) -> Path:
        return self.run_dir / "processes"

    def recorder(self, process: str, meta: dict[str, Any] | None = None) -> Recorder:
        """A history file of its own for a nemesis (``processes/<process>.jsonl``)."""
        return Recorder(self.processes_dir / f"{process}.jsonl", process, meta)


class Nemesis(Protocol):
    """The hook for fault injection. ``start`` begins injecting (typically in a thread of its
    own, recording ops under its own process); ``stop`` ends injection; ``heal`` undoes every
    fault still in effect. All three are called once, in that order, ``stop``/``heal`` even
    when the run failed."""

    name: str

    def start(self, ctx: RunContext) -> None: ...

    def stop(self, ctx: RunContext) -> None: ...

    def heal(self, ctx: RunContext) -> None: ...
