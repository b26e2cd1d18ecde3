"""What the late-request faults did in a run: how many held requests were delivered late, what
the broker answered them, and, for a held Produce, whether its batch was appended again.

A campaign of ``late-endtxn`` or ``late-produce`` runs is only half read from the verdicts: a
valid run may mean the broker refused every late request (the fix works) or that none was
delivered (the fault missed). The toxic records each hold's answer; the log dump says whether
a held batch reached the log a second time, and whether it came after its transaction's
marker. Both go into ``campaign.json`` beside each run's verdict.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path
from typing import Any


@functools.cache
def _error_names() -> dict[int, str]:
    from confluent_kafka import KafkaError

    names = {0: "NONE"}
    for name in dir(KafkaError):
        value = getattr(KafkaError, name)
        if name.isupper() and isinstance(value, int) and value > 0:
            names.setdefault(value, name)
    return names


def error_name(code: int | None) -> str:
    if code is None:
        return "no answer"
    return _error_names().get(code, str(code))


def held_requests(run_dir: Path) -> list[dict[str, Any]]:
    """Every held request the nemesis recorded at its faults' stops, with the fault's kind."""
    out: list[dict[str, Any]] = []
    history = run_dir / "history.jsonl"
    if not history.exists():
        return out
    with history.open() as f:
        for line in f:
            if '"late_delivered"' not in line:
                continue
            op = json.loads(line)
            value = op.get("value") or {}
            if op.get("process") == "nemesis" and op.get("f") == "stop":
                out.extend({**h, "kind": value.get("kind")} for h in value.get("held", []))
    return out


def _produce_fates(run_dir: Path, produces: list[dict[str, Any]]) -> Counter[str]:
    """For each delivered held Produce: ``appended-late`` when its batch (producer, epoch,
    base sequence) is in the leader's log twice or once after its transaction's marker,
    else ``not-appended``; whether it came ``after-{commit,abort}-marker`` (its transaction
    already ended in the log when it was delivered) or ``before-marker``; and
    ``inside-next-transaction`` when the producer's next transaction had written to the
    partition before it came."""
    fates: Counter[str] = Counter()
    dump = run_dir / "evidence" / "logdump.jsonl"
    if not produces or not dump.exists():
        return fates
    # A producer's rows only: its batches and markers are all a fate needs.
    producers = {h["producer_id"] for h in produces}
    rows: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    with dump.open() as f:
        for line in f:
            row = json.loads(line)
            if row.get("producerId") in producers and "topic" in row:
                rows.setdefault((row["topic"], row["partition"], row["node"]), []).append(row)
    topics = {t for t, _, _ in rows}
    for h in produces:
        # Produce v13 names a topic by id (the toxic records it in hex): any topic then.
        named = h["topic"] if h["topic"] in topics else None
        replicas = [
            r
            for (t, p, _), r in rows.items()
            if p == h["partition"] and named in (None, t) and any(_same_batch(x, h) for x in r)
        ]
        log = max(replicas, key=len, default=[])
        mine = [r for r in log if r.get("producerId") == h["producer_id"]]
        copies = [r for r in mine if _same_batch(r, h)]
        if not copies:
            fates["batch-not-in-log"] += 1
            continue
        first = min(r["offset"] for r in copies)
        ends = [r for r in mine if r.get("marker") and r["offset"] > first]
        end = min(ends, key=lambda r: r["offset"]) if ends else None
        late = len(copies) > 1 or (
            end is not None and any(r["offset"] > end["offset"] for r in copies)
        )
        fates["appended-late" if late else "not-appended"] += 1
        if end is not None:
            after = end["create_time"] <= h["released_at_ms"]
            fates[f"after-{end['marker'].lower()}-marker" if after else "before-marker"] += 1
            following = [
                r
                for r in mine
                if r["offset"] > end["offset"] and not r.get("marker") and r not in copies
            ]
            if following and min(r["create_time"] for r in following) <= h["released_at_ms"]:
                # The producer's next transaction had written here already.
                fates["inside-next-transaction"] += 1
    return fates


def _same_batch(row: dict[str, Any], held: dict[str, Any]) -> bool:
    """``row`` is the first record of the held batch (or of a copy of it)."""
    return (
        row.get("producerId") == held["producer_id"]
        and row.get("producerEpoch") == held["producer_epoch"]
        and row.get("sequence") == held["base_sequence"]
        and not row.get("marker")
    )


def late_request_summary(run_dir: Path) -> dict[str, Any]:
    """Per run: late requests delivered, the broker's answers by name, a held Produce's fate."""
    held = held_requests(run_dir)
    delivered = [h for h in held if h.get("released_at_ms")]
    if not held:
        return {}
    answers = Counter(error_name(h.get("error_code")) for h in delivered)
    produces = [h for h in delivered if h.get("kind") == "late-produce" and h.get("topic")]
    summary: dict[str, Any] = {
        "held": len(held),
        "delivered": len(delivered),
        "answers": dict(answers),
    }
    fates = _produce_fates(run_dir, produces)
    if fates:
        summary["produce_fates"] = dict(fates)
    return summary
