"""What the report shows of a streams run: the journey of an input, or of a group key.

An input value travels by name: seeded into the input topic, found by the final read of the
input, mapped to ``out-<value>`` on the output topic and counted into an aggregate update
whose headers name it; a group key (what the final-aggregate and changelog examples name)
travels as the key of the aggregate updates and of the changelog records. The ops that
touched a value are the ops that carry its name; this module says what each did to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from history.streams_records import H_INSTANCE, H_SRC_VALUE, H_TASK, OUTPUT_PREFIX
from workloads.spec import Journeys, ReportSpec


def _records(op: Mapping[str, Any]) -> list[list[Any]]:
    v = op.get("value")
    if not isinstance(v, dict):
        return []
    return [r for r in v.get("records") or [] if isinstance(r, list) and len(r) > 3]


def carried(op: Mapping[str, Any]) -> list[str]:
    """Seeded values; in the final reads, the input each record came from (an input as
    itself, an output by its value, an aggregate update by its header) and each record's
    key when it is a group key (aggregate updates and changelog records)."""
    v = op.get("value")
    if not isinstance(v, dict):
        return []
    found = [x for item in v.get("values") or [] if isinstance(item, list) for x in item[:1]]
    for _offset, key, value, headers in _records(op):
        h = headers if isinstance(headers, dict) else {}
        if h.get(H_SRC_VALUE):
            found.append(h[H_SRC_VALUE])
            if isinstance(value, str) and not value.startswith(OUTPUT_PREFIX) and key:
                found.append(key)
        elif isinstance(value, str) and value[:1] == "v":
            found.append(value)
        elif isinstance(key, str) and key.startswith("p"):
            found.append(key)  # a changelog record
    return [x for x in found if isinstance(x, str)]


def describe(value: str, inv: Mapping[str, Any], op: Mapping[str, Any] | None) -> str:
    """What an op did to ``value``: where it was seeded, and where each final read found it
    (as an input, an output, an aggregate update with its count and sum, a changelog
    value), with the instance and task that wrote it."""
    iv = inv.get("value") if isinstance(inv.get("value"), dict) else {}
    ov = op.get("value") if op and isinstance(op.get("value"), dict) else {}
    parts: list[str] = []
    if inv["f"] == "send":
        for item in ov.get("values") or iv.get("values") or []:
            if isinstance(item, list) and item and item[0] == value:
                offset = item[2] if len(item) > 2 else None
                parts.append(
                    f"seeded to input partition {item[1]}"
                    + (f" @ {offset}" if offset is not None else "")
                )
    elif inv["f"] == "read" and op is not None:
        where = f"{ov.get('isolation', '')} read of {ov.get('topic')}[{ov.get('partition')}]"
        for offset, key, rec_value, headers in _records(op):
            h = headers if isinstance(headers, dict) else {}
            who = f"instance {h.get(H_INSTANCE, '?')}, task {h.get(H_TASK, '?')}"
            if rec_value == value:
                parts.append(f"{where}: the input @ {offset}")
            elif h.get(H_SRC_VALUE) == value and str(rec_value).startswith(OUTPUT_PREFIX):
                parts.append(f"{where}: output {rec_value} @ {offset} ({who})")
            elif h.get(H_SRC_VALUE) == value or (key == value and h.get(H_SRC_VALUE)):
                parts.append(
                    f"{where}: aggregate {key} = {rec_value} @ {offset} after input "
                    f"{h.get(H_SRC_VALUE)} ({who})"
                )
            elif key == value:
                parts.append(f"{where}: changelog {key} = {rec_value} @ {offset}")
    if op is None:
        parts.append("the process never completed this op (killed or stopped inside it)")
    elif op.get("error"):
        parts.append(f"error: {op.get('error')}")
    return "; ".join(parts) or json.dumps(iv, default=str)[:300]


def _state(op: Mapping[str, Any]) -> tuple[str, Any] | None:
    """An instance's state transition is what the report lists beside the rebalances."""
    if op.get("f") != "state" or not isinstance(op.get("value"), dict):
        return None
    return f"{op['value'].get('old')} -> {op['value'].get('new')}", op["process"]


REPORT = ReportSpec(
    journeys=Journeys(
        intro="Every operation that carried an input or a group key an example names: "
        "seeded, then found by the final reads of the input, the output, the aggregate "
        "updates and the changelog.",
        describe=describe,
        carried=carried,
    ),
    assignment=_state,
    assignments_title="Instance state transitions",
)
