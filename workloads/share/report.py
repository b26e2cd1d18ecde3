"""What the report shows of a share run: the journey of a value through its deliveries (the
seeder's send, each delivery with its member and delivery count, its processing, each
acknowledgement with the broker's answer, the output's final read), and a figure of the
records the members held (acquired, not yet acknowledged) and of the redeliveries, and one of
each share partition's start offset, over time with the fault bands."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from workloads.seeder import seeded_values
from workloads.spec import Figures, Journeys, ReportSpec, Series

Points = Callable[[Mapping[str, Any]], "list[tuple[str, float]] | None"]


def _values(op: Mapping[str, Any]) -> list[str]:
    """The input values an op carries (seeder sends, a member's deliveries, processing and
    acknowledgements, the final reads' keys): how the report follows one value."""
    value = op.get("value")
    if not isinstance(value, dict):
        return []
    rows = value.get("values") or value.get("records") or value.get("acks") or []
    if op.get("f") == "read":
        return [str(r[1]) for r in rows if isinstance(r, list) and len(r) > 1]
    col = 0 if op.get("process") == "seeder" else 2
    return [str(r[col]) for r in rows if isinstance(r, list) and len(r) > col]


def _first_accepts() -> Callable[[Mapping[str, Any]], int | None]:
    """Values taken as accepted for the first time (a value accepted again after a lost
    answer counts once)."""
    seen: set[str] = set()

    def count(op: Mapping[str, Any]) -> int | None:
        if op.get("f") != "ack" or not isinstance(op.get("value"), dict):
            return None
        new = {a[2] for a in op["value"].get("acks", []) if a[3] == "accept" and a[4] is None}
        new -= seen
        seen.update(new)
        return len(new)

    return count


def _describe(value: str, inv: Mapping[str, Any], op: Mapping[str, Any] | None) -> str:
    if op is None:
        return "the process never completed this op (killed or stopped inside it)"
    rows = (op.get("value") or {}).get("records") or (op.get("value") or {}).get("acks") or []
    mine = [r for r in rows if isinstance(r, list) and len(r) > 2 and r[2] == value]
    if op.get("f") == "poll" and mine:
        return f"delivered to member {op['process']} with delivery count {mine[0][3]}"
    if op.get("f") == "ack" and mine:
        answer = "taken" if op.get("type") == "ok" and mine[0][4] is None else "not taken"
        return f"{mine[0][3]} by member {op['process']}: {answer}" + (
            f" ({mine[0][4]})" if op.get("type") == "ok" and mine[0][4] else ""
        )
    return f"error: {op['error']}" if op.get("error") else ""


def _held_and_redelivered() -> Points:
    """Per ``ok`` op: the records all members hold (acquired by a poll, not yet answered by
    an acknowledgement; a member's exit drops what it held, as the broker does when its
    locks expire) and the redeliveries so far (deliveries with a count above one)."""
    held: dict[Any, int] = {}
    redelivered = 0

    def points(op: Mapping[str, Any]) -> list[tuple[str, float]] | None:
        nonlocal redelivered
        if not isinstance(op.get("process"), int):
            return None
        value = op.get("value") if isinstance(op.get("value"), dict) else {}
        member = op["process"]
        if op["f"] == "poll":
            records = value.get("records", [])
            held[member] = held.get(member, 0) + len(records)
            redelivered += sum(1 for r in records if r[3] > 1)
        elif op["f"] == "ack":
            held[member] = max(0, held.get(member, 0) - len(value.get("acks", [])))
        elif op["f"] == "exit":
            held[member] = 0
        else:
            return None
        return [("held by members", float(sum(held.values()))), ("redeliveries", redelivered)]

    return points


def _start_offsets() -> Points:
    """Per look of ``share-monitor`` (and the final ``share-state``): each share partition's
    start offset. A start that jumps ahead of what was delivered, or a new partition that
    starts above zero, is where records were skipped."""

    def points(op: Mapping[str, Any]) -> list[tuple[str, float]] | None:
        value = op.get("value") if isinstance(op.get("value"), dict) else {}
        if op.get("type") != "ok" or op.get("f") not in ("start-offsets", "share-state"):
            return None
        rows = value.get("partitions") or []
        starts = [(r["partition"], r["start"]) if isinstance(r, dict) else r for r in rows]
        return [(f"partition {p}", float(start)) for p, start in starts if start is not None]

    return points


FIGURES = Figures(
    throughput=_first_accepts,
    fed=lambda: seeded_values,
    latency_fs=("poll", "process", "ack"),
    throughput_label="values/s\nfirst accepted",
    latency_label="op latency (s)\n(poll, process, ack)",
    backlog_label="backlog\n(seeded - accepted)",
    title="values accepted, op latency and backlog (seeded, not yet accepted), with faults",
)

REPORT = ReportSpec(
    journeys=Journeys(
        intro="Every operation that carried a value an example names: the seeder's send, "
        "each delivery (member, delivery count), its processing and acknowledgement (with "
        "the broker's answer), and the output's final read.",
        carried=_values,
        describe=_describe,
    ),
    series=(
        Series(
            "records held by members (acquired, not yet acknowledged) and redeliveries",
            "records",
            _held_and_redelivered,
        ),
        Series("share-partition start offsets", "offset", _start_offsets),
    ),
)
