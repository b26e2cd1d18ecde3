"""The contract between the harness's runner and a workload package's driver.

Every workload package (``workloads/<name>/``) ends with a ``driver`` module whose
``WORKLOAD`` is a :class:`Workload`: its declaration, the function that drives one run, and its
end-of-run summary. The runner owns what every run shares (the run directory,
``config.json``, merging the history, ``summary.json``, the verdict); a driver owns what only
its workload knows (which phases run in which order, when the faults may act, what its tally
counts). A driver gets a :class:`Drive` and returns an :class:`Outcome`; it never merges,
writes the config or judges.

Why here and not in the harness: the drivers live in the workload packages, which may not
import the harness; the harness hands them an object with this shape (``harness.run.drive``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from history import Op
    from history.clientcontrol import ClientControl
    from workloads.base import ClusterAccess
    from workloads.spec import WorkloadSpec


class Drive(Protocol):
    """What a driver is handed: a started cluster, the run's options (``workload_options``
    already of its workload's type; ``time_limit``, ``seed``), the run directory, and the
    faults, which act while :meth:`faults` is open and are healed when it closes."""

    cluster: ClusterAccess
    options: Any
    run_dir: Path

    def faults(self, workload: Any, clients: ClientControl) -> AbstractContextManager[Any]: ...


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
    #: Where the time went (``workloads.timeuse``): availability, the processes' time.
    time_lines: list[str] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return [x for x in (self.line, self.stats_line, *self.time_lines) if x]


def _no_summary(ops: list[Op]) -> RunSummary:
    return RunSummary()


def _as_is(options: Any) -> Any:
    return options


@dataclass(frozen=True)
class Workload:
    """A workload as the harness runs it: its declaration, its driver and its summary.

    ``prepare`` adjusts the run options to the workload (the queue clients take the run's
    time limit and seed) before ``config.json`` is written, so the config says what ran; it
    returns a copy (``dataclasses.replace``).
    """

    spec: WorkloadSpec
    drive: Callable[[Drive], Outcome]
    summarize: Callable[[list[Op]], RunSummary] = _no_summary
    prepare: Callable[[Any], Any] = _as_is

    @property
    def name(self) -> str:
        return self.spec.name
