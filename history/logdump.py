"""Reading and validating a broker log dump: the reader beside the format.

Why in ``history/``: the dump is a stored record of the run, like the history; its format
(:mod:`history.logdump_format`) is shared with the writer (the substrate's evidence step), and
this reader is the one every consumer uses (the pure-Python log checks, the Parquet loader of
:mod:`checkers.load`, the eos reference's outcome join). Nothing here judges anything.

Input rules: line 1 is the header; a torn *last* line (a writer that crashed mid-line) is
skipped with a note; any other bad line is a :class:`CheckerInputError` naming file and line.

Public API::

    read_logdump(path) -> LogDump               # compact per-replica tuples, see OFF..LAST
    iter_records(path), read_header(path), torn_tail(path), first_bad_line(path)
    fetch_lines(path, lines), validate_record(obj), parse_txn_state(payload)
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

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


class CheckerInputError(ValueError):
    """The input cannot be checked; the message is one line (the CLI prints it, exit 2).

    Raised by this reader and by every checker's history parser, so a caller catches one
    class for "unusable input", whatever file it came from.
    """

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
