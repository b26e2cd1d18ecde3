"""The queue workload's driver: clients under faults until the time limit, then final reads.

The clients take the run's time limit and seed; faults act while they run and are healed
before the leftovers are fenced and every key is read to its end (``workloads.queue.supervisor``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from history import Op
from workloads.drive import Drive, Outcome, RunSummary, Workload
from workloads.queue.control import QueueClients
from workloads.queue.supervisor import SPEC, QueueWorkload, run_phases
from workloads.timeuse import availability, availability_line


def prepare(options: Any) -> Any:
    queue = replace(options.workload_options, seed=options.seed)
    return replace(options, workload_options=queue)


def drive(d: Drive) -> Outcome:
    options = d.options
    with QueueWorkload(
        options.workload_options, d.cluster, d.run_dir, options.time_limit
    ) as workload:
        finished = run_phases(workload, lambda: d.faults(workload, QueueClients(workload)))
    return Outcome(finished)


#: The ops that move the queue forward when they complete ok.
PROGRESS = frozenset({"send", "poll", "txn"})


def summarize(ops: list[Op]) -> RunSummary:
    """Availability of the clients' load: of the whole seconds from their first op to their
    last completion, those in which a send, poll or transaction completed ok."""
    clients = [op for op in ops if isinstance(op["process"], int)]
    if not clients:
        return RunSummary()
    done = [op["time"] for op in clients if op["type"] == "ok" and op["f"] in PROGRESS]
    ends = [op["time"] for op in clients if op["type"] != "invoke"]
    avail = availability(done, clients[0]["time"], max(ends, default=clients[0]["time"]))
    stats = {
        "time_use": {
            "available_s": avail.available,
            "counted_s": avail.counted,
            "availability": round(avail.share, 3),
        }
    }
    line = availability_line(avail, "a send, poll or transaction completed", "of the load")
    return RunSummary(stats=stats, time_lines=[line])


WORKLOAD = Workload(SPEC, drive, summarize, prepare=prepare)
