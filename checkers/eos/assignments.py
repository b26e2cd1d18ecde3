"""Where a processor started a partition it was given, against what the group had committed.

KIP-447 asks a consumer given a partition to start at the group's committed offset, waiting
while transactional offsets for it are pending (``require_stable``). A processor whose first
read of a partition starts below an offset the group had committed *before* it was given the
partition reads committed inputs again: every one of them gets a second output. That is the
``started-below-committed`` anomaly; finding F5 (librdkafka) is this after a rebalance landed
while the member waited on pending offsets, so each case also says what happened while the
member held the partition unread (``waited``: its rebalance callbacks since it was first given
the partition after its previous read of it) and which transaction of another instance had
read the partition without a completion when it was given it (``pending``: its offsets may
have been pending).

Why "committed before the assignment": an offset committed later (a zombie's commit racing
the rebalance) might not have existed when the member fetched its start; one committed
before the member was even told of the partition must be seen by any correct fetch. Why
"the last commit", not the highest: a member that started wrong and committed a lower offset
moved the group's offset back, and the next member to start there starts right (the
duplicates are the first member's, already named). So the anomaly is certain from the
history alone, and its count never needs the broker log.

Both engines find, per assignment that has a first read below its committed offset, the same
:class:`StartFacts` (the Spark engine with joins over every transaction, the reference here,
:func:`reference_facts`); :func:`examples` turns them into the check's examples.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from checkers.eos.results import Example

#: A processor's ok rebalance callback: instance, history index, event, generation, partitions.
Rebalance = tuple[int, int, str, int, list[int]]
#: How many input values of the first read an example names (the lowest offsets).
SHOWN_VALUES = 3


class StartFacts(NamedTuple):
    """One assignment of ``partition`` to ``instance`` (its ``assign`` callback at history
    index ``assign_index``) whose first read started below the committed offset."""

    instance: int
    partition: int
    assign_index: int
    generation: int
    #: The first transaction of the instance after the assignment that read the partition.
    read_index: int
    txn_seq: int
    first_offset: int
    #: Its inputs of the partition with the lowest offsets: (offset, value), at most
    #: :data:`SHOWN_VALUES`, by offset.
    read_values: tuple[tuple[int, str | None], ...]
    #: The offset the group had committed for the partition when it was assigned, and the
    #: transaction that committed it: (instance, seq, completion index). Of the commits
    #: completed before the assignment, the last may be any that no other of them followed
    #: for certain (invoked after it completed): the lowest of those, so a start is flagged
    #: only when it is below whichever one the log holds last.
    committed: int
    committed_by: tuple[int, int, int]
    #: The instance's last read of the partition before the assignment (-1: none).
    prev_read: int
    #: The latest transaction of another instance that read the partition, invoked before
    #: the assignment and not completed by then: (instance, seq, invoke index, the offset it
    #: would commit, its completion index or None).
    pending: tuple[int, int, int, int, int | None] | None


def waited(fact: StartFacts, rebalances: Iterable[Rebalance]) -> list[Rebalance]:
    """The instance's rebalance callbacks while it held the partition unread: from the first
    assignment of it after the instance's previous read of it, to the first read."""
    mine = sorted(r for r in rebalances if r[0] == fact.instance)
    since = [
        r[1]
        for r in mine
        if r[2] == "assign"
        and fact.partition in r[4]
        and fact.prev_read < r[1] <= fact.assign_index
    ]
    first = min(since, default=fact.assign_index)
    return [r for r in mine if first <= r[1] < fact.read_index]


def example(fact: StartFacts, rebalances: list[Rebalance]) -> Example:
    """A case as its example shows it; ops: the callbacks while it waited, the committing
    transaction's completion, the pending transaction's invoke, the first read's invoke."""
    events = waited(fact, rebalances)
    ci, cs, cdone = fact.committed_by
    ex = {
        "values": [v for _o, v in fact.read_values if v is not None],
        "instance": fact.instance,
        "partition": fact.partition,
        "assigned": {"index": fact.assign_index, "generation": fact.generation},
        "first_read": {
            "index": fact.read_index,
            "txn": [fact.instance, fact.txn_seq],
            "offset": fact.first_offset,
        },
        "committed": {"offset": fact.committed, "txn": [ci, cs], "index": cdone},
        "waited": [
            {"index": i, "event": e, "generation": g, "partitions": list(ps)}
            for _inst, i, e, g, ps in events
        ],
    }
    idx = [*(r[1] for r in events), cdone, fact.read_index]
    if fact.pending is not None:
        pi, ps_, pinv, poff, pdone = fact.pending
        ex["pending"] = {"txn": [pi, ps_], "index": pinv, "offset": poff, "completed": pdone}
        idx.append(pinv)
    return ex, idx


def order(fact: StartFacts) -> tuple[int, int, int]:
    """Examples by first read, then assignment, then partition."""
    return (fact.read_index, fact.assign_index, fact.partition)


def examples(facts: list[StartFacts], rebalances: list[Rebalance], n: int) -> list[Example]:
    return [example(f, rebalances) for f in sorted(facts, key=order)[:n]]


# ------------------------------------------------------------------------------------------
# The reference: the same facts, one transaction at a time


def reference_facts(
    rebalances: list[Rebalance],
    invokes: dict[tuple[int, int], tuple[int, list[tuple[int, int, str | None]]]],
    dones: dict[tuple[int, int], tuple[int, str, list[tuple[int, int]]]],
) -> list[StartFacts]:
    """Every assignment whose first read starts below the committed offset.

    ``invokes``: (instance, seq) -> (invoke index, inputs as (partition, offset, value));
    ``dones``: (instance, seq) -> (completion index, type, offsets as (partition, next)).
    """
    reads: dict[tuple[int, int], list[tuple[int, int, int, list[tuple[int, str | None]]]]] = {}
    for (inst, seq), (inv, inputs) in invokes.items():
        by_part: dict[int, list[tuple[int, str | None]]] = {}
        for p, o, v in inputs:
            by_part.setdefault(p, []).append((o, v))
        for p, got in by_part.items():
            got.sort(key=lambda x: x[0])
            reads.setdefault((inst, p), []).append((inv, seq, got[0][0], got))
    for rs in reads.values():
        rs.sort()
    commits: dict[int, list[tuple[int, int, int, int, int]]] = {}  # partition -> by done
    for (inst, seq), (done, typ, offs) in dones.items():
        if typ != "ok":
            continue
        for p, nxt in offs:
            if p is not None and nxt is not None:
                commits.setdefault(p, []).append((done, nxt, inst, seq, invokes[(inst, seq)][0]))
    for cs_ in commits.values():
        cs_.sort()
    assigned: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (instance, p) -> (index, gen)
    for inst, idx, ev, gen, ps in rebalances:
        if ev == "assign":
            for p in ps:
                assigned.setdefault((inst, p), []).append((idx, gen))
    out = []
    for (inst, p), given in sorted(assigned.items()):
        given.sort()
        mine = reads.get((inst, p), [])
        for k, (a_idx, gen) in enumerate(given):
            nxt_assign = given[k + 1][0] if k + 1 < len(given) else None
            first = next(
                (r for r in mine if r[0] > a_idx and (nxt_assign is None or r[0] < nxt_assign)),
                None,
            )
            if first is None:
                continue
            fact = _below(inst, p, a_idx, gen, first, mine, commits.get(p, []))
            if fact is not None:
                out.append(fact._replace(pending=pending_at(inst, p, a_idx, invokes, dones)))
    return out


def _below(
    inst: int,
    p: int,
    a_idx: int,
    gen: int,
    first: tuple[int, int, int, list[tuple[int, str | None]]],
    mine: list[tuple[int, int, int, list[tuple[int, str | None]]]],
    commits: list[tuple[int, int, int, int, int]],
) -> StartFacts | None:
    """The case of one assignment, if its first read started below the committed offset;
    ``commits``: the partition's as (done, next, instance, seq, invoke index), by done."""
    before = [c for c in commits if c[0] < a_idx]
    last_invoked = max((c[4] for c in before), default=-1)
    # (next, done, instance, seq) of the lowest commit that may be the last one
    best = min(
        ((nxt, done, ci, cs) for done, nxt, ci, cs, _inv in before if done > last_invoked),
        default=None,
    )
    if best is None or first[2] >= best[0]:
        return None
    prev = max((r[0] for r in mine if r[0] < a_idx), default=-1)
    return StartFacts(
        inst,
        p,
        a_idx,
        gen,
        first[0],
        first[1],
        first[2],
        tuple(first[3][:SHOWN_VALUES]),
        best[0],
        (best[2], best[3], best[1]),
        prev,
        None,
    )


def pending_at(
    inst: int,
    p: int,
    a_idx: int,
    invokes: dict[tuple[int, int], tuple[int, list[tuple[int, int, str | None]]]],
    dones: dict[tuple[int, int], tuple[int, str, list[tuple[int, int]]]],
) -> tuple[int, int, int, int, int | None] | None:
    best = None
    for (oi, os_), (inv, inputs) in invokes.items():
        if oi == inst or inv >= a_idx:
            continue
        offs = [o for ip, o, _v in inputs if ip == p]
        if not offs:
            continue
        done = dones.get((oi, os_))
        done_idx = done[0] if done else None
        if done_idx is not None and done_idx < a_idx:
            continue
        if best is None or inv > best[2]:
            best = (oi, os_, inv, max(offs) + 1, done_idx)
    return best


def pending_waits(
    rebalances: list[Rebalance],
    invokes: dict[tuple[int, int], tuple[int, list[tuple[int, int, str | None]]]],
    dones: dict[tuple[int, int], tuple[int, str, list[tuple[int, int]]]],
) -> tuple[int, int]:
    """F5's window, counted: assignments of a partition that the member then read while
    another instance's transaction over it had not completed (its offsets may have been
    pending), and how many of those the member's assignment changed in (a rebalance callback)
    before its first read. A correct client starts all of them at the committed offset; a
    campaign that meets none of them says nothing about F5."""
    reads: dict[tuple[int, int], list[int]] = {}
    for (inst, _seq), (inv, inputs) in invokes.items():
        for p in {p for p, _o, _v in inputs}:
            reads.setdefault((inst, p), []).append(inv)
    mine: dict[int, list[int]] = {}
    for r in rebalances:
        mine.setdefault(r[0], []).append(r[1])
    given = changed = 0
    for inst, a_idx, ev, _gen, ps in rebalances:
        if ev != "assign":
            continue
        for p in ps:
            first = min((i for i in reads.get((inst, p), []) if i > a_idx), default=None)
            if first is None or pending_at(inst, p, a_idx, invokes, dones) is None:
                continue
            given += 1
            changed += any(a_idx < i < first for i in mine[inst])
    return given, changed
