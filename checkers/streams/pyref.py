"""The streams checks in plain Python: the reference the Spark engine must agree with.

The rules (docs/anomalies.md, "streams"):

* every committed input below the application's committed offset has exactly one committed
  output, and exactly one committed aggregate update (``lost``, ``duplicate``);
* every committed output and aggregate update comes from a committed input, the one its
  headers name (``aborted-read``);
* an aggregate update after input ``i`` of key ``k`` is the count and sum of ``k``'s inputs
  up to ``i`` in offset order (``wrong-aggregate``): an input counted twice or skipped shows
  as a wrong count, even where no output was duplicated;
* once the application drained: each key's last committed aggregate and its last committed
  changelog value are the count and sum of all its inputs (``wrong-final-aggregate``,
  ``changelog-mismatch``);
* the run finished (``progress``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.streams import results as R
from checkers.streams.facts import StreamsFacts
from history.streams_records import group_key, number, parse_aggregate


def expectations(
    facts: StreamsFacts,
) -> tuple[dict[tuple[int, int], tuple[str, str, tuple[int, int]]], dict[str, tuple[int, int]]]:
    """Per input (partition, offset): its value, its key and its key's count and sum up to
    it; per key: the count and sum of all its inputs."""
    by_key: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for p, o, v in facts.inputs:
        by_key[group_key(v, p, facts.groups)].append((o, p, v))
    prefix: dict[tuple[int, int], tuple[str, str, tuple[int, int]]] = {}
    totals: dict[str, tuple[int, int]] = {}
    for key, rows in by_key.items():
        count = total = 0
        for o, p, v in sorted(rows):
            count += 1
            total += number(v)
            prefix[(p, o)] = (v, key, (count, total))
        totals[key] = (count, total)
    return prefix, totals


def judge(
    facts: StreamsFacts, max_examples: int
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    o = facts.options
    prefix, totals = expectations(facts)
    counts: dict[str, int] = defaultdict(int)
    cases: dict[str, list[tuple[Any, dict[str, Any]]]] = defaultdict(list)

    def add(name: str, order: Any, n: int, args: Any) -> None:
        counts[name] += n
        cases[name].append((order, args))

    written = {"output": facts.outputs, "aggregate": facts.aggregates}
    topic_of = {"output": o["output_topic"], "aggregate": o["aggregate_topic"]}
    copies: dict[tuple[str, int, int], list[R.Record]] = defaultdict(list)
    for kind, rows in written.items():
        topic = topic_of[kind]
        for p, off, key, value, sp, so, sv in rows:
            rec = R.record(topic, p, off, key, value)
            known = prefix.get((sp, so)) if sp is not None and so is not None else None
            if known is None or known[0] != sv:
                add("aborted-read", (topic, p, off), 1, (sv, topic, rec))
                continue
            copies[(kind, sp, so)].append(rec)
            if kind == "aggregate":
                v, k, want = known
                got = parse_aggregate(value)
                if got != want:
                    add("wrong-aggregate", (sp, so, p, off), 1, (v, k, sp, so, got, want, rec))
    for (kind, sp, so), recs in copies.items():
        if len(recs) > 1:
            v = prefix[(sp, so)][0]
            add("duplicate", (topic_of[kind], sp, so), len(recs) - 1, (v, sp, so, recs))
    for (p, off), (v, _k, _w) in prefix.items():
        c = facts.committed.get(p, -1)
        for kind in ("output", "aggregate"):
            if off < c and (kind, p, off) not in copies:
                add("lost", (p, off, topic_of[kind]), 1, (v, p, off, topic_of[kind], c))
    if facts.drained:
        aggregates = [(p, off, k, v) for p, off, k, v, *_ in facts.aggregates]
        for name, topic, rows in (
            ("wrong-final-aggregate", o["aggregate_topic"], aggregates),
            ("changelog-mismatch", o["changelog_topic"], facts.changelog),
        ):
            last: dict[str, tuple[int, int, str | None]] = {}
            for p, off, k, v in rows:
                if k is not None and (k not in last or last[k][:2] < (p, off)):
                    last[k] = (p, off, v)
            for k, want in totals.items():
                seen = last.get(k)
                got = parse_aggregate(seen[2]) if seen else None
                if got != want:
                    rec = R.record(topic, seen[0], seen[1], k, seen[2]) if seen else None
                    add(name, (k,), 1, (k, got, want, rec))
    if facts.incomplete:
        add("progress", (0,), len(facts.incomplete), tuple(facts.incomplete))
    examples: dict[str, list[dict[str, Any]]] = {}
    for name, found in cases.items():
        found.sort(key=lambda c: c[0])
        examples[name] = [_example(name, c[1]) for c in found[:max_examples]]
    return dict(counts), examples


def _example(name: str, args: Any) -> dict[str, Any]:
    if name == "aborted-read":
        return R.aborted_read(*args)
    if name == "wrong-aggregate":
        return R.wrong_aggregate(*args)
    if name == "duplicate":
        v, sp, so, recs = args
        return R.duplicate(v, sp, so, recs[0]["topic"], recs)
    if name == "lost":
        return R.lost(*args)
    if name == "progress":
        return R.progress(list(args))
    return R.wrong_last(name, *args)
