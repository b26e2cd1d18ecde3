"""The queue workload's driver: clients under faults until the time limit, then final reads.

The clients take the run's time limit and seed; faults act while they run and are healed
before the leftovers are fenced and every key is read to its end (``workloads.queue``).
"""

from __future__ import annotations

from dataclasses import replace

from harness.run.drive import Drive, Outcome, Workload
from harness.run.options import RunOptions
from workloads.queue import SPEC, QueueWorkload, run_phases


def prepare(options: RunOptions) -> RunOptions:
    queue = replace(options.workload_options, seed=options.seed)
    return replace(options, workload_options=queue)


def drive(d: Drive) -> Outcome:
    options = d.options
    with QueueWorkload(
        options.workload_options, d.cluster, d.run_dir, options.time_limit
    ) as workload:
        finished = run_phases(workload, lambda: d.faults(workload))
    return Outcome(finished)


WORKLOAD = Workload(SPEC, drive, prepare=prepare)
