"""What the report shows of an eos run: the journey of a seeded value through its ops.

An eos value is a string that travels by name: seeded into the input topic, read and
transformed in a processor's transaction (its output is ``out-<value>``), drained by the final
read. So the ops that touched it are the ops that carry its name, and this module says what
each did to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from workloads.spec import Journeys, ReportSpec


def carried(op: Mapping[str, Any]) -> list[str]:
    """The value names an op carries: seeded values, a transaction's inputs, the drained
    outputs (``out-<value>``) by the input they came from."""
    v = op.get("value")
    if not isinstance(v, dict):
        return []
    found = []
    for key in ("inputs", "values"):
        for item in v.get(key) or []:
            if isinstance(item, list):
                found += [x for x in item if isinstance(x, str)]
    for key in ("outputs", "records"):
        for item in v.get(key) or []:
            if isinstance(item, list) and len(item) > 2 and isinstance(item[2], str):
                found.append(item[2][4:] if item[2].startswith("out-") else item[2])
    return found


def describe(value: str, inv: Mapping[str, Any], op: Mapping[str, Any] | None) -> str:
    """What an op did to ``value``, in words: where it was seeded, which transaction read it
    and where its output went, where the final read found it. Other ops: their error."""
    iv = inv.get("value") if isinstance(inv.get("value"), dict) else {}
    ov = op.get("value") if op and isinstance(op.get("value"), dict) else {}
    out = f"out-{value}"
    parts: list[str] = []
    if inv["f"] == "send":
        for item in ov.get("values") or iv.get("values") or []:
            if isinstance(item, list) and item and item[0] == value:
                where = f"partition {item[1]}" if len(item) > 1 else "?"
                offset = item[2] if len(item) > 2 else None
                parts.append(
                    f"seeded to input {where}" + (f" @ {offset}" if offset is not None else "")
                )
    elif inv["f"] == "txn":
        for item in iv.get("inputs") or []:
            if isinstance(item, list) and len(item) > 2 and item[2] == value:
                parts.append(f"input {item[0]}@{item[1]} in txn {iv.get('txn')}")
        parts.append(
            f"transactional id {iv.get('transactional_id') or '-'}, "
            f"generation {iv.get('generation')}"
        )
        for item in ov.get("outputs") or []:
            if isinstance(item, list) and len(item) > 2 and item[2] == out:
                parts.append(f"wrote {out} to output {item[0]}@{item[1]}")
    elif inv["f"] == "read":
        for rec in ov.get("records") or []:
            if isinstance(rec, list) and len(rec) > 2 and rec[2] == out:
                h = rec[3] if len(rec) > 3 and isinstance(rec[3], dict) else {}
                parts.append(
                    f"{ov.get('isolation', iv.get('isolation', ''))} read found {out} at output "
                    f"{ov.get('partition', iv.get('partition'))}@{rec[0]} (written by instance "
                    f"{h.get('instance', '?')}, generation {h.get('generation', '?')}, txn "
                    f"{h.get('txn-seq', '?')}, transactional id {h.get('transactional-id') or '-'})"
                )
    if op is None:
        parts.append("the process never completed this op (killed or stopped inside it)")
    elif op.get("error"):
        parts.append(f"error: {op.get('error')}")
    return "; ".join(parts) or json.dumps(iv, default=str)[:300]


REPORT = ReportSpec(
    journeys=Journeys(
        intro="Every operation that carried a value an example names: seeded, read and "
        "transformed in a transaction, read by the final drain.",
        describe=describe,
        carried=carried,
    ),
)
