"""The share checks in plain Python: the reference the Spark engine must agree with.

The rules (docs/anomalies.md, "share workload"), over the facts of
:mod:`checkers.share.facts` ("taken" = an acknowledgement whose commit was answered with no
error; "before"/"after" = the merged history's order):

* a committed input is processed (its value in the output's read_committed read) or archived
  (a taken ``reject`` of its record, or a delivery at the delivery limit not answered by a
  taken ``accept``); one that is neither is ``lost`` once the group drained or when its offset
  is below its partition's start offset, and ``undelivered`` otherwise (plus one for a drain
  that did not complete);
* no delivery's poll is invoked after a taken ``accept`` or ``reject`` of the same record
  completed (``redelivered-after-ack``), and no record has two taken accepts or
  rejects answering different deliveries (``acknowledged-twice``: the second is each
  later one, against the first to complete);
* no delivery of a record with a higher count completes after the poll of a lower-count
  delivery was invoked and before its holder invokes an acknowledgement of it the broker then
  takes (``concurrent-acquisition``);
* a record's delivery counts are never above the limit (``delivery-count``); one repeated,
  or lower than the count of a delivery that completed before the poll was invoked, is
  reported as allowed (``delivery-count-reset``: KIP-932 persists no acquisition);
* under read_committed no aborted value is delivered or processed (``aborted-read``), and no
  value the seeder never sent is delivered or processed (``unknown-value``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Final

from checkers.share import results as R
from checkers.share.facts import Ack, Delivery, ShareFacts

#: A poison value's shape (``history.eos_records.poison_value``): aborted by construction.
POISON: Final = re.compile(r"^x[0-9]{6}$")

Key = tuple[int, int, int, int]  # (member, partition, offset, poll ok index): one delivery


def taken(a: Ack) -> bool:
    return a[7] == "ok" and a[8] is None


def ack_op(a: Ack) -> int:
    """The op that shows an acknowledgement: its completion, or its invocation if none."""
    return a[6] if a[6] is not None else a[5]


def seen(d: Delivery) -> R.Seen:
    return (d[6], d[4], d[0], d[1], d[3])


def answers(facts: ShareFacts) -> dict[Key, list[Ack]]:
    """Each delivery's acknowledgements, in the order they were invoked."""
    out: dict[Key, list[Ack]] = defaultdict(list)
    for a in sorted(facts.acks, key=lambda a: (a[5], a[3])):
        if a[9] is not None:
            out[(a[4], a[0], a[1], a[9])].append(a)
    return out


def archived(facts: ShareFacts) -> set[tuple[int, int]]:
    """The records (partition, offset) the broker may have archived: a reject it took or
    whose answer is unknown (a commit that raised, a member killed inside it: it may have
    been taken), or a delivery at the limit that no taken accept answered (released,
    refused, expired, its member gone)."""
    by = answers(facts)
    out = {(a[0], a[1]) for a in facts.acks if a[3] == "reject" and (taken(a) or a[7] != "ok")}
    for d in facts.deliveries:
        acks = by.get((d[4], d[0], d[1], d[6]), [])
        if d[3] == facts.limit and not any(taken(a) and a[3] == "accept" for a in acks):
            out.add((d[0], d[1]))
    return out


def judge(
    facts: ShareFacts, max_examples: int
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    counts: dict[str, int] = defaultdict(int)
    cases: dict[str, list[tuple[Any, tuple[Any, tuple[Any, ...]]]]] = defaultdict(list)

    def add(name: str, order: Any, build: Any, *args: Any) -> None:
        """One case: its place in the type's order, and the builder of its example with its
        arguments (only the first ``max_examples`` are built)."""
        counts[name] += 1
        cases[name].append((order, (build, args)))

    by = answers(facts)
    records: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for d in sorted(facts.deliveries, key=lambda d: (d[6], d[4], d[3])):
        records[(d[0], d[1])].append(d)
    _unfinished(facts, by, records, add)
    _acknowledged(facts, by, records, add)
    _counts(facts, records, add)
    _values(facts, add)
    examples: dict[str, list[dict[str, Any]]] = {}
    for name, found in cases.items():
        found.sort(key=lambda c: c[0])
        examples[name] = [build(*args) for _, (build, args) in found[:max_examples]]
    return dict(counts), examples


def _first(acks: list[Ack]) -> tuple[str | None, str | None, int | None]:
    if not acks:
        return None, None, None
    a = acks[0]
    return a[3], R.outcome(a[7], a[8]), ack_op(a)


def _unfinished(facts: ShareFacts, by: dict[Key, list[Ack]], records: Any, add: Any) -> None:
    processed = {out[3] for out in facts.outputs if out[3] is not None}
    done = archived(facts)
    if not facts.drained:
        why = (facts.state_op, facts.state_error, facts.starts, facts.ends)
        add("undelivered", (-1, -1), R.not_drained, *why)
    for v, p, o, op in facts.inputs:
        if v in processed or (p, o) in done:
            continue
        start = facts.starts.get(p)
        if facts.drained or (start is not None and o < start):
            history = [(seen(d), *_first(by.get((d[4], p, o, d[6]), []))) for d in records[(p, o)]]
            add("lost", (p, o), R.lost, v, p, o, start, facts.drained, history, op)
        else:
            add("undelivered", (p, o), R.undelivered, v, p, o, start, op)


def _acknowledged(facts: ShareFacts, by: dict[Key, list[Ack]], records: Any, add: Any) -> None:
    final = defaultdict(list)  # (p, o) -> taken accepts and rejects, by completion
    for a in sorted((a for a in facts.acks if taken(a)), key=lambda a: (a[6], a[4], a[3])):
        if a[3] in ("accept", "reject"):
            final[(a[0], a[1])].append(a)
    count_of: dict[Key, int] = {}  # the smallest, for a poll that listed a record twice
    for d in facts.deliveries:
        key = (d[4], d[0], d[1], d[6])
        count_of[key] = min(count_of.get(key, d[3]), d[3])

    def answer(a: Ack) -> R.Taken:
        answered = count_of.get((a[4], a[0], a[1], a[9])) if a[9] is not None else None
        return (a[4], answered, a[3], ack_op(a), a[9])

    for (p, o), done in final.items():
        for a in done[1:]:
            if (a[4], a[9]) != (done[0][4], done[0][9]):
                order = (p, o, a[6], a[4], a[3])
                add("acknowledged-twice", order, R.twice, a[2], p, o, answer(done[0]), answer(a))
    for (p, o), ds in records.items():
        for d2 in ds:
            a = next((a for a in final.get((p, o), []) if a[6] < d2[5]), None)
            if a is not None:
                order = (p, o, d2[6], d2[4], d2[3])
                add("redelivered-after-ack", order, R.redelivered, d2[2], p, o, answer(a), seen(d2))
        for d1 in ds:
            took = [a for a in by.get((d1[4], p, o, d1[6]), []) if taken(a)]
            for d2 in ds:
                a = next((a for a in took if a[5] > d2[6]), None)
                if d2[3] > d1[3] and d2[6] > d1[5] and a is not None:
                    order = (p, o, d1[6], d1[4], d1[3], d2[6], d2[4], d2[3])
                    pair = (seen(d1), (a[3], ack_op(a)), seen(d2))
                    add("concurrent-acquisition", order, R.concurrent, d1[2], *pair)


def _counts(facts: ShareFacts, records: Any, add: Any) -> None:
    limit = facts.limit
    for (p, o), ds in records.items():
        for i, d2 in enumerate(ds):
            same = next((d1 for d1 in ds[:i] if d1[3] == d2[3]), None)
            back = next((d1 for d1 in ds if d1[6] < d2[5] and d1[3] > d2[3]), None)
            for kind, d1 in (("repeated", same), ("skipped-back", back), ("over-limit", d2)):
                if d1 is None or (kind == "over-limit" and d2[3] <= limit):
                    continue
                pair = (seen(d2),) if d1 is d2 else (seen(d1), seen(d2))
                order = (p, o, d2[6], d2[4], d2[3], kind)
                name = "delivery-count" if kind == "over-limit" else "delivery-count-reset"
                add(name, order, R.delivery_count, d2[2], kind, limit, *pair)


def _values(facts: ShareFacts, add: Any) -> None:
    sent = {v: (kind, op) for v, kind, op in facts.sent}
    topic = facts.options["output_topic"]
    delivered: dict[str, list[R.Seen]] = defaultdict(list)
    written: dict[str, list[tuple[int, int, str | None]]] = defaultdict(list)
    for d in facts.deliveries:
        delivered[d[2]].append(seen(d))
    for p, o, k, v in facts.outputs:
        if v is not None:
            written[v].append((p, o, k))
    committed = facts.isolation == "read_committed"
    for v in sorted(set(delivered) | set(written)):
        kind, op = sent.get(v, (None, None))
        if committed and (kind == "aborted" or POISON.match(v)):
            name = "aborted-read"
        elif kind is None:
            name = "unknown-value"
        else:
            continue
        add(name, (v,), R.bad_value, name, v, delivered[v], written[v], topic, op)
