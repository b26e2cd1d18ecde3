"""Ordering anomalies of the queue checker: skips and backwards moves in a key's log.

Split from :mod:`checkers.queue.analysis` (which builds the version orders these checks use).
Two scopes, as in Jepsen:

* *internal* (``int-*``): consecutive polls or sends of one key inside a single transaction;
* *external* (``poll-skip``, ``nonmonotonic-poll``, ``nonmonotonic-send``): consecutive
  transactions of one process, with assign/subscribe resetting the keys being tracked.

An info completion ends a process's session (Jepsen renames a process after an info op, so
for Jepsen histories this changes nothing; for histories that reuse the id it avoids comparing
a fresh client's position with the crashed one's). The info op itself is still checked.

Distances are measured in dense log indices (offset gaps are transaction markers), and a pair
with any value of unknown position is never reported.
"""

from __future__ import annotations

from collections.abc import Hashable
from itertools import pairwise
from typing import Any

from checkers.queue.analysis import Analysis
from checkers.queue.extract import Crash, Key, SubChange, Txn


def internal_cases(a: Analysis, writes: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Within one txn, consecutive polls (or sends) of a key that skip or go backwards.

    Returns ``(skips, nonmonotonic)``. For polls, keys named in the txn's rebalance log are
    exempt: a rebalance legitimately moves the consumer's position.
    """
    skips: list[dict[str, Any]] = []
    nonmono: list[dict[str, Any]] = []
    for t in a.parsed.txns:
        items = t.writes if writes else t.reads
        for k, pairs in items.items():
            if len(pairs) < 2 or (not writes and k in t.rebalanced):
                continue
            for (_, v1), (_, v2) in pairwise(pairs):
                d, i1, i2 = a.delta(k, v1, v2)
                if d > 1:
                    assert i1 is not None and i2 is not None
                    skips.append(
                        {
                            "key": k,
                            "values": [v1, v2],
                            "delta": d,
                            "skipped": a.logs[k].skipped(i1, i2),
                            "op": t.op,
                        }
                    )
                elif d < 1:
                    nonmono.append({"key": k, "values": [v1, v2], "delta": d, "op": t.op})
    return skips, nonmono


def _restrict(last: dict[Key, Txn], ev: SubChange) -> dict[Key, Txn]:
    return {k: t for k, t in last.items() if k in ev.keys}


def poll_cases(a: Analysis) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Across a process's successive polls of a key: skips and backwards jumps.

    Each process remembers, per key, the last ok txn that polled it. An ok/info
    assign/subscribe forgets keys no longer assigned. Every poll completion (ok, info or fail)
    is compared against the remembered position, because an aborted poll must still resume
    where the last committed one left off; only ok polls advance the position.
    """
    skips: list[dict[str, Any]] = []
    nonmono: list[dict[str, Any]] = []
    state: dict[Hashable, dict[Key, Txn]] = {}
    for ev in a.parsed.events:
        if isinstance(ev, Crash):
            state.pop(ev.process, None)
            continue
        if isinstance(ev, SubChange):
            if ev.type == "info":
                state.pop(ev.process, None)
            elif ev.type == "ok" and ev.process in state:
                state[ev.process] = _restrict(state[ev.process], ev)
            continue
        if not ev.reads:
            if ev.type == "info":
                state.pop(ev.process, None)
            continue
        last = state.setdefault(ev.process, {})
        for k, pairs in ev.reads.items():
            prev = last.get(k)
            if prev is None:
                continue
            v = prev.reads[k][-1][1]
            v2 = pairs[0][1]
            d, i1, i2 = a.delta(k, v, v2)
            if d > 1:
                assert i1 is not None and i2 is not None
                skips.append(
                    {
                        "key": k,
                        "values": [v, v2],
                        "delta": d,
                        "skipped": a.logs[k].skipped(i1, i2),
                        "ops": [prev.op, ev.op],
                    }
                )
            elif d < 1:
                nonmono.append({"key": k, "values": [v, v2], "delta": d, "ops": [prev.op, ev.op]})
        if ev.type == "ok":
            for k in ev.reads:
                last[k] = ev
        elif ev.type == "info":
            state.pop(ev.process, None)
    return skips, nonmono


def nonmonotonic_send_cases(a: Analysis) -> list[dict[str, Any]]:
    """A process's later send/txn landed at or before its previous send to the same key."""
    out: list[dict[str, Any]] = []
    state: dict[Hashable, dict[Key, Txn]] = {}
    for ev in a.parsed.events:
        if ev.type not in ("ok", "info"):
            continue
        if isinstance(ev, Crash):
            state.pop(ev.process, None)
            continue
        if isinstance(ev, SubChange):
            if ev.type == "info":
                state.pop(ev.process, None)
            elif ev.process in state:
                state[ev.process] = _restrict(state[ev.process], ev)
            continue
        if not ev.writes:
            if ev.type == "info":
                state.pop(ev.process, None)
            continue
        last = state.setdefault(ev.process, {})
        for k, pairs in ev.writes.items():
            prev = last.get(k)
            if prev is not None:
                v = prev.writes[k][-1][1]
                v2 = pairs[0][1]
                d, _, _ = a.delta(k, v, v2)
                if d < 1:
                    out.append({"key": k, "values": [v, v2], "delta": d, "ops": [prev.op, ev.op]})
            last[k] = ev
        if ev.type == "info":
            state.pop(ev.process, None)
    return out
