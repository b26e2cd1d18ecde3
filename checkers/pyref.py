"""Broker-log evidence checks in plain Python: the reference the Spark checkers must agree with.

Why a second implementation: the Spark checkers (:mod:`checkers.log_evidence`) express a
per-producer state machine as window functions and joins, which is easy to get subtly wrong.
This module runs the same state machine the obvious way, one record at a time, so property
tests can demand that both give identical results, and the benchmark has a baseline to beat.

It also holds what both implementations share and that must not depend on Spark (pyspark is an
optional extra): the validation of the dump format (the format itself, shared with the writer,
is :mod:`history.logdump_format`), the anomaly names and which of them are allowed, the rules
that pick the records shown in examples, the wording of reasons, and the shape of a checker
result. Definitions are in ``docs/anomalies.md``, "Broker log evidence".

Public API::

    read_logdump(path) -> LogDump                          # raises CheckerInputError
    check_logdump(path, *, transaction_version=None, max_examples=8) -> dict
    epoch_violation(dump, ...), replica_divergence(dump, ...), hanging_in_log(dump, ...)
    aborted_in_log(dump, *, all_replicas=False) -> list[dict]
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

#: The dump format (kinds, fields, which are required) lives in :mod:`history.logdump_format`,
#: shared with the writer; these names stay importable from here.
from history.logdump_format import (
    FIELDS,
    HEADER_KEY,
    KINDS,
    LOGDUMP_FORMAT,
    MARKERS,
    OPTIONAL_INT,
    OPTIONAL_STR,
    REQUIRED_BOOL,
    REQUIRED_INT,
    REQUIRED_STR,
    TXN_KINDS,
)

#: What two replicas must agree on at one offset.
FINGERPRINT_FIELDS: Final = (
    "producerId",
    "producerEpoch",
    "isTransactional",
    "isControl",
    "marker",
    "coordinator_epoch",
    "key",
    "payload",
)

#: Records shown per transaction in an example: the first ones, then the last one.
MAX_TXN_RECORDS: Final = 16

EPOCH_TYPES: Final = (
    "data-epoch-regression",
    "marker-epoch-regression",
    "marker-below-data",
    "epoch-bump-in-open-transaction",
    "marker-not-bumped",
    "txn-epoch-reuse",
    "conflicting-markers",
    "duplicate-marker",
)
#: Only judged when the log is (or is said to be) written with transaction version 2.
TV2_TYPES: Final = frozenset(
    ("marker-not-bumped", "txn-epoch-reuse", "conflicting-markers", "duplicate-marker")
)
DIVERGENCE_TYPES: Final = ("replica-divergence", "unreconciled-replica")
HANGING_TYPES: Final = ("hanging-transaction", "open-transaction")
#: Reported with examples but not a reason to call the log invalid (see docs/anomalies.md).
ALLOWED_TYPES: Final = frozenset(("duplicate-marker", "unreconciled-replica", "open-transaction"))

#: Transaction-log ``transactionStatus`` codes (Kafka's TransactionState ids).
TXN_STATUS: Final = {
    "0": "Empty",
    "1": "Ongoing",
    "2": "PrepareCommit",
    "3": "PrepareAbort",
    "4": "CompleteCommit",
    "5": "CompleteAbort",
    "6": "Dead",
    "7": "PrepareEpochFence",
}
IN_FLIGHT_STATES: Final = frozenset(
    ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
)

CHECKERS: Final = ("epoch_violation", "replica_divergence", "hanging_in_log")


class CheckerInputError(ValueError):
    """The input cannot be checked; the message is one line (the CLI prints it, exit 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def snippet(text: str, n: int = 60) -> str:
    """A short, quoted excerpt of a bad line for one-line error messages."""
    text = text.rstrip("\r\n")
    return repr(text[:n]) + ("..." if len(text) > n else "")


# ------------------------------------------------------------------------------------------
# Reading and validating a dump


def _as_str(v: Any) -> str:
    """Strings as they are, other JSON as compact JSON text: what Spark's reader does too."""
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def validate_record(obj: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Return the record normalized to :data:`FIELDS` (``None`` values dropped), or a reason."""
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    rec: dict[str, Any] = {}
    for k in REQUIRED_INT:
        v = obj.get(k)
        if type(v) is not int:
            return None, f"{k} must be an integer, got {v!r}"
        rec[k] = v
    for k in REQUIRED_BOOL:
        v = obj.get(k)
        if type(v) is not bool:
            return None, f"{k} must be true or false, got {v!r}"
        rec[k] = v
    for k in REQUIRED_STR:
        v = obj.get(k)
        if v is None:
            return None, f"missing {k}"
        rec[k] = _as_str(v)
    if rec["kind"] not in KINDS:
        return None, f"kind must be one of {'/'.join(KINDS)}, got {rec['kind']!r}"
    for k in OPTIONAL_INT:
        v = obj.get(k)
        if v is None:
            continue
        if type(v) is not int:
            return None, f"{k} must be an integer, got {v!r}"
        rec[k] = v
    for k in OPTIONAL_STR:
        v = obj.get(k)
        if v is not None:
            rec[k] = _as_str(v)
    hk = obj.get("header_keys")
    if hk is not None:
        if not isinstance(hk, list):
            return None, f"header_keys must be a list, got {hk!r}"
        rec["header_keys"] = [None if h is None else _as_str(h) for h in hk]
    return {k: rec[k] for k in FIELDS if k in rec}, None


def read_header(path: Path) -> dict[str, Any]:
    """Parse and check line 1 of a dump; raises :class:`CheckerInputError`."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline()
    except OSError as e:
        raise CheckerInputError(f"{path}: cannot read: {e.strerror or e}") from None
    if not first.strip(b"\x00 \t\r\n"):
        raise CheckerInputError(f"{path}: empty log dump (no header line)")
    try:
        header = json.loads(first)
    except ValueError:
        raise CheckerInputError(
            f"{path}:1: header is not valid JSON: {snippet(first.decode('utf-8', 'replace'))}"
        ) from None
    if not isinstance(header, dict) or HEADER_KEY not in header:
        raise CheckerInputError(f"{path}:1: not a log dump (no {HEADER_KEY} header)")
    if header[HEADER_KEY] != LOGDUMP_FORMAT:
        raise CheckerInputError(
            f"{path}:1: unsupported logdump format {header[HEADER_KEY]!r} "
            f"(this checker reads {LOGDUMP_FORMAT})"
        )
    return header


def torn_tail(path: Path) -> str | None:
    """The last line's text if it is torn (does not parse as JSON), else None.

    A writer that crashes can only damage the line it was writing, so a bad *last* line is
    expected damage and is skipped with a note; a bad line anywhere else is a hard error.
    """
    size = path.stat().st_size
    window = 1 << 16
    while True:
        with open(path, "rb") as fh:
            start = max(0, size - window)
            fh.seek(start)
            tail = fh.read()
        lines = tail.split(b"\n")
        while lines and not lines[-1].strip(b"\x00 \t\r"):
            lines.pop()
        if start == 0 or len(lines) > 1:
            break
        window *= 4  # the last line is longer than the window: look further back
    if not lines or (start == 0 and len(lines) == 1):
        return None  # only the header
    last = lines[-1]
    try:
        json.loads(last.strip(b"\x00"))
    except ValueError:
        return last.decode("utf-8", "replace")
    return None


def iter_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, normalized record)``; raise on the first bad line (not the last)."""
    read_header(path)
    with open(path, "rb") as fh:
        fh.readline()
        lineno = 1
        pending: tuple[int, bytes] | None = None
        for raw in fh:
            lineno += 1
            if not raw.strip(b"\x00 \t\r\n"):
                continue
            if pending is not None:
                yield _parse_line(path, *pending, last=False)
            pending = (lineno, raw)
        if pending is not None:
            n, raw = pending
            try:
                obj = json.loads(raw.strip(b"\x00"))
            except ValueError:
                return  # torn last line: skipped (read_logdump notes it)
            yield _checked(path, n, obj, raw)


def _parse_line(path: Path, lineno: int, raw: bytes, *, last: bool) -> tuple[int, dict[str, Any]]:
    try:
        obj = json.loads(raw)
    except ValueError:
        raise CheckerInputError(
            f"{path}:{lineno}: not valid JSON: {snippet(raw.decode('utf-8', 'replace'))}"
        ) from None
    return _checked(path, lineno, obj, raw)


def _checked(path: Path, lineno: int, obj: Any, raw: bytes) -> tuple[int, dict[str, Any]]:
    rec, why = validate_record(obj)
    if rec is None:
        raise CheckerInputError(
            f"{path}:{lineno}: bad record ({why}): {snippet(raw.decode('utf-8', 'replace'))}"
        )
    return lineno, rec


def first_bad_line(path: Path) -> str | None:
    """The one-line error for the first bad line of a dump, or None if every line is good."""
    try:
        for _ in iter_records(path):
            pass
    except CheckerInputError as e:
        return str(e)
    return None


# Compact per-record tuples: what the checks need, kept small so 10M records fit in memory.
OFF, ROW, PID, EPOCH, TXN, CTRL, MARK, FP, PLE, LAST = range(10)


@dataclass
class LogDump:
    """A dump held as compact tuples per replica partition (see :func:`read_logdump`)."""

    path: Path
    header: dict[str, Any]
    #: (kind, topic, partition) -> node -> records sorted by (offset, line)
    parts: dict[tuple[str, str, int], dict[int, list[tuple[Any, ...]]]]
    #: txnlog records: (node, partition, offset, line, payload text)
    txnlog: list[tuple[int, int, int, int, str | None]]
    records: int = 0
    notes: list[str] = field(default_factory=list)


def read_logdump(path: str | os.PathLike[str]) -> LogDump:
    """Read a whole dump; raises :class:`CheckerInputError` with file and line on bad input."""
    p = Path(path)
    header = read_header(p)
    notes: list[str] = []
    torn = torn_tail(p)
    if torn is not None:
        notes.append(f"{p}: torn last line skipped (writer crashed mid-write): {snippet(torn)}")
    parts: dict[tuple[str, str, int], dict[int, list[tuple[Any, ...]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    txnlog: list[tuple[int, int, int, int, str | None]] = []
    n = 0
    for lineno, r in iter_records(p):
        n += 1
        marker = r.get("marker") if r["isControl"] and r.get("marker") in MARKERS else None
        fp = tuple(r.get(k) for k in FINGERPRINT_FIELDS)
        last = r.get("lastOffset")
        tup = (
            r["offset"],
            lineno,
            r["producerId"],
            r["producerEpoch"],
            r["isTransactional"],
            r["isControl"],
            marker,
            fp,
            r.get("partitionLeaderEpoch"),
            r["offset"] if last is None else max(last, r["offset"]),
        )
        parts[(r["kind"], r["topic"], r["partition"])][r["node"]].append(tup)
        if r["kind"] == "txnlog":
            txnlog.append((r["node"], r["partition"], r["offset"], lineno, r.get("payload")))
    for nodes in parts.values():
        for recs in nodes.values():
            recs.sort(key=lambda t: (t[OFF], t[ROW]))
    return LogDump(p, header, parts, txnlog, n, notes)


def fetch_lines(path: Path, lines: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Full normalized records for the given line numbers (a second pass, for examples only)."""
    want = set(lines)
    out: dict[int, dict[str, Any]] = {}
    if not want:
        return out
    for lineno, rec in iter_records(path):
        if lineno in want:
            out[lineno] = rec
            if len(out) == len(want):
                break
    return out


# ------------------------------------------------------------------------------------------
# Shared by both implementations: replica choice, reasons, examples, result shape


def reference_rank(node: int, max_ple: int, log_end: int) -> tuple[int, int, int]:
    """Sort key (smallest first) choosing a partition's reference replica.

    The replica that followed the newest leader (highest partition leader epoch stamped on
    its records), then the longest log, then the lowest node id: the broker dump has no record
    of who led at the end, and this is the replica whose log the last leader would have had.
    """
    return (-max_ple, -log_end, node)


def parse_txn_state(payload: str | None) -> dict[str, Any] | None:
    """Decode a transaction-log value as printed by Kafka's decoder; None for tombstones."""
    if payload is None:
        return None
    try:
        obj = json.loads(payload)
    except ValueError:
        return None
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, dict):
        return None
    pid, epoch = data.get("producerId"), data.get("producerEpoch")
    if type(pid) is not int or type(epoch) is not int:
        return None
    status = data.get("transactionStatus")
    status_s = None if status is None else _as_str(status)
    parts: list[tuple[str, int]] = []
    for tp in data.get("transactionPartitions") or []:
        if isinstance(tp, dict) and isinstance(tp.get("topic"), str):
            parts += [(tp["topic"], p) for p in tp.get("partitionIds") or [] if type(p) is int]
    return {
        "producerId": pid,
        "producerEpoch": epoch,
        "status": TXN_STATUS.get(status_s or "", status_s),
        "partitions": parts,
    }


def coordinator_in_flight(
    state: dict[str, Any] | None, topic: str, partition: int, epoch: int
) -> bool:
    """Does the coordinator's latest state say this partition is in an unfinished transaction?"""
    return (
        state is not None
        and state["status"] in IN_FLIGHT_STATES
        and (topic, partition) in state["partitions"]
        and state["producerEpoch"] in (epoch, epoch + 1)
    )


def hanging_reason(
    max_data_any: int | None, max_marker_any: int | None, state: dict[str, Any] | None, f: dict
) -> tuple[str, str]:
    """Classify an open transaction: (type, reason code). Shared so both sides agree."""
    e = f["epoch"]
    if max_data_any is not None and max_data_any > e:
        return "hanging-transaction", "higher-data-epoch"
    if max_marker_any is not None and max_marker_any > e + 1:
        return "hanging-transaction", "higher-marker-epoch"
    if state is not None:
        if coordinator_in_flight(state, f["topic"], f["partition"], e):
            return "open-transaction", "coordinator-in-flight"
        return "hanging-transaction", "coordinator-moved-on"
    return "open-transaction", "no-coordinator-state"


def reason(f: dict[str, Any]) -> str:
    """One sentence explaining a finding, built from its fields only."""
    t = f["type"]
    pid = f.get("producerId")
    if t == "data-epoch-regression":
        return (
            f"producer {pid} wrote data at epoch {f['epoch']} after epoch {f['prior_epoch']} "
            f"(offset {f['prior_offset']}) on this replica: a fenced (zombie) write"
        )
    if t == "marker-epoch-regression":
        return (
            f"{f['outcome']} marker of producer {pid} at epoch {f['epoch']} after epoch "
            f"{f['prior_epoch']} (offset {f['prior_offset']})"
        )
    if t == "marker-below-data":
        return (
            f"{f['outcome']} marker at epoch {f['epoch']} ends a transaction holding data at "
            f"epoch {f['data_epoch']} (offset {f['data_offset']})"
        )
    if t == "epoch-bump-in-open-transaction":
        return (
            f"producer {pid} wrote data at epoch {f['epoch']} while its transaction at epoch "
            f"{f['prior_epoch']} (from offset {f['first_offset']}) had no marker"
        )
    if t == "marker-not-bumped":
        return (
            f"TV2: {f['outcome']} marker at epoch {f['epoch']} ends a transaction written at "
            f"epoch {f['epoch']}; the coordinator must bump the epoch"
        )
    if t == "txn-epoch-reuse":
        return (
            f"TV2: transaction at epoch {f['epoch']} reuses the epoch of the transaction ended "
            f"by the marker at offset {f['prior_marker_offset']}"
        )
    if t in ("conflicting-markers", "duplicate-marker"):
        return (
            f"TV2: {f['outcome']} marker at epoch {f['epoch']} follows the {f['prior_outcome']} "
            f"marker at offset {f['prior_offset']} with the same epoch and no data between"
        )
    if t in ("hanging-transaction", "open-transaction"):
        code = f["reason_code"]
        head = (
            f"{f['data_records']} record(s) of producer {pid} at epoch {f['epoch']} "
            f"(offsets {f['first_offset']}..{f['last_offset']}) have no marker"
        )
        if code == "higher-data-epoch":
            tail = f"; the producer later wrote data at epoch {f['later_epoch']}"
        elif code == "higher-marker-epoch":
            tail = (
                f"; a marker of epoch {f['later_epoch']} shows the coordinator moved past "
                "this epoch"
            )
        elif code == "coordinator-moved-on":
            tail = (
                f"; the coordinator's latest state ({f['coordinator']}) does not cover this "
                "partition at this epoch"
            )
        elif code == "coordinator-in-flight":
            tail = f"; the coordinator's latest state ({f['coordinator']}) still has it in progress"
        else:
            tail = (
                "; no coordinator state in the dump and no later epoch: possibly in flight "
                "when the brokers stopped"
            )
        return head + tail
    if t in ("replica-divergence", "unreconciled-replica"):
        base = (
            f"{f['variants']} different records at offset {f['offset']} (below the smallest "
            f"replica log end {f['min_log_end']})"
        )
        if t == "unreconciled-replica":
            return base + "; the disagreeing replica never fetched from the newer leader"
        return base
    return t


#: A selector names records to show: ("at", node, kind, topic, partition, offset) or
#: ("range", node, kind, topic, partition, producerId, lo, hi): data records of the producer.
Selector = tuple[Any, ...]


def selectors(f: dict[str, Any]) -> list[Selector]:
    """The records an example shows, as selectors into the finding's representative replica."""
    t, node, k, tp, p = f["type"], f["node"], f["kind"], f["topic"], f["partition"]
    pid, off = f.get("producerId"), f["offset"]

    def at(o: int, n: int = node, kind: str = k, topic: str = tp, part: int = p) -> Selector:
        return ("at", n, kind, topic, part, o)

    def rng(lo: int, hi: int) -> Selector:
        return ("range", node, k, tp, p, pid, lo, hi)

    if t in ("data-epoch-regression", "marker-epoch-regression"):
        return [at(f["prior_offset"]), at(off)]
    if t == "marker-below-data":
        return [at(f["data_offset"]), at(off)]
    if t == "epoch-bump-in-open-transaction":
        return [rng(f["first_offset"], off)]
    if t == "marker-not-bumped":
        return [rng(f["first_offset"], off), at(off)]
    if t == "txn-epoch-reuse":
        return [
            rng(f["prior_first_offset"], f["prior_marker_offset"]),
            at(f["prior_marker_offset"]),
            at(off),
        ]
    if t in ("conflicting-markers", "duplicate-marker"):
        return [at(f["prior_offset"]), at(off)]
    if t in ("hanging-transaction", "open-transaction"):
        sel = [rng(f["first_offset"], f["last_offset"])]
        c = f.get("coordinator_at")
        if c is not None:
            sel.append(at(c[2], n=c[0], kind="txnlog", topic=c[1], part=c[3]))
        return sel
    if t in ("replica-divergence", "unreconciled-replica"):
        return [at(off, n=n) for n in f["nodes"]]
    raise ValueError(t)


def example(f: dict[str, Any], resolved: dict[Selector, tuple[list[dict], int]]) -> dict[str, Any]:
    """A finding as shown to a reader: its fields, a reason, and the records involved."""
    out = {k: v for k, v in f.items() if k not in ("node", "coordinator_at")}
    out["reason"] = reason(f)
    records: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    omitted = 0
    for s in selectors(f):
        recs, om = resolved.get(s, ([], 0))
        omitted += om
        for r in recs:
            ident = (r["node"], r["kind"], r["topic"], r["partition"], r["offset"])
            if ident not in seen:
                seen.add(ident)
                records.append(r)
    out["records"] = records
    if omitted:
        out["records_omitted"] = omitted
    return out


def finding_order(f: dict[str, Any]) -> tuple[Any, ...]:
    """Examples are shown in log order: by partition, producer, offset."""
    pid = f.get("producerId")
    return (f["kind"], f["topic"], f["partition"], -2 if pid is None else pid, f["offset"])


def finding_key(f: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two replicas' findings the same case."""
    return (f["type"], f["kind"], f["topic"], f["partition"], f.get("producerId"), f["offset"])


def merge_replicas(findings: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One case per finding key: the lowest node's finding, with every node that shows it."""
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    nodes: dict[tuple[Any, ...], set[int]] = defaultdict(set)
    for f in findings:
        key = finding_key(f)
        nodes[key].add(f["node"])
        cur = by_key.get(key)
        if cur is None or f["node"] < cur["node"]:
            by_key[key] = f
    out = []
    for key, f in by_key.items():
        g = dict(f)
        if "nodes" not in g:
            g["nodes"] = sorted(nodes[key])
        out.append(g)
    return out


def result(
    checker: str,
    counts: dict[str, int],
    examples: dict[str, list[dict[str, Any]]],
    stats: dict[str, Any],
    options: dict[str, Any],
    *,
    considered: Iterable[str],
) -> dict[str, Any]:
    """The common result shape (same keys as the queue checker's)."""
    counts = {t: n for t, n in sorted(counts.items()) if n}
    bad = sorted(t for t in counts if t not in ALLOWED_TYPES)
    return {
        "checker": checker,
        "valid": not bad,
        "anomalies": counts,
        "anomaly_types": list(counts),
        "bad_anomaly_types": bad,
        "allowed_anomaly_types": sorted(ALLOWED_TYPES & set(considered)),
        "examples": {t: examples[t] for t in counts if examples.get(t)},
        "options": options,
        "stats": stats,
    }


def resolve_tv(transaction_version: int | str | None, bumped: int, unbumped: int) -> dict[str, Any]:
    """Which rules apply: an explicit version, or TV2 when commits carry bumped epochs.

    Detection counts transactions with data that a COMMIT marker ends: under TV2 the marker
    carries the transaction's epoch + 1 (and the next transaction writes at that epoch); under
    TV0/1 it carries the transaction's own epoch. Aborts are not counted, because TV0 bumps the
    epoch when the coordinator aborts on timeout or fences a producer.
    """
    ev = {"bumped_commits": bumped, "unbumped_commits": unbumped}
    if transaction_version in (None, "detect", "auto"):
        tv = 2 if bumped > unbumped else 0
        return {"used": tv, "source": "detected", "evidence": ev}
    if transaction_version not in (0, 1, 2):
        raise ValueError(
            f"transaction_version must be 0, 1, 2 or None, not {transaction_version!r}"
        )
    return {"used": int(transaction_version), "source": "argument", "evidence": ev}


def top_findings(findings: list[dict[str, Any]], n: int) -> dict[str, list[dict[str, Any]]]:
    """Per type, the first ``n`` findings in log order."""
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in sorted(findings, key=finding_order):
        if len(by_type[f["type"]]) < n:
            by_type[f["type"]].append(f)
    return by_type


# ------------------------------------------------------------------------------------------
# The checks


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


def _replica_summary(recs: list[tuple[Any, ...]]) -> tuple[int, int]:
    """(max partition leader epoch, log end offset) of one replica partition."""
    ple = max((r[PLE] for r in recs if r[PLE] is not None), default=-1)
    end = max((r[LAST] for r in recs), default=-1) + 1
    return ple, end


def reference_replicas(dump: LogDump) -> dict[tuple[str, str, int], int]:
    """(kind, topic, partition) -> the node chosen by :func:`reference_rank`."""
    out = {}
    for key, nodes in dump.parts.items():
        out[key] = min(nodes, key=lambda n: reference_rank(n, *_replica_summary(nodes[n])))
    return out


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
        summary = {n: _replica_summary(recs) for n, recs in nodes.items()}
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


def coordinator_states(
    dump: LogDump,
) -> dict[int, tuple[dict[str, Any], tuple[int, str, int, int]]]:
    """pid -> (latest decoded transaction-log state, (node, topic, offset, partition) of it).

    Read from each transaction-log partition's reference replica; the latest state of a
    producer id is the one at the highest (partition, offset).
    """
    refs = reference_replicas(dump)
    best: dict[int, tuple[tuple[int, int], dict[str, Any], tuple[int, str, int, int]]] = {}
    topic_of = {(k[2]): k[1] for k in dump.parts if k[0] == "txnlog"}
    for node, part, off, _line, payload in dump.txnlog:
        topic = topic_of.get(part)
        if topic is None or refs.get(("txnlog", topic, part)) != node:
            continue
        st = parse_txn_state(payload)
        if st is None:
            continue
        rank = (part, off)
        cur = best.get(st["producerId"])
        if cur is None or rank > cur[0]:
            best[st["producerId"]] = (rank, st, (node, topic, off, part))
    return {pid: (st, where) for pid, (_, st, where) in best.items()}


def describe_state(st: dict[str, Any], topic: str, part: int) -> str:
    cover = "covers" if (topic, part) in st["partitions"] else "does not cover"
    return f"{st['status']} at epoch {st['producerEpoch']}, {cover} this partition"


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
            st, where = coords.get(pid, (None, None))
            t, code = hanging_reason(max_data.get(pid), max_marker.get(pid), st, f)
            f["type"], f["reason_code"] = t, code
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


def combine(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Merge checker results into one verdict: invalid if any is, unknown if any errored."""
    anomalies: dict[str, int] = {}
    bad: list[str] = []
    unknown = False
    for r in results.values():
        if r.get("valid") == "unknown":
            unknown = True
        anomalies.update(r.get("anomalies", {}))
        bad += r.get("bad_anomaly_types", [])
    valid: bool | str = False if bad else ("unknown" if unknown else True)
    return {
        "valid": valid,
        "anomalies": dict(sorted(anomalies.items())),
        "bad_anomaly_types": sorted(set(bad)),
        "checkers": results,
    }


def unknown_result(error: str) -> dict[str, Any]:
    """The verdict when the checks could not run: never ``valid: true``."""
    return {"valid": "unknown", "error": error, "anomalies": {}, "checkers": {}}


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
