"""The streams workload's driver: seed, run K Streams instances under faults, drain, tally.

Phases as the eos driver's: topics, instances up and their group stable, the nemeses while
the seeder feeds the input for the time limit, then the drain, the instances stopped and the
final reads. The tally is plain counts from the final read_committed reads; what they mean
is the ``streams`` checker's to say.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from history.streams_records import (
    H_SRC_OFFSET,
    H_SRC_PARTITION,
    H_SRC_VALUE,
    group_key,
    parse_aggregate,
)
from workloads.drive import Drive, Outcome, RunSummary, Workload
from workloads.pipeline import drive_pipeline
from workloads.streams.control import StreamsClients
from workloads.streams.supervisor import SPEC, StreamsWorkload

if TYPE_CHECKING:
    from history import Op


def drive(d: Drive) -> Outcome:
    o = d.options.workload_options
    with StreamsWorkload(o, d.cluster, d.run_dir) as workload:
        return drive_pipeline(
            d, workload, StreamsClients(workload), stable_timeout=120 + o.session_timeout_ms / 1000
        )


def tally(ops: Iterable[Op]) -> dict[str, Any]:
    """From the final read_committed reads: outputs, inputs output more than once, seeded
    inputs missing; aggregate keys whose last committed aggregate equals their inputs'."""
    seeded: dict[tuple[int, int], str] = {}
    outputs: Counter[tuple[str | None, str | None]] = Counter()
    last: dict[str, tuple[int, tuple[int, int] | None]] = {}
    topics: dict[str, str] = {}
    groups = 4
    complete = True
    for op in ops:
        value = op.get("value")
        if op["process"] == "seeder" and op["f"] == "send" and op["type"] in ("ok", "info"):
            for v, p, offset in value["values"]:
                if offset is not None:
                    seeded[(p, offset)] = v
        elif op["process"] == "final" and op["f"] == "read" and op["type"] != "invoke":
            if value["isolation"] != "read_committed":
                continue
            complete = complete and op["type"] == "ok"
            kind = topics.get(value["topic"])
            for offset, key, raw, headers in value["records"]:
                src = (headers.get(H_SRC_PARTITION), headers.get(H_SRC_OFFSET))
                if kind == "aggregate" and key is not None:
                    if key not in last or last[key][0] < offset:
                        last[key] = (offset, parse_aggregate(raw))
                elif kind == "output" and headers.get(H_SRC_VALUE) is not None:
                    outputs[src] += 1
        if not topics and isinstance(value, dict) and "aggregate_topic" in value:
            topics = {value["output_topic"]: "output", value["aggregate_topic"]: "aggregate"}
            groups = int(value.get("groups", groups))
    expected: dict[str, tuple[int, int]] = {}
    for (p, _offset), v in seeded.items():
        k = group_key(v, p, groups)
        c, s = expected.get(k, (0, 0))
        expected[k] = (c + 1, s + int(v[1:]))
    right = sum(1 for k, want in expected.items() if last.get(k, (0, None))[1] == want)
    covered = {(str(p), str(o)) for p, o in seeded}
    return {
        "seeded": len(seeded),
        "committed_outputs": sum(outputs.values()),
        "duplicates": sum(n - 1 for n in outputs.values() if n > 1),
        "missing": len(covered - set(outputs)),
        "keys": len(expected),
        "keys_right": right,
        "complete_read": complete,
    }


def tally_line(s: dict[str, Any]) -> str:
    return (
        f"final read: {s['seeded']} seeded, {s['committed_outputs']} committed outputs, "
        f"{s['duplicates']} duplicated, {s['missing']} missing; {s['keys_right']} of "
        f"{s['keys']} aggregate keys end at their inputs' count and sum"
        + ("" if s["complete_read"] else " (final read incomplete)")
    )


def run_stats(ops: Iterable[Op]) -> dict[str, Any]:
    """The instances' pace: inputs processed (from their ``progress`` and ``exit`` ops) per
    second of the span from their first start to their last progress."""
    first = last = None
    processed: dict[Any, int] = {}
    for op in ops:
        if not isinstance(op["process"], int) or op["type"] != "ok":
            continue
        if op["f"] == "start" and first is None:
            first = op["time"]
        elif op["f"] in ("progress", "exit") and "processed" in (op.get("value") or {}):
            processed[op["process"]] = int(op["value"]["processed"])
            if op["f"] == "progress":
                last = op["time"]
    span = (last - first) / 1e9 if first is not None and last is not None else 0.0
    total = sum(processed.values())
    return {
        "instances": len(processed),
        "records_processed": total,
        "span_s": round(span, 3),
        "records_per_s": round(total / span, 1) if span else 0.0,
    }


def summarize(ops: list[Op]) -> RunSummary:
    t = tally(ops)
    stats = run_stats(ops)
    line = (
        f"throughput: {stats['records_per_s']} records/s processed "
        f"({stats['records_processed']} by {stats['instances']} instances in {stats['span_s']} s)"
    )
    return RunSummary(t, tally_line(t), stats, line)


WORKLOAD = Workload(SPEC, drive, summarize)
