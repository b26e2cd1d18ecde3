"""The offsets workload's driver: the topic, the committers (and the load) up, the time
limit while the faults act, then every committer's final read
(``workloads.offsets.supervisor``)."""

from __future__ import annotations

import threading
from typing import Any

from history import Op
from workloads.drive import Drive, Outcome, RunSummary, Workload
from workloads.offsets.control import OffsetsClients
from workloads.offsets.supervisor import SPEC, OffsetsWorkload


def drive(d: Drive) -> Outcome:
    o = d.options.workload_options
    with OffsetsWorkload(o, d.cluster, d.run_dir, d.options.time_limit) as workload:
        workload.setup()
        workload.start()
        with d.faults(workload, OffsetsClients(workload)):
            threading.Event().wait(d.options.time_limit)  # the load runs for its time
        finished = workload.finish()
    return Outcome(finished)


def summarize(ops: list[Op]) -> RunSummary:
    """Commits by outcome and reads, counted from the committers' ops (not judged)."""
    tally: dict[str, Any] = {"acknowledged": 0, "unknown": 0, "reads": 0, "reads_failed": 0}
    for op in ops:
        if not isinstance(op["process"], int) or op["type"] == "invoke":
            continue
        if op["f"] == "commit":
            tally["acknowledged" if op["type"] == "ok" else "unknown"] += 1
        elif op["f"] == "read":
            tally["reads" if op["type"] == "ok" else "reads_failed"] += 1
    if not any(tally.values()):
        return RunSummary()
    line = (
        f"{tally['acknowledged']} commits acknowledged, {tally['unknown']} of unknown outcome; "
        f"{tally['reads']} reads of the committed offsets ({tally['reads_failed']} failed)"
    )
    return RunSummary(tally=tally, line=line)


WORKLOAD = Workload(SPEC, drive, summarize)
