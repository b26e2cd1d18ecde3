"""The connect workload's run as both engines judge it: the scanned input and the plan of
which final reads count (or why the run cannot be judged).

Public API::

    scan_connect(run_dir, out=None) -> ConnectInput   # raises CheckerInputError
    plan(input) -> Plan                                 # which reads count, or why unknown
    history_file(run_dir) -> Path
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.connect.extract import READ_COMMITTED, ConnectMeta, Fact, RowSinks, connect_meta
from checkers.connect.progress import Progress
from history.logdump import CheckerInputError

__all__ = ["ConnectInput", "Plan", "history_file", "plan", "scan_connect"]


@dataclass
class ConnectInput:
    """A scanned run: its meta (or why there is none), the final ops' facts in history order,
    how many task-journal ops it has (none: a history older than the journals), and the rows
    (in memory, or the Parquet directory ``parquet``)."""

    path: Path
    header: dict[str, Any]
    meta: ConnectMeta | None
    meta_problem: str | None
    facts: list[Fact]
    notes: list[str] = field(default_factory=list)
    data: list[tuple[Any, ...]] = field(default_factory=list)
    offsets: list[tuple[Any, ...]] = field(default_factory=list)
    confirmed: list[tuple[Any, ...]] = field(default_factory=list)
    journal_ops: int = 0
    parquet: Path | None = None
    #: The facts ``stalled-task`` is judged on (:class:`checkers.connect.progress.Progress`).
    progress: dict[str, Any] | None = None


def history_file(run_dir: str | os.PathLike[str]) -> Path:
    p = Path(run_dir)
    return p if p.is_file() else p / "history.jsonl"


def read_header(path: Path) -> dict[str, Any]:
    """The merged header (the sinks need the topics before the scan starts)."""
    from history import HistoryError
    from history.reader import HistoryReader
    from history.schema import KIND_MERGED

    if not path.is_file():
        raise CheckerInputError(f"{path}: no such history")
    try:
        with HistoryReader(path, kind=KIND_MERGED) as probe:
            header = probe.header
    except HistoryError as e:
        raise CheckerInputError(str(e)) from None
    except OSError as e:
        raise CheckerInputError(f"{path}: cannot read: {e.strerror or e}") from None
    if header is None:
        raise CheckerInputError(f"{path}: empty history (no header line)")
    return dict(header)


def scan_connect(run_dir: str | os.PathLike[str], out: Path | None = None) -> ConnectInput:
    """Validate the history and take its final ops apart; rows in memory, or as Parquet
    under ``out`` (which must not exist yet) when given. Bad input raises
    :class:`CheckerInputError` with one line."""
    from history import HistoryError
    from history.scan import scan_history

    path = history_file(run_dir)
    header = read_header(path)
    meta, why = connect_meta(header)
    sinks = RowSinks(
        meta.data_topic if meta else None,
        meta.offsets_topic if meta else None,
        meta.connector if meta else None,
        None if out is None else str(out),
    )

    def discard() -> None:
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)

    try:
        scanned = scan_history(path, sinks, discard=discard)
    except HistoryError as e:
        raise CheckerInputError(str(e)) from None
    except OSError as e:
        raise CheckerInputError(f"{path}: cannot read: {e.strerror or e}") from None
    problems = [p for s in scanned.sinks for p in s["problems"]]
    if problems:
        raise CheckerInputError(f"{path}: {problems[0]}")
    got = ConnectInput(path, header, meta, why, [], list(scanned.notes), parquet=out)
    for s in scanned.sinks:
        got.facts += s["facts"]
        got.journal_ops += s["journal_ops"]
        if out is None:
            got.data += s["data"]
            got.offsets += s["offsets"]
            got.confirmed += s["confirmed"]
    got.facts.sort(key=lambda f: f[0])
    got.progress = Progress.merge([s["progress"] for s in scanned.sinks])
    return got


@dataclass
class Plan:
    """What the final ops allow the engines to judge.

    ``unknown``: why the verdict cannot be true or false (a read incomplete or missing, no
    meta), else None. ``data_ops``: partition -> the history index of the ``ok``
    read_committed read whose records count (the last one); ``offsets_op``: the ``ok``
    offsets read that counts. ``notes`` go into the result as they are.
    """

    unknown: str | None
    data_ops: dict[int, int] = field(default_factory=dict)
    offsets_op: int | None = None
    settle: str | None = None
    notes: list[str] = field(default_factory=list)


def _pairs(facts: list[Fact]) -> list[tuple[Fact, Fact | None]]:
    """The final process's ops as (invoke, completion or None), in history order: the
    process is single-threaded, so a completion closes the open invoke of its ``f``."""
    out: list[tuple[Fact, Fact | None]] = []
    open_: Fact | None = None
    for fact in facts:
        if fact[1] == "invoke":
            if open_ is not None:
                out.append((open_, None))
            open_ = fact
        elif open_ is not None and open_[2] == fact[2]:
            out.append((open_, fact))
            open_ = None
        else:  # a completion with no invoke (not a Recorder's history): judge it alone
            out.append((fact, fact))
    if open_ is not None:
        out.append((open_, None))
    return out


def _how(done: Fact | None) -> str:
    if done is None:
        return "has no completion"
    what = {"info": "ended info", "fail": "failed"}.get(done[1], f"ended {done[1]}")
    return what + (f" ({done[6]})" if done[6] else "")


def plan(got: ConnectInput) -> Plan:
    """Which reads count, or why the verdict is unknown: every partition of the data topic
    (any final read names it) needs an ``ok`` read_committed read, and the offsets topic an
    ``ok`` offsets read."""
    meta = got.meta
    if meta is None:
        return Plan(got.meta_problem or "no connect meta")
    reads: dict[int, list[tuple[Fact, Fact | None]]] = {}
    offsets: list[tuple[Fact, Fact | None]] = []
    settles: list[tuple[Fact, Fact | None]] = []
    for inv, done in _pairs(got.facts):
        topic = inv[3] if inv[3] is not None else (done[3] if done else None)
        if inv[2] == "read" and topic == meta.data_topic:
            part = inv[4] if inv[4] is not None else (done[4] if done else None)
            iso = inv[5] if inv[5] is not None else (done[5] if done else None)
            if part is None:
                continue
            reads.setdefault(part, [])
            if iso == READ_COMMITTED:
                reads[part].append((inv, done))
        elif inv[2] == "offsets" and topic == meta.offsets_topic:
            offsets.append((inv, done))
        elif inv[2] == "settle" and topic == meta.data_topic:
            settles.append((inv, done))
    why: list[str] = []
    out = Plan(None)
    if not reads:
        why.append(f"no final read of the data topic {meta.data_topic}")
    for part in sorted(reads):
        oks = [d[0] for _i, d in reads[part] if d is not None and d[1] == "ok"]
        if oks:
            out.data_ops[part] = max(oks)
        elif reads[part]:
            how = _how(reads[part][-1][1])
            why.append(f"the read_committed read of {meta.data_topic} partition {part} {how}")
        else:
            why.append(f"{meta.data_topic} partition {part} has no read_committed read")
    oks = [d[0] for _i, d in offsets if d is not None and d[1] == "ok"]
    if oks:
        out.offsets_op = max(oks)
    elif offsets:
        why.append(f"the offsets read of {meta.offsets_topic} {_how(offsets[-1][1])}")
    else:
        why.append(f"no final offsets read of {meta.offsets_topic}")
    if settles:
        last = settles[-1][1]
        out.settle = None if last is None else last[1]
        if out.settle != "ok":
            out.notes.append(
                f"settle of {meta.data_topic} {_how(last)}: a transaction may have been open, "
                "and read_committed reads stop at it (records after it count as not committed)"
            )
    if why:
        out.unknown = "incomplete final reads: " + "; ".join(why)
    return out
