"""The eos workload's driver: seed, run K processors under faults, drain, tally the drain.

Phases: set up topics, start the processors and wait for a stable group, start the nemeses,
feed the pipeline for the time limit, stop and heal the nemeses, drain, stop the processors,
record the final state. The drain tally is plain counts printed beside the checkers' verdict;
the verdict (order, zombies, aborted reads, torn transactions, broker logs) is the checkers'.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from history.eos_records import H_SRC_OFFSET, H_SRC_PARTITION, input_of
from workloads.drive import Drive, Outcome, RunSummary, Workload
from workloads.eos.control import EosClients
from workloads.eos.supervisor import SPEC, EosWorkload
from workloads.pipeline import drive_pipeline
from workloads.timeuse import (
    Availability,
    TimeUse,
    availability,
    availability_line,
    instance_times,
    instances_line,
)

if TYPE_CHECKING:
    from history import Op


def drive(d: Drive) -> Outcome:
    eos = d.options.workload_options
    with EosWorkload(eos, d.cluster, d.run_dir) as workload:
        return drive_pipeline(
            d,
            workload,
            EosClients(workload),
            stable_timeout=60 + eos.session_timeout_ms / 1000,
            feed_first=workload.manifest.abilities.feed_first,
        )


def drain_tally(ops: Iterable[Op]) -> dict[str, Any]:
    """Counts from the final read_committed drain of the output topic against the seeder's
    acknowledged values: outputs, distinct seeded inputs covered, inputs output more than
    once (same source partition+offset), seeded values missing, outputs of no seeded value.
    Counts only: what they mean for the run is the checkers' to say."""
    seeded: set[str] = set()
    sources: Counter[tuple[str | None, str | None]] = Counter()
    covered: set[str] = set()
    unexpected = 0
    outputs = 0
    complete = True
    for op in ops:
        value = op.get("value")
        if op["process"] == "seeder" and op["f"] == "send" and op["type"] in ("ok", "info"):
            seeded.update(v for v, _, offset in value["values"] if offset is not None)
        elif (
            op["process"] == "final"
            and op["f"] == "read"
            and op["type"] != "invoke"
            and value["isolation"] == "read_committed"
        ):
            complete = complete and op["type"] == "ok"
            for _offset, _key, out, headers in value["records"]:
                outputs += 1
                source = input_of(out)
                # Outputs of a client that writes no source headers (the Java copier) are
                # identified by their value, which is unique per seeded input.
                if H_SRC_OFFSET in headers:
                    sources[(headers.get(H_SRC_PARTITION), headers.get(H_SRC_OFFSET))] += 1
                else:
                    sources[("value", source or out)] += 1
                if source in seeded:
                    covered.add(source)
                else:
                    unexpected += 1
    return {
        "seeded": len(seeded),
        "committed_outputs": outputs,
        "distinct_inputs": len(covered),
        "duplicates": sum(n - 1 for n in sources.values() if n > 1),
        "missing": len(seeded - covered),
        "unexpected": unexpected,
        "complete_read": complete,
    }


def tally_line(s: dict[str, Any]) -> str:
    return (
        f"final drain: {s['seeded']} seeded, {s['committed_outputs']} committed outputs "
        f"({s['distinct_inputs']} distinct inputs), {s['duplicates']} duplicated, "
        f"{s['missing']} missing, {s['unexpected']} unexpected"
        + ("" if s["complete_read"] else " (final read incomplete)")
    )


def run_stats(ops: Iterable[Op]) -> dict[str, Any]:
    """Throughput of the processors: committed transactions and records per second of the
    span from the first transaction invoke to the last completion."""
    first = last = None
    txns = aborted = records = 0
    instances: set[Any] = set()
    for op in ops:
        if op["f"] != "txn" or not isinstance(op["process"], int):
            continue
        instances.add(op["process"])
        if op["type"] == "invoke":
            first = op["time"] if first is None else first
            continue
        last = op["time"]
        if op["type"] == "ok":
            txns += 1
            records += len(op["value"]["outputs"])
        else:
            aborted += 1
    span = (last - first) / 1e9 if first is not None and last is not None else 0.0
    return {
        "instances": len(instances),
        "txns_committed": txns,
        "txns_not_committed": aborted,
        "records_committed": records,
        "span_s": round(span, 3),
        "txns_per_s": round(txns / span, 1) if span else 0.0,
        "records_per_s": round(records / span, 1) if span else 0.0,
    }


def time_use(ops: list[Op]) -> TimeUse:
    """Availability over the load (from the first spawn to the final drain): the seconds in
    which seeded inputs were waiting uncommitted, and of those the ones in which a
    transaction committed; and each instance's time (:func:`workloads.timeuse.instance_times`)."""
    seeded: list[tuple[int, int]] = []  # (time, values) of acknowledged seeds
    committed: list[tuple[int, int]] = []  # (time, outputs) of committed transactions
    start = end = None
    fed = SPEC.figures.fed()
    for op in ops:
        proc, f, typ = op["process"], op["f"], op["type"]
        if proc == "supervisor" and f == "spawn" and start is None:
            start = op["time"]
        elif proc == "final" and f == "drain" and typ == "invoke":
            end = op["time"]
        elif typ == "ok" and (n := fed(op)) is not None:
            seeded.append((op["time"], n))
        elif typ == "ok" and isinstance(proc, int) and f == "txn":
            committed.append((op["time"], len(op["value"].get("outputs") or [])))
    if end is None and committed:
        end = committed[-1][0]
    seeded_by, committed_by = _cumulative(seeded), _cumulative(committed)

    def waiting(begin: int, end: int) -> bool:  # input seeded by the second's end, uncommitted
        return _count_by(seeded_by, end) > _count_by(committed_by, begin)

    avail = (
        availability((t for t, _n in committed), start, end, waiting)
        if start is not None and end is not None
        else Availability()
    )
    return TimeUse(avail, instance_times(ops))


def _cumulative(points: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    times, totals, total = [], [], 0
    for t, n in sorted(points):
        total += n
        times.append(t)
        totals.append(total)
    return times, totals


def _count_by(cum: tuple[list[int], list[int]], t: int) -> int:
    k = bisect.bisect_right(cum[0], t)
    return cum[1][k - 1] if k else 0


def summarize(ops: list[Op]) -> RunSummary:
    tally = drain_tally(ops)
    stats = run_stats(ops)
    throughput = f"throughput: {stats['txns_per_s']} txn/s, {stats['records_per_s']} records/s"
    use = time_use(ops)
    stats["time_use"] = use.to_dict()
    lines = [
        availability_line(use.availability, "a transaction committed", "with seeded input waiting"),
        instances_line(use.instances),
    ]
    return RunSummary(tally, tally_line(tally), stats, throughput, [x for x in lines if x])


WORKLOAD = Workload(SPEC, drive, summarize)
