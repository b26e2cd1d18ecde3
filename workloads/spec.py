"""What a workload declares about itself, so the harness and the checkers need no list of them.

A workload module (``workloads.eos``, ``workloads.queue``) ends with one :class:`WorkloadSpec`:
its name, its options dataclass, the command-line flags that fill it, the history files its
processes write, the checker suites that judge it (by name: the checkers cannot import the
workloads, so the harness writes the names into the run's ``config.json``), how its test name
and what the report's figures count. The harness composes a spec with a driver
(``harness.run.workloads``); nothing else in the harness names a workload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from common.settings import format_settings


class WorkloadOptions(Protocol):
    """The options dataclass of a workload: a dict round trip and a check before any work."""

    seed: int

    def to_dict(self) -> dict[str, Any]: ...

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WorkloadOptions: ...

    def validate(self) -> None: ...

    def name_parts(self) -> list[str]:
        """What the test name says after the workload's name (``queue-notxn-subscribe``)."""
        ...


@dataclass(frozen=True)
class Option:
    """One command-line flag and the options field it fills.

    Workloads may share a flag (``--processors`` is the eos processors and the queue clients):
    the flag is parsed once and each workload reads it into its own field. Flags have no
    argparse default; a flag not given leaves the options dataclass's own default.
    """

    flag: str
    field: str
    help: str = ""
    type: Callable[[str], Any] = str
    choices: tuple[Any, ...] | None = None
    #: ``store_true`` / ``store_false`` for a switch (``--no-txn`` sets ``txn`` False);
    #: ``settings`` for a repeatable ``KEY=VALUE`` flag that fills a dict (``--client-config``).
    action: str | None = None
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def argv(self, value: Any) -> list[str]:
        """The flag as a command line spells ``value`` (nothing when a switch is off)."""
        if self.action == "store_true":
            return [self.flag] if value is True else []
        if self.action == "store_false":
            return [self.flag] if value is False else []
        if self.action == "settings":
            return format_settings(dict(value or {}), self.flag)
        return [] if value is None else [self.flag, str(value)]


#: Records one ``ok`` op counts for a figure (None: the op does not count), called on the
#: history's ops in order.
OpCount = Callable[[Mapping[str, Any]], "int | None"]


def _no_count(op: Mapping[str, Any]) -> int | None:
    return None


def _counts_nothing() -> OpCount:
    return _no_count


@dataclass(frozen=True)
class Figures:
    """What the report's throughput, latency and backlog figures count for this workload.

    ``throughput()`` / ``fed()`` give a fresh :data:`OpCount` per report (it may remember
    what it saw, to count each record once): records an op made visible / fed into the
    system. ``latency_fs``: ops whose invoke-to-completion time is plotted.
    """

    throughput: Callable[[], OpCount] = _counts_nothing
    fed: Callable[[], OpCount] = _counts_nothing
    latency_fs: tuple[str, ...] = ()
    throughput_label: str = "records/s"
    latency_label: str = "op latency (s)"
    backlog_label: str = "backlog\n(fed - visible)"
    title: str = "throughput, latency and backlog, with fault bands"


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    options_type: type[Any]
    cli: tuple[Option, ...]
    #: Names in the checkers' suite table (``checkers.suites``) that judge a run of it.
    checker_suites: tuple[str, ...]
    #: The per-process history files under the run directory, merged into ``history.jsonl``.
    history_files: str = "processes/*.jsonl"
    figures: Figures = field(default_factory=Figures)
    #: Options that give a run its own topics, group and transactional ids (from a unique
    #: tag), so runs can share a cluster without sharing state.
    isolate: Callable[[str], dict[str, Any]] = lambda tag: {}
    description: str = ""
    #: Broker settings a run of these options needs from a fresh cluster (the run's own
    #: ``--broker-config`` wins over them): e.g. the session timeout of a KIP-848 group,
    #: which only the broker sets.
    broker_settings: Callable[[Any], dict[str, str]] = lambda options: {}
    #: The oldest Kafka these options can run on and what needs it (``("4.0.0", "--group-
    #: protocol consumer")``), or None.
    needs_kafka: Callable[[Any], tuple[str, str] | None] = lambda options: None

    def options_from_dict(self, raw: Mapping[str, Any]) -> Any:
        options = self.options_type.from_dict(raw)
        options.validate()
        return options

    def repro_args(self, options: Mapping[str, Any]) -> list[str]:
        """The flags that give these options again (``options`` as in ``config.json``)."""
        out: list[str] = []
        for o in self.cli:
            out += o.argv(options.get(o.field))
        return out
