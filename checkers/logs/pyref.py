"""Broker-log evidence checks in plain Python: the reference the Spark engine must agree with.

Why a second implementation: the Spark checkers (:mod:`checkers.logs.checks`) express a
per-producer state machine as window functions and joins, which is easy to get subtly wrong.
This module runs the same state machine the obvious way, one record at a time, so property
tests can demand that both give identical results, and the benchmark has a baseline to beat.
The dump is read by :mod:`history.logdump`; what both engines share (types, reasons,
examples, result shape) is :mod:`checkers.logs.rules`. Definitions: ``docs/anomalies.md``,
"Broker log evidence".

Public API::

    check_logdump(path, *, transaction_version=None, max_examples=8) -> dict
    check_evidence_py(run_dir, *, transaction_version=None, max_examples=8) -> dict
    epoch_violation(dump, ...), replica_divergence(dump, ...), hanging_in_log(dump, ...)
    aborted_in_log(dump, *, all_replicas=False) -> list[dict]
    reference_replicas(dump), coordinator_states(dump), outcome_counts(rows)
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.logdump.pyref import reference_replicas, replica_summary, resolve_selectors
from checkers.logs.rules import (
    DIVERGENCE_TYPES,
    EPOCH_TYPES,
    HANGING_TYPES,
    TV2_TYPES,
    describe_prepare,
    describe_state,
    example,
    hanging_reason,
    merge_replicas,
    resolve_tv,
    result,
    selectors,
    top_findings,
)
from checkers.verdict import combine
from history.logdump import (
    CTRL,
    EPOCH,
    FP,
    MARK,
    OFF,
    PID,
    PLE,
    TXN,
    CheckerInputError,
    LogDump,
    parse_txn_state,
    read_logdump,
)
from history.logdump_format import TXN_KINDS


@dataclass
class _Producer:
    max_epoch: int | None = None
    max_at: int = -1  # offset of the earliest record at max_epoch
    seg: list[tuple[Any, ...]] = field(default_factory=list)  # open transaction's data
    last_marker: tuple[Any, ...] | None = None
    prev_txn: tuple[int, int, int] | None = None  # (first data offset, marker offset, data epoch)


@dataclass
class _Scan:
    findings: list[dict[str, Any]] = field(default_factory=list)
    bumped: int = 0
    unbumped: int = 0
    #: producers seen ending a transaction the TV2 way (COMMIT marker at epoch + 1): a broker
    #: on transaction version 2 still serves TV0/1 clients (librdkafka), whose markers keep
    #: the transaction's epoch, so TV2 rules apply per producer, not per log.
    tv2_pids: set[int] = field(default_factory=set)
    #: per replica partition (node, kind, topic, partition): pid -> open data (list of tuples)
    open_txns: dict[tuple[int, str, str, int], dict[int, list[tuple[Any, ...]]]] = field(
        default_factory=dict
    )
    #: per replica partition: counts of ended transactions by outcome, empty markers
    txn_counts: dict[tuple[int, str, str, int], dict[str, int]] = field(default_factory=dict)
    #: (node, kind, topic, partition) -> {offset: outcome} for transactional data
    outcomes: dict[tuple[int, str, str, int], dict[int, str]] = field(default_factory=dict)


def _scan_replica(
    node: int, kind: str, topic: str, part: int, recs: list[tuple[Any, ...]], scan: _Scan
) -> None:
    """The per-producer state machine over one replica partition, in offset order."""
    prods: dict[int, _Producer] = defaultdict(_Producer)
    base = {"node": node, "kind": kind, "topic": topic, "partition": part}
    counts = {"committed": 0, "aborted": 0, "empty_markers": 0}
    outcomes: dict[int, str] = {}
    add = scan.findings.append
    for r in recs:
        pid = r[PID]
        if pid < 0:
            continue
        ctrl, marker, e, off = r[CTRL], r[MARK], r[EPOCH], r[OFF]
        if ctrl and marker is None:
            continue  # not a transaction marker
        st = prods[pid]
        regression = st.max_epoch is not None and e < st.max_epoch
        if not ctrl:
            if regression:
                add(
                    base
                    | {
                        "type": "data-epoch-regression",
                        "producerId": pid,
                        "offset": off,
                        "epoch": e,
                        "prior_epoch": st.max_epoch,
                        "prior_offset": st.max_at,
                    }
                )
            if r[TXN]:
                if st.seg:
                    prev = st.seg[-1]
                    if e > prev[EPOCH]:
                        add(
                            base
                            | {
                                "type": "epoch-bump-in-open-transaction",
                                "producerId": pid,
                                "offset": off,
                                "epoch": e,
                                "prior_epoch": prev[EPOCH],
                                "first_offset": st.seg[0][OFF],
                            }
                        )
                elif st.prev_txn is not None and not regression and e == st.prev_txn[2]:
                    add(
                        base
                        | {
                            "type": "txn-epoch-reuse",
                            "producerId": pid,
                            "offset": off,
                            "epoch": e,
                            "prior_first_offset": st.prev_txn[0],
                            "prior_marker_offset": st.prev_txn[1],
                        }
                    )
                st.seg.append(r)
        else:
            common = base | {"producerId": pid, "offset": off, "epoch": e, "outcome": marker}
            if st.seg:
                data_max = max(x[EPOCH] for x in st.seg)
                if e < data_max:
                    at_max = next(x[OFF] for x in st.seg if x[EPOCH] == data_max)
                    add(
                        common
                        | {
                            "type": "marker-below-data",
                            "data_epoch": data_max,
                            "data_offset": at_max,
                        }
                    )
                elif regression:
                    add(
                        common
                        | {
                            "type": "marker-epoch-regression",
                            "prior_epoch": st.max_epoch,
                            "prior_offset": st.max_at,
                        }
                    )
                elif e == data_max:
                    add(common | {"type": "marker-not-bumped", "first_offset": st.seg[0][OFF]})
                if marker == "COMMIT":
                    if e == data_max + 1:
                        scan.bumped += 1
                        scan.tv2_pids.add(pid)
                    elif e == data_max:
                        scan.unbumped += 1
                counts["committed" if marker == "COMMIT" else "aborted"] += 1
                outcome = "committed" if marker == "COMMIT" else "aborted"
                for x in st.seg:
                    outcomes[x[OFF]] = outcome
                st.prev_txn = (st.seg[0][OFF], off, data_max)
                st.seg = []
            else:
                counts["empty_markers"] += 1
                if regression:
                    add(
                        common
                        | {
                            "type": "marker-epoch-regression",
                            "prior_epoch": st.max_epoch,
                            "prior_offset": st.max_at,
                        }
                    )
                elif st.last_marker is not None and e == st.last_marker[EPOCH]:
                    prev_m = st.last_marker[MARK]
                    add(
                        common
                        | {
                            "type": "duplicate-marker"
                            if prev_m == marker
                            else "conflicting-markers",
                            "prior_outcome": prev_m,
                            "prior_offset": st.last_marker[OFF],
                        }
                    )
            st.last_marker = r
        if st.max_epoch is None or e > st.max_epoch:
            st.max_epoch, st.max_at = e, off
    key = (node, kind, topic, part)
    opened = {pid: st.seg for pid, st in prods.items() if st.seg}
    for seg in opened.values():
        for x in seg:
            outcomes[x[OFF]] = "open"
    scan.open_txns[key] = opened
    scan.txn_counts[key] = counts
    scan.outcomes[key] = outcomes


def _scan(dump: LogDump) -> _Scan:
    scan = _Scan()
    for (kind, topic, part), nodes in dump.parts.items():
        if kind not in TXN_KINDS:
            continue
        for node, recs in nodes.items():
            _scan_replica(node, kind, topic, part, recs, scan)
    return scan


def _cached_scan(dump: LogDump) -> _Scan:
    cached = getattr(dump, "_scan_cache", None)
    if cached is None:
        cached = _scan(dump)
        dump._scan_cache = cached  # type: ignore[attr-defined]
    return cached


def _finish(
    dump: LogDump,
    checker: str,
    findings: list[dict[str, Any]],
    types: tuple[str, ...],
    stats: dict[str, Any],
    options: dict[str, Any],
    max_examples: int,
) -> dict[str, Any]:
    cases = merge_replicas(findings)
    counts = {t: 0 for t in types}
    for c in cases:
        counts[c["type"]] += 1
    chosen = top_findings(cases, max_examples)
    sels = [s for fs in chosen.values() for f in fs for s in selectors(f)]
    resolved = resolve_selectors(dump, sels)
    examples = {t: [example(f, resolved) for f in fs] for t, fs in chosen.items()}
    return result(checker, counts, examples, stats, options, considered=types)


def epoch_violation(
    dump: LogDump, *, transaction_version: int | str | None = None, max_examples: int = 8
) -> dict[str, Any]:
    """Epoch and marker order per producer per replica partition (see docs/anomalies.md)."""
    scan = _cached_scan(dump)
    tv = resolve_tv(transaction_version, scan.bumped, scan.unbumped)
    findings = [
        f
        for f in scan.findings
        if f["type"] not in TV2_TYPES or (tv["used"] == 2 and f["producerId"] in scan.tv2_pids)
    ]
    refs = reference_replicas(dump)
    txns = {"committed": 0, "aborted": 0, "open": 0, "empty_markers": 0}
    producers: set[int] = set()
    data = markers = 0
    for (kind, topic, part), nodes in dump.parts.items():
        if kind not in TXN_KINDS:
            continue
        for recs in nodes.values():
            for r in recs:
                if r[PID] >= 0 and (r[MARK] is not None or not r[CTRL]):
                    producers.add(r[PID])
                if r[MARK] is not None:
                    markers += 1
                elif not r[CTRL]:
                    data += 1
        key = (refs[(kind, topic, part)], kind, topic, part)
        for k2, v in scan.txn_counts[key].items():
            txns[k2] += v
        txns["open"] += len(scan.open_txns[key])
    stats = {
        "replica_partitions": sum(len(n) for k, n in dump.parts.items() if k[0] in TXN_KINDS),
        "producers": len(producers),
        "data_records": data,
        "markers": markers,
        "reference_transactions": txns,
        "transaction_version": tv,
    }
    options = {"transaction_version": transaction_version, "max_examples": max_examples}
    return _finish(dump, "epoch_violation", findings, EPOCH_TYPES, stats, options, max_examples)


def replica_divergence(dump: LogDump, *, max_examples: int = 8) -> dict[str, Any]:
    """Replicas that disagree below the smallest replica log end (see docs/anomalies.md)."""
    findings: list[dict[str, Any]] = []
    replicated = compared = 0
    for (kind, topic, part), nodes in dump.parts.items():
        if len(nodes) < 2:
            continue
        replicated += 1
        summary = {n: replica_summary(recs) for n, recs in nodes.items()}
        min_end = min(end for _, end in summary.values())
        at: dict[int, dict[int, tuple[Any, ...]]] = defaultdict(dict)
        for n, recs in nodes.items():
            for r in recs:
                if r[OFF] >= min_end:
                    break
                at[r[OFF]].setdefault(n, r)
        for off, per in at.items():
            if len(per) < 2:
                continue
            compared += 1
            fps = {r[FP] for r in per.values()}
            if len(fps) < 2:
                continue
            ples = {n: (-1 if r[PLE] is None else r[PLE]) for n, r in per.items()}
            top = max(ples.values())
            top_fps = {per[n][FP] for n in per if ples[n] == top}
            low = [n for n in per if ples[n] < top]
            unreconciled = bool(low) and len(top_fps) == 1 and all(summary[n][0] < top for n in low)
            findings.append(
                {
                    "type": "unreconciled-replica" if unreconciled else "replica-divergence",
                    "node": min(per),
                    "nodes": sorted(per),
                    "kind": kind,
                    "topic": topic,
                    "partition": part,
                    "offset": off,
                    "variants": len(fps),
                    "min_log_end": min_end,
                    "leader_epochs": {str(n): ples[n] for n in sorted(per)},
                }
            )
    stats = {
        "partitions": len(dump.parts),
        "replicated_partitions": replicated,
        "compared_offsets": compared,
    }
    options = {"max_examples": max_examples}
    return _finish(
        dump, "replica_divergence", findings, DIVERGENCE_TYPES, stats, options, max_examples
    )


Where = tuple[int, str, int, int]


def coordinator_states(
    dump: LogDump,
) -> dict[int, tuple[dict[str, Any], Where, dict[str, Any] | None, Where | None]]:
    """pid -> (latest decoded transaction-log state, (node, topic, offset, partition) of it,
    the state before it or None, its place).

    Read from each transaction-log partition's reference replica; the latest state of a
    producer id is the one at the highest (partition, offset), the one before it the next.
    """
    refs = reference_replicas(dump)
    top: dict[int, list[tuple[tuple[int, int], dict[str, Any], Where]]] = {}
    topic_of = {(k[2]): k[1] for k in dump.parts if k[0] == "txnlog"}
    for node, part, off, _line, payload in dump.txnlog:
        topic = topic_of.get(part)
        if topic is None or refs.get(("txnlog", topic, part)) != node:
            continue
        st = parse_txn_state(payload)
        if st is None:
            continue
        new = ((part, off), st, (node, topic, off, part))
        pid = st["producerId"]
        top[pid] = sorted([*top.get(pid, ()), new], key=lambda x: x[0], reverse=True)[:2]
    return {
        pid: (two[0][1], two[0][2], *(two[1][1:] if len(two) > 1 else (None, None)))
        for pid, two in top.items()
    }


def hanging_in_log(dump: LogDump, *, max_examples: int = 8) -> dict[str, Any]:
    """Transactions left without a marker at the end of a reference replica's log."""
    scan = _cached_scan(dump)
    refs = reference_replicas(dump)
    max_data: dict[int, int] = {}
    max_marker: dict[int, int] = {}
    for (kind, _t, _p), nodes in dump.parts.items():
        if kind not in TXN_KINDS:
            continue
        for recs in nodes.values():
            for r in recs:
                pid = r[PID]
                if pid < 0 or (r[CTRL] and r[MARK] is None):
                    continue
                d = max_marker if r[CTRL] else max_data
                if pid not in d or r[EPOCH] > d[pid]:
                    d[pid] = r[EPOCH]
    coords = coordinator_states(dump)
    findings = []
    for (kind, topic, part), node in refs.items():
        if kind not in TXN_KINDS:
            continue
        for pid, seg in scan.open_txns[(node, kind, topic, part)].items():
            f: dict[str, Any] = {
                "node": node,
                "kind": kind,
                "topic": topic,
                "partition": part,
                "producerId": pid,
                "offset": seg[0][OFF],
                "epoch": max(x[EPOCH] for x in seg),
                "first_offset": seg[0][OFF],
                "last_offset": seg[-1][OFF],
                "data_records": len(seg),
            }
            st, where, prior, prior_at = coords.get(pid, (None, None, None, None))
            t, code = hanging_reason(max_data.get(pid), max_marker.get(pid), st, f, prior)
            f["type"], f["reason_code"] = t, code
            if code == "prepared-then-completed" and prior is not None:
                f["prepared"] = describe_prepare(prior)
                f["prepared_at"] = prior_at
            if code == "higher-data-epoch":
                f["later_epoch"] = max_data[pid]
            elif code == "higher-marker-epoch":
                f["later_epoch"] = max_marker[pid]
            if st is not None and where is not None:
                f["coordinator"] = describe_state(st, topic, part)
                f["coordinator_at"] = where
            f["nodes"] = [node]
            findings.append(f)
    stats = {
        "open_transactions": len(findings),
        "producers_with_coordinator_state": len(coords),
    }
    options = {"max_examples": max_examples}
    return _finish(dump, "hanging_in_log", findings, HANGING_TYPES, stats, options, max_examples)


def aborted_in_log(dump: LogDump, *, all_replicas: bool = False) -> list[dict[str, Any]]:
    """Every data record's transaction outcome: committed, aborted or open (no marker yet).

    Non-transactional records are committed. By default only each partition's reference
    replica is used, giving one row per (kind, topic, partition, offset).
    """
    scan = _cached_scan(dump)
    refs = reference_replicas(dump)
    rows = []
    for (kind, topic, part), nodes in dump.parts.items():
        if kind not in TXN_KINDS:
            continue
        for node, recs in nodes.items():
            if not all_replicas and refs[(kind, topic, part)] != node:
                continue
            outcomes = scan.outcomes[(node, kind, topic, part)]
            for r in recs:
                if r[CTRL]:
                    continue
                outcome = outcomes.get(r[OFF], "open") if r[TXN] and r[PID] >= 0 else "committed"
                rows.append(
                    {
                        "node": node,
                        "kind": kind,
                        "topic": topic,
                        "partition": part,
                        "offset": r[OFF],
                        "producerId": r[PID],
                        "producerEpoch": r[EPOCH],
                        "isTransactional": r[TXN],
                        "outcome": outcome,
                    }
                )
    rows.sort(key=lambda d: (d["kind"], d["topic"], d["partition"], d["offset"], d["node"]))
    return rows


def outcome_counts(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Counts of aborted_in_log rows by outcome (always all three keys)."""
    out = {"committed": 0, "aborted": 0, "open": 0}
    for r in rows:
        out[r["outcome"]] += 1
    return out


def check_logdump(
    path: str | os.PathLike[str],
    *,
    transaction_version: int | str | None = None,
    max_examples: int = 8,
) -> dict[str, Any]:
    """All broker-log checks on one dump file, the pure-Python way."""
    dump = read_logdump(path)
    results = {
        "epoch_violation": epoch_violation(
            dump, transaction_version=transaction_version, max_examples=max_examples
        ),
        "replica_divergence": replica_divergence(dump, max_examples=max_examples),
        "hanging_in_log": hanging_in_log(dump, max_examples=max_examples),
    }
    out = combine(results)
    out["stats"] = {"records": dump.records, "outcomes": outcome_counts(aborted_in_log(dump))}
    if dump.notes:
        out["input_notes"] = dump.notes
    return out


def check_evidence_py(
    run_dir: str | os.PathLike[str],
    *,
    transaction_version: int | str | None = None,
    max_examples: int = 8,
) -> dict[str, Any]:
    """The Python engine of the run directory's broker-log check: the whole result
    :func:`checkers.logs.run.check_evidence` gives, computed by :func:`check_logdump`.

    Why a wrapper: the Spark engine also says whether it reused the dump's Parquet cache, a
    figure of how it computed, not of the dump; this engine reads the JSON lines and keeps no
    cache, so it says False, as the Spark engine does on a run checked for the first time.
    Unusable input raises :class:`CheckerInputError`, with the Spark engine's message for a
    missing dump.
    """
    p = Path(run_dir)
    path = p if p.is_file() else p / "evidence" / "logdump.jsonl"
    if not path.is_file():
        raise CheckerInputError(f"{path}: no such log dump")
    out = check_logdump(path, transaction_version=transaction_version, max_examples=max_examples)
    out["stats"]["parquet_cache_reused"] = False
    return out
