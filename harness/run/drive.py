"""The contract between the runner and a workload's driver.

The runner owns what every run shares (the run directory, ``config.json``, merging the
history, ``summary.json``, the verdict); a driver owns what only its workload knows (which
phases run in which order, when the faults may act, what its end-of-run tally counts). A
driver gets a :class:`Drive` and returns an :class:`Outcome`; it never merges, writes the
config or judges.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.run.options import RunContext

if TYPE_CHECKING:
    from harness.run.options import Nemesis, RunOptions
    from harness.substrate.api import Cluster
    from history import Op
    from workloads.spec import WorkloadSpec

log = logging.getLogger("harness.run.drive")


@dataclass
class Drive:
    """What a driver is handed: a started cluster, the run's options (``workload_options``
    already of its workload's type), the run directory and the nemeses to start.

    ``load_over`` is called once the faulty phase is over (:meth:`faults` ends), before the
    driver's last phase: the runner stops warming Spark up there, so the warm-up's last round
    ends during the drain instead of delaying the verdict."""

    cluster: Cluster
    options: RunOptions
    run_dir: Path
    nemeses: list[Nemesis] = field(default_factory=list)
    load_over: Callable[[], None] | None = None

    @contextlib.contextmanager
    def faults(self, workload: Any, clients: Any = None) -> Iterator[RunContext]:
        """The nemeses act while this is open; at its end every started one is stopped and
        healed (even when the block or a start failed), so the driver's last phase (a drain,
        final reads) sees a whole cluster."""
        ctx = RunContext(self.cluster, workload, self.options, self.run_dir, clients)
        started: list[Nemesis] = []
        try:
            for nemesis in self.nemeses:
                nemesis.start(ctx)
                started.append(nemesis)
            yield ctx
        finally:
            try:
                call_all(started, "stop", ctx)
                call_all(started, "heal", ctx)
            finally:
                if self.load_over is not None:
                    self.load_over()


def call_all(nemeses: list[Nemesis], method: str, ctx: RunContext) -> None:
    """Call ``method`` on every nemesis even if one fails (a heal must never be skipped);
    the first failure is raised afterwards."""
    first: BaseException | None = None
    for nemesis in nemeses:
        try:
            getattr(nemesis, method)(ctx)
        except Exception as exc:
            log.error("nemesis %s: %s failed: %s", getattr(nemesis, "name", "?"), method, exc)
            first = first or exc
    if first is not None:
        raise first


@dataclass
class Outcome:
    """What a driver reports: whether its final phase (drain, final reads) completed, and
    figures only it can know (seconds spent seeding)."""

    finished: bool
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunSummary:
    """Plain counts from the merged history, printed beside the checkers' verdict and never
    instead of it: ``tally`` (with ``line``, its one-line form) and throughput ``stats``
    (with ``stats_line``). The summary and the report show :attr:`lines` as they are."""

    tally: dict[str, Any] | None = None
    line: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    stats_line: str | None = None
    #: Where the time went (``harness.run.timeuse``): availability, the processes' time.
    time_lines: list[str] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return [x for x in (self.line, self.stats_line, *self.time_lines) if x]


def _no_summary(ops: list[Op]) -> RunSummary:
    return RunSummary()


def _as_is(options: RunOptions) -> RunOptions:
    return options


@dataclass(frozen=True)
class Workload:
    """A workload as the harness runs it: its declaration, its driver and its summary.

    ``prepare`` adjusts the workload options to the run's (the queue clients take the run's
    time limit and seed) before ``config.json`` is written, so the config says what ran.
    """

    spec: WorkloadSpec
    drive: Callable[[Drive], Outcome]
    summarize: Callable[[list[Op]], RunSummary] = _no_summary
    prepare: Callable[[RunOptions], RunOptions] = _as_is

    @property
    def name(self) -> str:
        return self.spec.name
