"""The broker log dump's positions in plain Python: the twin of :mod:`checkers.logdump.evidence`.

Each partition's reference replica, each data record's place among its producer's
transactions, and the records a selector names, computed the obvious way one record at a
time, for the plain-Python references of every family that joins with the dump.

Public API::

    reference_replicas(dump) -> {(kind, topic, partition): node}
    log_positions(dump, topic) -> {(partition, offset): rules.Pos}
    resolve_selectors(dump, selectors) -> {selector: (records, omitted)}
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.logdump.rules import MAX_TXN_RECORDS, Marker, Pos, Selector, reference_rank
from history.logdump import CTRL, EPOCH, LAST, MARK, OFF, PID, PLE, ROW, TXN, LogDump, fetch_lines


def replica_summary(recs: list[tuple[Any, ...]]) -> tuple[int, int]:
    """(max partition leader epoch, log end offset) of one replica partition."""
    ple = max((r[PLE] for r in recs if r[PLE] is not None), default=-1)
    end = max((r[LAST] for r in recs), default=-1) + 1
    return ple, end


def reference_replicas(dump: LogDump) -> dict[tuple[str, str, int], int]:
    """(kind, topic, partition) -> the node chosen by :func:`reference_rank`."""
    out = {}
    for key, nodes in dump.parts.items():
        out[key] = min(nodes, key=lambda n: reference_rank(n, *replica_summary(nodes[n])))
    return out


def resolve_selectors(
    dump: LogDump, sels: list[Selector]
) -> dict[Selector, tuple[list[dict], int]]:
    """Find the records selectors name (in memory), then read their full lines from the file."""
    wanted: dict[Selector, tuple[list[int], int]] = {}
    for s in set(sels):
        n, k, tp, p = s[1], s[2], s[3], s[4]
        recs = dump.parts.get((k, tp, p), {}).get(n, [])
        if s[0] == "at":
            hit = [r[ROW] for r in recs if r[OFF] == s[5]][:1]
            wanted[s] = (hit, 0)
        else:
            pid, lo, hi = s[5], s[6], s[7]
            rows = [r[ROW] for r in recs if r[PID] == pid and not r[CTRL] and lo <= r[OFF] <= hi]
            if len(rows) > MAX_TXN_RECORDS + 1:
                wanted[s] = (rows[:MAX_TXN_RECORDS] + rows[-1:], len(rows) - MAX_TXN_RECORDS - 1)
            else:
                wanted[s] = (rows, 0)
    full = fetch_lines(dump.path, (ln for rows, _ in wanted.values() for ln in rows))
    return {s: ([full[ln] for ln in rows], om) for s, (rows, om) in wanted.items()}


def log_positions(dump: LogDump, topic: str, *, kind: str = "data") -> dict[tuple[int, int], Pos]:
    """(partition, offset) -> where each data record of ``topic`` sits among its producer's
    transactions, on each partition's reference replica (:class:`checkers.logs.rules.Pos`).

    Why apart from the logs family's scan: the eos checks join the drained records with this,
    for one topic; keeping a position per record of every topic in the shared scan would double
    the memory of the log checks for nothing. Same rules as
    :func:`checkers.logs.pyref.aborted_in_log` (and the Spark
    :func:`checkers.logdump.evidence.log_positions`): a transactional record of a producer id
    >= 0 belongs to the transaction its producer's next COMMIT/ABORT marker ends (``open``
    without one); any other data record is committed and belongs to no transaction.
    """
    refs = reference_replicas(dump)
    out: dict[tuple[int, int], Pos] = {}
    for (k, tp, part), nodes in dump.parts.items():
        if k != kind or tp != topic:
            continue
        node = refs[(k, tp, part)]
        prior: dict[int, Marker] = {}
        seg: dict[int, list[tuple[int, int, Marker | None]]] = defaultdict(list)
        for r in nodes[node]:
            pid, off = r[PID], r[OFF]
            if r[CTRL]:
                if pid >= 0 and r[MARK] is not None:
                    end = (off, r[MARK], r[EPOCH])
                    outcome = "committed" if r[MARK] == "COMMIT" else "aborted"
                    _place(out, part, node, pid, seg.pop(pid, []), outcome, end)
                    prior[pid] = end
            elif r[TXN] and pid >= 0:
                seg[pid].append((off, r[EPOCH], prior.get(pid)))
            else:
                out[(part, off)] = Pos(node, pid, r[EPOCH], r[TXN], "committed", None, None, None)
        for pid, recs in seg.items():
            _place(out, part, node, pid, recs, "open", None)
    return out


def _place(
    out: dict[tuple[int, int], Pos],
    part: int,
    node: int,
    pid: int,
    recs: list[tuple[int, int, Marker | None]],
    outcome: str,
    end: Marker | None,
) -> None:
    """Record the positions of one transaction's data records (offset, epoch, prior marker)."""
    for off, epoch, before in recs:
        out[(part, off)] = Pos(node, pid, epoch, True, outcome, recs[0][0], before, end)
