"""The share workload's driver: topics and group settings, members up, the seeder feeding the
input while the faults act, then the drain and the final state (``workloads.share.supervisor``).
"""

from __future__ import annotations

from typing import Any

from history import Op
from workloads.drive import Drive, Outcome, RunSummary, Workload
from workloads.share.control import ShareClients
from workloads.share.supervisor import SPEC, ShareWorkload
from workloads.timeuse import availability, availability_line


def drive(d: Drive) -> Outcome:
    o = d.options.workload_options
    with ShareWorkload(o, d.cluster, d.run_dir, d.options.time_limit) as workload:
        workload.setup()
        workload.start()
        with d.faults(workload, ShareClients(workload)):
            seeded = workload.seed(d.options.time_limit)
        finished = workload.finish()
    return Outcome(finished, {"seeded_seconds": round(seeded.seconds, 3)})


def summarize(ops: list[Op]) -> RunSummary:
    """What the members did, counted from their ops: deliveries (and how many were
    redeliveries), acknowledgements by kind with the broker's answer, and the seconds in
    which an acceptance was taken."""
    members = [op for op in ops if isinstance(op["process"], int)]
    if not members:
        return RunSummary()
    tally: dict[str, Any] = {
        "deliveries": 0,
        "redeliveries": 0,
        "accepted": 0,
        "released": 0,
        "rejected": 0,
        "ack_errors": 0,
        "ack_unknown": 0,
    }
    taken: list[int] = []
    kinds = {"accept": "accepted", "release": "released", "reject": "rejected"}
    for op in members:
        value = op["value"] if isinstance(op["value"], dict) else {}
        if op["f"] == "poll" and op["type"] == "ok":
            records = value.get("records", [])
            tally["deliveries"] += len(records)
            tally["redeliveries"] += sum(1 for r in records if r[3] > 1)
        elif op["f"] == "ack" and op["type"] == "info":
            tally["ack_unknown"] += 1
        elif op["f"] == "ack" and op["type"] == "ok":
            for a in value.get("acks", []):
                if a[4] is None:
                    tally[kinds[a[3]]] += 1
                else:
                    tally["ack_errors"] += 1
            if any(a[3] == "accept" and a[4] is None for a in value.get("acks", [])):
                taken.append(op["time"])
    line = (
        f"{tally['deliveries']} deliveries ({tally['redeliveries']} redeliveries); taken: "
        f"{tally['accepted']} accepted, {tally['released']} released, {tally['rejected']} "
        f"rejected; {tally['ack_errors']} acknowledgements refused, {tally['ack_unknown']} "
        "commits of unknown outcome"
    )
    ends = [op["time"] for op in members if op["type"] != "invoke"]
    avail = availability(taken, members[0]["time"], max(ends, default=members[0]["time"]))
    stats = {"time_use": {"availability": round(avail.share, 3)}}
    time_line = availability_line(avail, "an acceptance was taken", "of the members' time")
    return RunSummary(tally=tally, line=line, stats=stats, time_lines=[time_line])


WORKLOAD = Workload(SPEC, drive, summarize)
