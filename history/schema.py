"""History format v1: the op and header shapes, and the rules that make a history checkable.

This module is the single place where the contract between workloads, nemeses and checkers is
written down in code; ``docs/history-format.md`` is its prose twin and the two must agree.
Everything here is pure (no I/O) so checkers can validate ops they built themselves.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, Final, Literal, NotRequired, TypedDict, cast

#: Major version of the on-disk format. Bumped only for changes an old reader would misread;
#: additive changes (new optional header keys or op keys) keep the number, because readers ignore
#: keys they do not know.
FORMAT_VERSION: Final = 1

#: Header key that carries the major version; its presence is also what marks a file as a history.
VERSION_KEY: Final = "history_format"

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: Final[frozenset[str]] = frozenset(("invoke", "ok", "fail", "info"))
COMPLETION_TYPES: Final[frozenset[str]] = frozenset(("ok", "fail", "info"))

#: Header ``kind`` values: one writer's file, or the output of :func:`history.merge_histories`.
KIND_PROCESS: Final = "process"
KIND_MERGED: Final = "merged"
KINDS: Final[frozenset[str]] = frozenset((KIND_PROCESS, KIND_MERGED))

Process = int | str

#: The one JSON encoding used for every line. A shared encoder because json.dumps() with
#: non-default arguments builds a fresh JSONEncoder per call, which shows at a million ops.
#: allow_nan=False keeps files strict JSON for non-Python readers (jq, Clojure checkers);
#: ensure_ascii=True means any Python str, even with lone surrogates, round-trips exactly.
encode_json: Final[Callable[[object], str]] = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=True, check_circular=False, allow_nan=False
).encode


class Op(TypedDict):
    """One history line. A plain dict at runtime so recording and reading stay allocation-light."""

    index: int
    time: int
    wall: str
    process: Process
    type: OpType
    f: str
    value: Any
    error: NotRequired[Any]
    pindex: NotRequired[int]


class Header(TypedDict):
    """First line of every history file; the only place the format version is stated."""

    history_format: int
    kind: NotRequired[str]
    process: NotRequired[Process]
    meta: NotRequired[dict[str, Any]]
    clock: NotRequired[dict[str, Any]]
    sources: NotRequired[list[dict[str, Any]]]
    merged_wall: NotRequired[str]


class HistoryError(ValueError):
    """A history violates the format. The message is always a single line so it fits a CI log."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class UnsupportedFormatError(HistoryError):
    """The file is a history, but of a major version this reader cannot interpret safely."""


_REQUIRED: Final = ("index", "time", "wall", "process", "type", "f", "value")


def _is_int(x: object) -> bool:
    # bool is an int subclass; True as an index or timestamp is always a writer bug.
    return type(x) is int


def is_process_id(x: object) -> bool:
    """Process ids are ints (clients) or non-empty strings (``"nemesis"``, ``"seeder"``)."""
    return (type(x) is int and x >= 0) or (type(x) is str and x != "")


#: The processes that record faults: ``"nemesis"`` the one-after-another faults,
#: ``"nemesis-clients"`` the stream kinds that run beside them (crash-clients), each a process
#: of its own because the two overlap in time and a process does one op at a time.
NEMESIS_PROCESSES: Final = ("nemesis", "nemesis-clients")


def is_nemesis(process: object) -> bool:
    """Whether ``process`` is one of the nemesis' processes (its ops are faults)."""
    return process in NEMESIS_PROCESSES


#: What a fault does to the client processes it is aimed at, as the nemesis records it in the
#: value of its ``start`` ops (``traits``, a list of these names; absent in histories recorded
#: before the field, which readers treat as no traits). ``stops-client``: a live client process
#: is stopped (SIGSTOP) while the fault lasts; ``cuts-client``: a live client process is cut
#: off from every broker while the fault lasts. Kills are neither: the process is gone.
STOPS_CLIENT: Final = "stops-client"
CUTS_CLIENT: Final = "cuts-client"
FAULT_TRAITS: Final = frozenset({STOPS_CLIENT, CUTS_CLIENT})


def fault_traits(value: object) -> frozenset[str]:
    """The traits a nemesis ``start`` op's value declares (none for an older history's)."""
    traits = value.get("traits") if isinstance(value, dict) else None
    if not isinstance(traits, list):
        return frozenset()
    return frozenset(t for t in traits if isinstance(t, str))


def process_sort_key(process: Process) -> tuple[int, int, str]:
    """Total order over mixed int/str process ids (ints first) so merge tie-breaks never raise."""
    if type(process) is int:
        return (0, process, "")
    return (1, 0, str(process))


def wall_ms(wall: Any) -> int | None:
    """An op's ``wall`` (ISO-8601 UTC) in epoch milliseconds, the clock of a record's
    ``create_time`` and of the Connect task journals; None if it does not parse."""
    if not isinstance(wall, str):
        return None
    try:
        return int(datetime.fromisoformat(wall.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _check_wall(wall: str) -> str | None:
    try:
        parsed = datetime.fromisoformat(wall)
    except ValueError:
        return f"field 'wall' is not ISO-8601: {wall!r}"
    if parsed.utcoffset() != timedelta(0):
        return f"field 'wall' is not UTC: {wall!r}"
    return None


def validate_op(op: object) -> None:
    """Raise :class:`HistoryError` naming the first problem, so a bad writer is caught at the
    boundary instead of surfacing as a confusing checker verdict later."""
    if not isinstance(op, dict):
        raise HistoryError(f"op is a {type(op).__name__}, not a JSON object")
    for key in _REQUIRED:
        if key not in op:
            raise HistoryError(f"op is missing required field {key!r}")
    index = op["index"]
    if not _is_int(index) or index < 0:
        raise HistoryError(f"field 'index' must be a non-negative int, got {index!r}")
    t = op["time"]
    if not _is_int(t) or t < 0:
        raise HistoryError(f"field 'time' must be a non-negative int (monotonic ns), got {t!r}")
    wall = op["wall"]
    if type(wall) is not str:
        raise HistoryError(f"field 'wall' must be a string, got {type(wall).__name__}")
    problem = _check_wall(wall)
    if problem is not None:
        raise HistoryError(problem)
    if not is_process_id(op["process"]):
        raise HistoryError(
            f"field 'process' must be a non-negative int or non-empty string, got {op['process']!r}"
        )
    op_type = op["type"]
    if op_type not in OP_TYPES:
        raise HistoryError(
            f"field 'type' must be one of invoke/ok/fail/info, got {op_type!r}"
            if type(op_type) is str
            else f"field 'type' must be a string, got {type(op_type).__name__}"
        )
    f = op["f"]
    if type(f) is not str or f == "":
        raise HistoryError(f"field 'f' must be a non-empty string, got {f!r}")
    if "error" in op:
        if op["error"] is None:
            raise HistoryError("field 'error' is null; omit the field when there is no error")
        if op_type in ("invoke", "ok"):
            raise HistoryError(f"field 'error' is not allowed on a {op_type!r} op")
    elif op_type == "fail":
        raise HistoryError("a 'fail' op must carry an 'error' saying why it failed")
    if "pindex" in op and (not _is_int(op["pindex"]) or op["pindex"] < 0):
        raise HistoryError(f"field 'pindex' must be a non-negative int, got {op['pindex']!r}")


def validate_header(header: object) -> Header:
    """Check a header line and return it typed. Version is checked first, so a future file is
    reported as "too new" rather than as a pile of unrelated field errors."""
    if not isinstance(header, dict) or VERSION_KEY not in header:
        raise HistoryError(f"not a history file: first line has no {VERSION_KEY!r} field")
    version = header[VERSION_KEY]
    if not _is_int(version):
        raise HistoryError(f"{VERSION_KEY!r} must be an int major version, got {version!r}")
    if version != FORMAT_VERSION:
        raise UnsupportedFormatError(
            f"unsupported history format version {version} (this reader supports {FORMAT_VERSION})"
        )
    kind = header.get("kind", KIND_PROCESS)
    if kind not in KINDS:
        raise HistoryError(f"header 'kind' must be 'process' or 'merged', got {kind!r}")
    if kind == KIND_PROCESS and not is_process_id(header.get("process")):
        raise HistoryError(
            "header 'process' must be a non-negative int or non-empty string, "
            f"got {header.get('process')!r}"
        )
    if "meta" in header and not isinstance(header["meta"], dict):
        raise HistoryError(f"header 'meta' must be a JSON object, got {header['meta']!r}")
    return cast(Header, header)


def header_kind(header: Header) -> str:
    """Headers written from the issue's example omit ``kind``; those are per-process files."""
    return header.get("kind", KIND_PROCESS)


def check_pairing(ops: Iterable[Op]) -> dict[Process, Op]:
    """Enforce the invoke/completion rules and return the invocations still open at the end.

    Checkers need the open invocations: those are processes that crashed (or were still running
    when the test stopped), whose effects may or may not have happened. Streaming, so it works
    on a merged history of any size.
    """
    pending: dict[Process, Op] = {}
    for op in ops:
        process = op["process"]
        open_op = pending.get(process)
        if op["type"] == "invoke":
            if open_op is not None:
                raise HistoryError(
                    f"op {op['index']}: process {process!r} invoked {op['f']!r} while "
                    f"{open_op['f']!r} (op {open_op['index']}) is still open"
                )
            pending[process] = op
        else:
            if open_op is None:
                raise HistoryError(
                    f"op {op['index']}: {op['type']!r} for process {process!r} "
                    "has no preceding invoke"
                )
            if open_op["f"] != op["f"]:
                raise HistoryError(
                    f"op {op['index']}: completion f {op['f']!r} does not match invoke "
                    f"f {open_op['f']!r} (op {open_op['index']}) of process {process!r}"
                )
            del pending[process]
    return pending
