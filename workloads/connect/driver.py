"""The connect workload's driver: workers and connector up, faults for the time limit, then
every task running again, the connector stopped, the workers stopped, the final reads.

The tally is plain counts from the final read_committed reads (records per task, repeats,
gaps); what they mean is the ``connect`` checker's to say.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from workloads.connect.control import ConnectClients
from workloads.connect.supervisor import SPEC, ConnectWorkload, run_phases
from workloads.drive import Drive, Outcome, RunSummary, Workload

if TYPE_CHECKING:
    from history import Op


def prepare(options: Any) -> Any:
    connect = replace(options.workload_options, seed=options.seed)
    return replace(options, workload_options=connect)


def drive(d: Drive) -> Outcome:
    options = d.options.workload_options
    with ConnectWorkload(options, d.cluster, d.run_dir) as workload:
        clients = ConnectClients(workload)
        finished = run_phases(workload, d.options.time_limit, lambda: d.faults(workload, clients))
    return Outcome(finished)


def tally(ops: Iterable[Op]) -> dict[str, Any]:
    """Committed records per task from the final read_committed reads: how many, how many
    repeated a (task, seqno), how many seqnos below a task's highest are missing."""
    seen: dict[int, Counter[int]] = defaultdict(Counter)
    records = foreign = 0
    complete = True
    for op in ops:
        value = op.get("value")
        if op["process"] != "final" or op["f"] != "read" or op["type"] == "invoke":
            continue
        if value.get("isolation") != "read_committed":
            continue
        complete = complete and op["type"] == "ok"
        for _offset, _key, raw, _headers in value.get("records") or []:
            records += 1
            try:
                rec = json.loads(raw)
                seen[int(rec["task"])][int(rec["seqno"])] += 1
            except (TypeError, ValueError, KeyError):
                foreign += 1
    repeats = sum(n - 1 for c in seen.values() for n in c.values() if n > 1)
    gaps = sum(max(c) + 1 - len(c) for c in seen.values() if c)
    return {
        "committed_records": records,
        "tasks": len(seen),
        "repeated": repeats,
        "missing": gaps,
        "foreign": foreign,
        "complete_read": complete,
    }


def tally_line(s: dict[str, Any]) -> str:
    return (
        f"final read: {s['committed_records']} committed records of {s['tasks']} tasks, "
        f"{s['repeated']} repeated, {s['missing']} missing, {s['foreign']} foreign"
        + ("" if s["complete_read"] else " (final read incomplete)")
    )


def summarize(ops: list[Op]) -> RunSummary:
    t = tally(ops)
    return RunSummary(t, tally_line(t))


WORKLOAD = Workload(SPEC, drive, summarize, prepare=prepare)
