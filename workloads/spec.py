"""What a workload declares about itself, so the harness and the checkers need no list of them.

A workload package (``workloads/eos/``, ``workloads/queue/``) declares one :class:`WorkloadSpec`:
its name, its options dataclass, the command-line flags that fill it, the history files its
processes write, the checker suites that judge it (by name: the checkers cannot import the
workloads, so the harness writes the names into the run's ``config.json``), how its test name
reads, what the report's figures count and what else its report shows (:class:`ReportSpec`),
its campaign variants with their expected verdicts (:class:`Variant`), and which op shows its
load under way. The harness composes a spec with a driver
(``harness.run.workloads``); nothing else in the harness names a workload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from common.acls import Acl
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
class Series:
    """A figure of its own in the report: a step line per series over the run's seconds.

    ``points()`` gives a fresh function per report, called on every ``ok`` op in history
    order: the ``(series, value)`` points the op sets (a task's highest committed seqno, the
    task count), or None.
    """

    title: str
    ylabel: str
    points: Callable[[], Callable[[Mapping[str, Any]], list[tuple[str, float]] | None]]


#: Makes a journey row of a value from an invoke, its completion (None if it never
#: completed), the sentence saying what the op did to the value, and the part of the op's
#: result that concerns it.
MakeStep = Callable[[str, dict[str, Any], "dict[str, Any] | None", str, Any], dict[str, Any]]


class JourneyFinder(Protocol):
    """Finds the ops that touched values no op carries by name (fed every completed op, and
    every invoke that never completed, in history order)."""

    def __bool__(self) -> bool: ...
    def see(self, inv: dict[str, Any], op: dict[str, Any] | None) -> None: ...
    def finish(self) -> dict[str, list[dict[str, Any]]]: ...


def _describe_error(value: str, inv: Mapping[str, Any], op: Mapping[str, Any] | None) -> str:
    if op is None:
        return "the process never completed this op (killed or stopped inside it)"
    return f"error: {op['error']}" if op.get("error") else ""


@dataclass(frozen=True)
class Journeys:
    """How the report follows a value a checker flagged through the ops of a run."""

    #: The sentence above the journeys: what the rows are.
    intro: str = "Every operation that carried a value an example names."
    #: The value names an op carries (the ops that touched a value are those that carry it).
    carried: Callable[[Mapping[str, Any]], list[str]] = lambda op: []
    #: What an op that carries the value did to it, in words (empty: the op's value).
    describe: Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], str] = _describe_error
    #: Whether a flagged value is of a shape no op carries by name, and the finder of the ops
    #: that touched such values (None: every value is found by name).
    claims: Callable[[str], bool] = lambda value: False
    finder: Callable[[set[str], MakeStep], JourneyFinder] | None = None
    #: Sort key of a value's name in the report.
    order: Callable[[str], tuple[Any, ...]] = lambda value: (value,)


def _rebalance(op: Mapping[str, Any]) -> tuple[str, Any] | None:
    if op.get("f") != "rebalance":
        return None
    value = op.get("value") if isinstance(op.get("value"), dict) else {}
    return str(value.get("event", "")), value.get("generation")


@dataclass(frozen=True)
class ReportSpec:
    """What a run's report shows of this workload beyond what every run has."""

    journeys: Journeys = field(default_factory=Journeys)
    #: Sentences under the verdict table, from ``summary.json``'s ``summary`` (the driver's
    #: tally) and ``stats`` (either may be None): the final drain, the throughput.
    summary_lines: Callable[[Mapping[str, Any] | None, Mapping[str, Any] | None], list[str]] = (
        lambda tally, stats: []
    )
    #: An ``ok`` op that changed who holds what (a group rebalance, a worker's assignment):
    #: ``(event, generation)``, or None. Listed in a table and marked on the throughput.
    assignment: Callable[[Mapping[str, Any]], tuple[str, Any] | None] = _rebalance
    assignments_title: str = "Rebalances"
    #: Figures of the workload's own (each a step line per series).
    series: tuple[Series, ...] = ()


@dataclass(frozen=True)
class Variant:
    """A campaign variant: options over the defaults, and what a run of it must give."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The anomaly type a run must be found invalid with (a broken-on-purpose variant), or
    #: None: a correct client, expected valid.
    expect: str | None = None


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
    #: What its clients may do on a secured cluster (``--security``), and no more.
    acls: Callable[[Any], tuple[Acl, ...]] = lambda options: ()
    #: What a campaign runs (``--variants``; the first is the default): the correct client
    #: and the broken-on-purpose ones, each with the verdict it must get.
    variants: tuple[Variant, ...] = ()
    #: Whether a completed op shows the load under way (the live progress's "running").
    load_started: Callable[[Mapping[str, Any]], bool] = lambda op: False
    report: ReportSpec = field(default_factory=ReportSpec)

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
