"""The offsets check in plain Python: the reference the Spark engine must agree with.

The rule (docs/anomalies.md, "offsets workload"), per (group, topic, partition), over the
facts of :mod:`checkers.offsets.facts`: an ``ok`` read invoked after ``ok`` commits completed
must return at least the highest offset they acknowledged (a read returning null, no
committed offset, counts as -1). A read below it shows that commit ``lost-commit``
(KAFKA-20634: the coordinator acknowledged a write it then lost).

Why only the highest, and only before the read's invocation: offsets a group commits only
rise, so the highest acknowledged one is what the group's committed offset must be at least;
and a commit still in flight when the read began may be applied after the read was answered,
so it is no evidence either way. A commit whose outcome is unknown (``info``, or never
answered) is never acknowledged: it holds no read to anything.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.offsets import results as R
from checkers.offsets.facts import Key, OffsetsFacts


def lost_commits(facts: OffsetsFacts) -> list[R.Case]:
    """Every lost commit, in :data:`results.Case` order: a sweep per key over its reads by
    invocation and its acknowledgements by completion."""
    acked: dict[Key, list[tuple[int, int, int]]] = defaultdict(list)  # (ok, invoke, offset)
    for group, topic, partition, offset, invoke, done in facts.acknowledged():
        acked[(group, topic, partition)].append((done, invoke, offset))
    reads: dict[Key, list[tuple[int, int, int | None]]] = defaultdict(list)
    for group, topic, partition, offset, invoke, done in facts.reads:
        reads[(group, topic, partition)].append((invoke, done, offset))
    cases: list[R.Case] = []
    for key in sorted(acked.keys() & reads.keys()):
        acks = sorted(acked[key])
        first: dict[int, tuple[int, int]] = {}  # offset -> its first acknowledgement (invoke, ok)
        top, seen = -1, 0
        shown: set[int] = set()
        for invoke, done, offset in sorted(reads[key]):
            while seen < len(acks) and acks[seen][0] < invoke:
                ok, commit, acked_offset = acks[seen]
                first.setdefault(acked_offset, (commit, ok))
                top, seen = max(top, acked_offset), seen + 1
            if seen and (-1 if offset is None else offset) < top and top not in shown:
                shown.add(top)
                cases.append((*key, top, offset, *first[top], invoke, done))
    cases.sort(key=lambda c: c[:4])
    return cases


def judge(
    facts: OffsetsFacts, max_examples: int
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    cases = lost_commits(facts)
    return R.found(cases[:max_examples], len(cases))
