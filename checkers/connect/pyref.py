"""The ``connect`` checker in plain Python: the reference the Spark engine must agree with.

Why a second implementation: the Spark engine (:mod:`checkers.connect.checks`) expresses each
rule as windows and joins; this module runs the same rules the obvious way, one record at a
time, so the tests can demand equal results on every history they build. Definitions:
``docs/anomalies.md``, "connect workload"; the rows both engines read:
:mod:`checkers.connect.extract`; examples and verdict: :mod:`checkers.connect.results`.

Public API::

    check_connect_pyref(run_dir, max_examples=8) -> dict
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from checkers.connect import results as X
from checkers.connect.extract import ConnectMeta
from checkers.connect.views import plan, scan_connect
from checkers.logdump.pyref import log_positions, resolve_selectors
from checkers.logdump.rules import Pos, position_evidence, position_selectors
from history.logdump import read_logdump

__all__ = ["check_connect_pyref"]

Row = tuple[Any, ...]
# Columns of a data row and of an offsets row (checkers.connect.extract.DATA_COLUMNS, ...).
OP, PART, OFF, KEY, VAL, TASK, SEQ, WRITER, BAD = range(9)
UNREADABLE = 7
# Columns of a confirmed range (checkers.connect.extract.CONFIRMED_COLUMNS).
C_OP, C_TASK, C_WRITER, C_FIRST, C_LAST, C_MS = range(6)


def check_connect_pyref(run_dir: str | os.PathLike[str], max_examples: int = 8) -> dict[str, Any]:
    """Judge a stored connect run. Unusable input raises
    :class:`history.logdump.CheckerInputError`; incomplete final reads give ``valid:
    "unknown"`` with the reason under ``error``."""
    X.check_max_examples(max_examples)
    got = scan_connect(Path(run_dir))
    p = plan(got)
    dump_path = got.path.parent / "evidence" / "logdump.jsonl"
    has_dump = dump_path.is_file()
    notes = X.base_notes(p, has_dump, got.journal_ops)
    stats = X.base_stats(got.meta, p, has_dump, got.journal_ops)
    if p.unknown is not None or got.meta is None:
        return X.unknown(p.unknown or "no meta", stats, notes, got.notes, max_examples)
    used = set(p.data_ops.values())
    data = sorted((r for r in got.data if r[OP] in used), key=lambda r: (r[PART], r[OFF]))
    offsets = [r for r in got.offsets if r[OP] == p.offsets_op]
    confirmed = got.confirmed if got.journal_ops else None
    judged = _Judge(got.meta, data, offsets, confirmed, max_examples)
    counts, examples = judged.run(dump_path if has_dump else None)
    X.add_progress(got, counts, examples, notes, max_examples)
    stats |= judged.stats()
    return X.result(counts, examples, stats, notes, got.notes, max_examples)


class _Judge:
    """Every rule over one run's committed records (sorted by partition, offset) and, when
    the history has task journals, the seqno ranges Connect confirmed (else None)."""

    def __init__(
        self,
        meta: ConnectMeta,
        data: list[Row],
        offsets: list[Row],
        confirmed: list[Row] | None,
        max_examples: int,
    ) -> None:
        self.meta, self.data, self.offsets, self.k = meta, data, offsets, max_examples
        self.confirmed = confirmed
        self.good = [r for r in data if r[BAD] is None]
        self.copies: dict[tuple[int, int], list[Row]] = defaultdict(list)
        for r in self.good:
            self.copies[(r[TASK], r[SEQ])].append(r)
        self.max_seqno: dict[int, int] = {}
        for task, seqno in self.copies:
            self.max_seqno[task] = max(seqno, self.max_seqno.get(task, -1))
        self.last_offset: dict[int, Row] = {}
        for r in offsets:
            if r[SEQ] is None:
                continue  # a tombstone or an unreadable value: not a source offset
            have = self.last_offset.get(r[TASK])
            if have is None or (r[PART], r[OFF]) > (have[PART], have[OFF]):
                self.last_offset[r[TASK]] = r

    def rec(self, r: Row) -> dict[str, Any]:
        return X.record(self.meta.data_topic, r[PART], r[OFF], r[KEY], r[VAL])

    def first_copy(self, task: int, seqno: int) -> dict[str, Any] | None:
        rs = self.copies.get((task, seqno))
        return None if not rs else self.rec(min(rs, key=lambda r: (r[PART], r[OFF])))

    def run(self, dump: Path | None) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
        counts: dict[str, int] = {}
        examples: dict[str, list[dict[str, Any]]] = {}
        for name, fn in (
            ("duplicate", self.duplicate),
            ("lost", self.lost),
            ("order", self.order),
            ("offset-ahead", lambda: self.offsets_case("offset-ahead")),
            ("offset-behind", lambda: self.offsets_case("offset-behind")),
            ("zombie-task-write", self.zombie),
            ("malformed-record", self.malformed),
        ):
            counts[name], examples[name] = fn()
        if self.confirmed is not None:
            counts["acknowledged-lost"], examples["acknowledged-lost"] = self.acknowledged()
        if dump is not None:
            counts["aborted-read"], examples["aborted-read"] = self.aborted(dump)
        return counts, examples

    def stats(self) -> dict[str, Any]:
        return {
            "committed_records": len(self.data),
            "tasks": len(set(self.max_seqno) | set(self.last_offset)),
            "offsets_records": len(self.offsets),
            "offsets_unreadable": sum(1 for r in self.offsets if r[UNREADABLE]),
        }

    # -- the rules ---------------------------------------------------------------------

    def duplicate(self) -> tuple[int, list[dict[str, Any]]]:
        dups = sorted(k for k, rs in self.copies.items() if len(rs) > 1)
        n = sum(len(self.copies[k]) - 1 for k in dups)
        made = [X.duplicate(t, s, [self.rec(r) for r in self.copies[(t, s)]]) for t, s in dups]
        return n, made[: self.k]

    def lost(self) -> tuple[int, list[dict[str, Any]]]:
        seqnos: dict[int, list[int]] = defaultdict(list)
        for task, seqno in self.copies:
            seqnos[task].append(seqno)
        runs: list[tuple[int, int, int]] = []
        for task in sorted(seqnos):
            prev = -1
            for s in sorted(seqnos[task]):
                if s > prev + 1:
                    runs.append((task, prev + 1, s - 1))
                prev = s
        n = sum(last - first + 1 for _t, first, last in runs)
        made = [
            X.lost(
                t,
                first,
                last,
                self.max_seqno[t],
                self.first_copy(t, first - 1) if first > 0 else None,
                self.first_copy(t, last + 1),
            )
            for t, first, last in runs[: self.k]
        ]
        return n, made

    def acknowledged(self) -> tuple[int, list[dict[str, Any]]]:
        """Runs of seqnos a ``committed`` journal op confirmed that have no copy: each task's
        confirmed ranges merged, then split at the seqnos that have one."""
        assert self.confirmed is not None
        ranges: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for r in self.confirmed:
            ranges[r[C_TASK]].append((r[C_FIRST], r[C_LAST]))
        present: dict[int, list[int]] = defaultdict(list)
        for task, seqno in sorted(self.copies):
            present[task].append(seqno)
        runs = [
            (task, first, last)
            for task in sorted(ranges)
            for a, b in _merged(ranges[task])
            for first, last in _absent(a, b, present.get(task, []))
        ]
        n = sum(last - first + 1 for _t, first, last in runs)
        made = [
            X.acknowledged_lost(t, first, last, *self._claimant(t, first), self.max_seqno.get(t))
            for t, first, last in runs[: self.k]
        ]
        return n, made

    def _claimant(self, task: int, seqno: int) -> tuple[str, int]:
        """``(writer, ms)`` of the earliest (by history index) committed op confirming it."""
        assert self.confirmed is not None
        r = min(
            (r for r in self.confirmed if r[C_TASK] == task and r[C_FIRST] <= seqno <= r[C_LAST]),
            key=lambda r: r[C_OP],
        )
        return r[C_WRITER], r[C_MS]

    def _by_partition_task(self) -> dict[tuple[int, int], list[Row]]:
        """Each task's committed records per partition, in offset order."""
        out: dict[tuple[int, int], list[Row]] = defaultdict(list)
        for r in self.good:  # already in (partition, offset) order
            out[(r[PART], r[TASK])].append(r)
        return out

    def order(self) -> tuple[int, list[dict[str, Any]]]:
        cases = []
        for (part, task), rs in self._by_partition_task().items():
            for prev, cur in itertools.pairwise(rs):
                if cur[SEQ] <= prev[SEQ]:
                    cases.append((task, part, cur[OFF], prev, cur))
        cases.sort(key=lambda c: c[:3])
        made = [
            X.order(t, p, cur[SEQ], prev[SEQ], self.rec(prev), self.rec(cur))
            for t, p, _o, prev, cur in cases[: self.k]
        ]
        return len(cases), made

    def zombie(self) -> tuple[int, list[dict[str, Any]]]:
        cases = []
        for (part, task), rs in self._by_partition_task().items():
            seen: set[str] = set()
            latest: Row | None = None  # the first record of the writer that started last
            for r in rs:
                if r[WRITER] not in seen:
                    seen.add(r[WRITER])
                    latest = r
                elif latest is not None and latest[WRITER] != r[WRITER]:
                    cases.append((task, part, r[OFF], latest, r))
        cases.sort(key=lambda c: c[:3])
        made = [
            X.zombie(t, p, cur[SEQ], cur[WRITER], newer[WRITER], self.rec(newer), self.rec(cur))
            for t, p, _o, newer, cur in cases[: self.k]
        ]
        return len(cases), made

    def offsets_case(self, name: str) -> tuple[int, list[dict[str, Any]]]:
        made = []
        n = 0
        for task in sorted(set(self.max_seqno) | set(self.last_offset)):
            top = self.max_seqno.get(task)
            off = self.last_offset.get(task)
            so = None if off is None else off[SEQ]
            if name == "offset-ahead":
                bad = so is not None and (top is None or so > top)
            else:
                bad = top is not None and (so is None or top > so)
            if not bad:
                continue
            n += 1
            if len(made) < self.k:
                orec = None
                if off is not None:
                    orec = X.record(
                        self.meta.offsets_topic, off[PART], off[OFF], off[KEY], off[VAL]
                    )
                rec = None if top is None else self.first_copy(task, top)
                made.append(X.offset_case(name, task, so, top, orec, rec))
        return n, made

    def malformed(self) -> tuple[int, list[dict[str, Any]]]:
        bad = [r for r in self.data if r[BAD] is not None]
        return len(bad), [X.malformed(r[BAD], self.rec(r)) for r in bad[: self.k]]

    def aborted(self, dump_path: Path) -> tuple[int, list[dict[str, Any]]]:
        dump = read_logdump(dump_path)
        topic = self.meta.data_topic
        pos = log_positions(dump, topic)
        bad = [
            r for r in self.data
            if (p := pos.get((r[PART], r[OFF]))) is not None and p.outcome == "aborted"
        ]  # fmt: skip
        first = bad[: self.k]
        found: dict[tuple[int, int], Pos] = {
            (r[PART], r[OFF]): pos[(r[PART], r[OFF])] for r in first
        }
        sels = [s for (p, o), ps in found.items() for s in position_selectors(topic, p, o, ps)]
        resolved = resolve_selectors(dump, sels)
        made = [
            X.aborted_read(
                r[TASK],
                r[SEQ],
                self.rec(r),
                position_evidence(topic, r[PART], r[OFF], found[(r[PART], r[OFF])], resolved),
            )
            for r in first
        ]
        return len(bad), made


def _merged(ranges: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Inclusive ranges merged where they overlap or touch, ascending: a run of missing
    seqnos must not be split where two journal entries happen to meet."""
    cur: tuple[int, int] | None = None
    for a, b in sorted(ranges):
        if cur is not None and a <= cur[1] + 1:
            cur = (cur[0], max(cur[1], b))
            continue
        if cur is not None:
            yield cur
        cur = (a, b)
    if cur is not None:
        yield cur


def _absent(a: int, b: int, have: list[int]) -> Iterator[tuple[int, int]]:
    """The runs of ``a..b`` not in ``have`` (ascending, distinct)."""
    i = bisect.bisect_left(have, a)
    cur = a
    while i < len(have) and have[i] <= b:
        if have[i] > cur:
            yield cur, have[i] - 1
        cur = have[i] + 1
        i += 1
    if cur <= b:
        yield cur, b
