"""The harness's side of the driver contract (``workloads.drive``): the :class:`Drive` a
workload's driver is handed, with the run's nemeses behind :meth:`Drive.faults`.
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
    from history.clientcontrol import ClientControl

log = logging.getLogger("harness.run.drive")


@dataclass
class Drive:
    """What a driver is handed: a started cluster, the run's options (``workload_options``
    already of its workload's type), the run directory and the nemeses to start.

    ``load_over`` is called once the faulty phase is over (:meth:`faults` ends), before the
    driver's last phase: the runner stops warming Spark up there, so the warm-up's last round
    ends during the drain instead of delaying the verdict.

    ``mark`` is told when the faulty phase begins (``"load"``), when its healing begins
    (``"healing"``) and ends (``"healed"``): the runner's timeline, so a run's
    ``summary.json`` says how long the load, the heal and the driver's last phase took."""

    cluster: Cluster
    options: RunOptions
    run_dir: Path
    nemeses: list[Nemesis] = field(default_factory=list)
    load_over: Callable[[], None] | None = None
    mark: Callable[[str], None] | None = None

    @contextlib.contextmanager
    def faults(self, workload: Any, clients: ClientControl) -> Iterator[RunContext]:
        """The nemeses act while this is open; at its end every started one is stopped and
        healed (even when the block or a start failed), so the driver's last phase (a drain,
        final reads) sees a whole cluster."""
        ctx = RunContext(self.cluster, workload, self.options, self.run_dir, clients)
        started: list[Nemesis] = []
        mark = self.mark or _unmarked
        mark("load")
        try:
            for nemesis in self.nemeses:
                nemesis.start(ctx)
                started.append(nemesis)
            yield ctx
        finally:
            mark("healing")
            try:
                call_all(started, "stop", ctx)
                call_all(started, "heal", ctx)
            finally:
                mark("healed")
                if self.load_over is not None:
                    self.load_over()


def _unmarked(name: str) -> None:
    """No timeline to tell (a test's own :class:`Drive`)."""


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
