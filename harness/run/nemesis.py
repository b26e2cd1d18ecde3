"""Bridges the fault schedule engine (``nemeses``) into a run (``harness.run.runner``).

Nemeses know nothing of the harness or the workloads; this adapter hands them the cluster
(which already has the verbs they need) and a client view of the workload, records their
ops under process ``nemesis``, and saves the schedule actually executed as
``schedule.json`` in the run directory, from which ``--replay`` reproduces the run's faults.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import HarnessError
from nemeses import schedule as schedules
from nemeses.control import ABILITIES, abilities_of
from nemeses.engine import Nemesis as Engine
from nemeses.kinds import KINDS
from nemeses.targets import FaultContext

if TYPE_CHECKING:
    from harness.run.options import RunContext, RunOptions

log = logging.getLogger("harness.nemesis")


def fault_kinds(
    options: RunOptions,
    netns: bool,
    clients: bool = True,
    hooks: bool = True,
    abilities: frozenset[str] = frozenset(ABILITIES),
) -> tuple[list[str], dict[str, str]]:
    """The one place that decides which kinds of ``--nemesis`` run here: those kinds, and
    those that ``all`` leaves out, each with the reason (a one-line HarnessError for a named
    kind that cannot run)."""
    spec = options.nemesis
    where = {"netns": netns, "clients": clients, "hooks": hooks, "abilities": abilities}
    try:
        return spec.kinds(**where), spec.skipped(**where)
    except ValueError as exc:
        raise HarnessError(str(exc)) from None


def plan(
    options: RunOptions,
    netns: bool,
    session_timeout_s: float,
    hooks: bool = True,
    stream_interval: float | None = None,
    abilities: frozenset[str] = frozenset(ABILITIES),
    clients: bool = True,
) -> schedules.Schedule:
    """The schedule of a run: replayed from a file, or generated from the seed (fault
    lengths are chosen around the clients' ``session_timeout_s``). Kinds that ``all``
    leaves out for these clients (none, or no hook points) or this cluster (an ability it
    lacks) are saved with the reason."""
    if options.replay is not None:
        try:
            return schedules.load(Path(options.replay))
        except ValueError as exc:
            raise HarnessError(str(exc)) from None
    kinds, skipped = fault_kinds(options, netns, clients, hooks, abilities)
    named = options.nemesis.recipe
    return schedules.generate(
        kinds,
        seed=options.seed,
        time_limit=options.time_limit,
        interval=named.interval if named else options.nemesis_interval,
        duration=options.nemesis_duration,
        nodes=options.nodes,
        has_clients=clients,
        session_timeout_s=session_timeout_s,
        skipped=skipped,
        duration_range=named.duration_range if named else None,
        pinned=named.pinned if named else None,
        stream_interval=stream_interval or schedules.STREAM_INTERVAL,
    )


class ScheduledNemesis:
    """The runner's nemesis hook: start the engine, stop it, heal, save the schedule."""

    name = "schedule"

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.engine: Engine | None = None
        self.recorder: Any = None
        self.stream_recorder: Any = None
        self.schedule: schedules.Schedule | None = None

    def start(self, ctx: RunContext) -> None:
        clients = ctx.clients
        if clients is None:  # faults of the cluster alone (the pytest plugin's nemesis)
            self.schedule = plan(
                self.options, ctx.cluster.uses_netns, 10.0, False, None,
                abilities_of(ctx.cluster), clients=False,
            )  # fmt: skip
        else:
            self.schedule = plan(
                self.options,
                ctx.cluster.uses_netns,
                clients.session_timeout_s,
                hooks=clients.hooks,
                stream_interval=clients.crash_interval_s,
                abilities=abilities_of(ctx.cluster),
            )
        self.recorder = ctx.recorder("nemesis", {"schedule": self.schedule.to_json()})
        if any(KINDS[e.kind].stream for e in self.schedule.events):
            self.stream_recorder = ctx.recorder("nemesis-clients", {})
        self.engine = Engine(
            FaultContext(ctx.cluster, clients),
            self.schedule,
            self.recorder,
            stream_recorder=self.stream_recorder,
        )
        self.save(ctx.run_dir)
        self.engine.start()

    def stop(self, ctx: RunContext) -> None:
        if self.engine is not None:
            self.engine.stop()
            self.save(ctx.run_dir)

    def heal(self, ctx: RunContext) -> None:
        if self.engine is not None:
            self.engine.heal_all()
            self.save(ctx.run_dir)
        for rec in (self.recorder, self.stream_recorder):
            if rec is not None:
                rec.close()
        self.recorder = self.stream_recorder = None

    def current(self) -> list[str]:
        return self.engine.current_faults() if self.engine else []

    def save(self, run_dir: Path) -> None:
        if self.schedule is not None:
            executed = self.engine.executed if self.engine else []
            self.schedule.save(run_dir / "schedule.json", executed=executed)
