"""Tests for history/scan.py: the parallel scan must see exactly what the reader sees.

The scan is only allowed to be faster than :class:`history.reader.HistoryReader`, never to
disagree with it: the same ops in the same order on a good file, the same one-line error on a
bad one (wherever the fault sits relative to the chunk boundaries), the same note on a torn
last line. Chunks are made tiny here so that every order rule is also tested across chunks.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import history.scan as scan
from history import HistoryError, HistoryReader, merge_histories
from history.schema import KIND_MERGED

WALL = "2024-05-01T12:00:00.000001Z"


class ListSink:
    """Keeps every op it is given; picklable, so fork workers can return it."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: list[tuple[Any, ...]] = []

    def add(self, *row: Any) -> None:
        self.rows.append(row)

    def close(self) -> tuple[int, list[tuple[Any, ...]]]:
        return self.n, self.rows


def make_sink(n: int) -> ListSink:
    return ListSink(n)


def scanned_ops(s: scan.Scanned) -> list[dict[str, Any]]:
    """The sinks' rows as ops, in file order, the way the reader returns them."""
    assert [n for n, _ in s.sinks] == sorted(n for n, _ in s.sinks)
    ops = []
    for _n, rows in s.sinks:
        for index, pindex, time, wall, process, type_, f, value, error in rows:
            op = {"index": index, "time": time, "wall": wall, "process": process}
            op |= {"type": type_, "f": f, "value": json.loads(value), "pindex": pindex}
            if error is not None:
                op["error"] = json.loads(error)
            ops.append(op)
    return ops


def reader_ops(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    with HistoryReader(path, kind=KIND_MERGED) as r:
        ops = [dict(op) for op in r]
        return ops, list(r.warnings)


def reader_error(path: Path) -> str:
    with pytest.raises(HistoryError) as e, HistoryReader(path, kind=KIND_MERGED) as r:
        for _ in r:
            pass
    return str(e.value)


def write_merged(tmp: Path, plan: list[tuple[Any, list[Any]]]) -> Path:
    """A merged history of per-process files: ``plan`` is (process, [value, ...]) pairs; each
    process alternates invoke and a completion (ok, or fail/info with an error)."""
    files = []
    for n, (process, values) in enumerate(plan):
        p = tmp / f"p{n}.jsonl"
        with open(p, "w") as fh:
            fh.write(json.dumps({"history_format": 1, "process": process, "meta": {}}) + "\n")
            for i, v in enumerate(values):
                op: dict[str, Any] = {"index": i, "time": 10 * i + n, "wall": WALL}
                op |= {"process": process, "f": "step", "value": v}
                kind = ("invoke", "ok", "fail", "info")[0 if i % 2 == 0 else 1 + (i // 2) % 3]
                op["type"] = kind
                if kind in ("fail", "info"):
                    op["error"] = {"reason": f"r{i}"} if kind == "fail" else "timeout"
                fh.write(json.dumps(op) + "\n")
        files.append(p)
    out = tmp / "history.jsonl"
    merge_histories(files, out)
    return out


def body_lines(path: Path) -> tuple[bytes, list[bytes]]:
    head, *lines = path.read_bytes().rstrip(b"\n").split(b"\n")
    return head, lines


def rewrite(path: Path, head: bytes, lines: list[bytes]) -> None:
    path.write_bytes(head + b"\n" + b"".join(x + b"\n" for x in lines))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=10,
)
process_ids = st.integers(min_value=0, max_value=10**6) | st.text(min_size=1, max_size=6)
plans = st.lists(
    st.tuples(process_ids, st.lists(json_values, max_size=12)),
    min_size=1,
    max_size=4,
    unique_by=lambda t: (type(t[0]).__name__, t[0]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=plans, chunk=st.integers(1, 600))
def test_scan_equals_reader_on_valid_histories(
    tmp_path_factory: Any, monkeypatch: Any, plan: Any, chunk: int
) -> None:
    monkeypatch.setattr(scan, "CHUNK_BYTES", chunk)
    path = write_merged(tmp_path_factory.mktemp("ok"), plan)
    got = scan.scan_history(path, make_sink, workers=1)
    ops, warnings = reader_ops(path)
    assert not got.fallback
    assert got.ops == len(ops)
    assert scanned_ops(got) == ops
    assert got.notes == warnings == []


def test_scan_in_worker_processes_equals_reader(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(scan, "CHUNK_BYTES", 2000)
    monkeypatch.setattr(scan, "INLINE_BYTES", 0)
    plan = [(p, [{"v": [p, i, "x" * (i % 50)]} for i in range(300)]) for p in (0, 1, "c")]
    path = write_merged(tmp_path, plan)
    got = scan.scan_history(path, make_sink, workers=2)
    assert len(got.sinks) > 10  # many chunks, so two workers shared them
    assert scanned_ops(got) == reader_ops(path)[0]
    assert got.ops == 900 and not got.fallback


def _edit(field: str, new: Any) -> Any:
    def f(op: dict[str, Any]) -> None:
        if new is KeyError:
            del op[field]
        else:
            op[field] = new(op) if callable(new) else new

    return f


#: Faults a single op line can carry; each breaks one rule of the merged format.
FAULTS = {
    "index-skip": _edit("index", lambda op: op["index"] + 1),
    "index-back": _edit("index", lambda op: op["index"] - 1),
    "time-back": _edit("time", lambda op: op["time"] - 1000),
    "pindex-gap": _edit("pindex", lambda op: op["pindex"] + 1),
    "pindex-missing": _edit("pindex", KeyError),
    "wall-bad": _edit("wall", "yesterday"),
    "type-bad": _edit("type", "done"),
    "f-empty": _edit("f", ""),
    "value-missing": _edit("value", KeyError),
    "error-on-ok": lambda op: op.update(type="ok", error="x"),
    "fail-without-error": lambda op: (op.update(type="fail"), op.pop("error", None)),
    "error-null": lambda op: op.update(type="info", error=None),
    "process-negative": _edit("process", -1),
    "process-empty": _edit("process", ""),
    "index-float": _edit("index", lambda op: op["index"] + 0.5),
}


@pytest.mark.parametrize("chunk", [1, 150, 1 << 20])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_scan_rejects_with_the_readers_error(
    tmp_path: Path, monkeypatch: Any, fault: str, chunk: int
) -> None:
    """Every line of a small file in turn; chunk 1 puts each line in its own chunk, so each
    order fault is also a fault across two chunks."""
    monkeypatch.setattr(scan, "CHUNK_BYTES", chunk)
    path = write_merged(tmp_path, [(0, list(range(6))), ("b", list(range(5)))])
    head, lines = body_lines(path)
    start = 0 if fault not in ("index-back", "time-back") else 1
    discarded: list[int] = []
    for k in range(start, len(lines) - 1):  # the last line's faults are a torn-line question
        bad = list(lines)
        op = json.loads(bad[k])
        FAULTS[fault](op)
        bad[k] = json.dumps(op).encode()
        rewrite(path, head, bad)
        want = reader_error(path)
        with pytest.raises(HistoryError) as e:
            scan.scan_history(
                path, make_sink, workers=1, discard=functools.partial(discarded.append, k)
            )
        assert str(e.value) == want, (fault, k)
        assert discarded[-1:] == [k]


def test_garbled_middle_line_is_the_readers_error(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(scan, "CHUNK_BYTES", 1)
    path = write_merged(tmp_path, [(0, list(range(6)))])
    head, lines = body_lines(path)
    rewrite(path, head, [*lines[:2], lines[2][:9], *lines[3:]])
    with pytest.raises(HistoryError) as e:
        scan.scan_history(path, make_sink, workers=1)
    assert str(e.value) == reader_error(path)
    assert ":4:" in str(e.value)


@pytest.mark.parametrize("cut", [1, 5, 20])
@pytest.mark.parametrize("chunk", [1, 1 << 20])
def test_torn_last_line_is_noted_like_the_reader(
    tmp_path: Path, monkeypatch: Any, cut: int, chunk: int
) -> None:
    monkeypatch.setattr(scan, "CHUNK_BYTES", chunk)
    path = write_merged(tmp_path, [(0, list(range(5))), (1, list(range(4)))])
    path.write_bytes(path.read_bytes()[: -1 - cut])
    got = scan.scan_history(path, make_sink, workers=1)
    ops, warnings = reader_ops(path)
    assert scanned_ops(got) == ops and len(ops) == 8
    assert got.notes == warnings and len(warnings) == 1 and "torn last line" in warnings[0]
    assert not got.fallback


def test_header_only_and_empty_files(tmp_path: Path) -> None:
    path = write_merged(tmp_path, [(0, [])])
    got = scan.scan_history(path, make_sink, workers=1)
    assert got.header is not None and got.ops == 0 and scanned_ops(got) == []
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    got = scan.scan_history(empty, make_sink, workers=1)
    with HistoryReader(empty, kind=KIND_MERGED) as r:
        assert got.header is r.header is None
        assert got.notes == list(r.warnings)


def test_nan_is_not_json_to_the_scan_nor_to_the_reader(tmp_path: Path) -> None:
    """Python's parser reads NaN, a Recorder never writes it (and msgspec and Spark refuse it)."""
    path = write_merged(tmp_path, [(0, [1, 2, 3]), (1, [4, 5])])
    head, lines = body_lines(path)
    lines[1] = lines[1].replace(b'"value":4', b'"value":NaN')
    assert b"NaN" in lines[1]
    rewrite(path, head, lines)
    with pytest.raises(HistoryError) as e:
        scan.scan_history(path, make_sink, workers=1)
    assert str(e.value) == reader_error(path)
    assert ":3: line is not a JSON object" in str(e.value)


def test_what_only_the_reader_accepts_goes_to_the_reader(tmp_path: Path) -> None:
    """Integers past 64 bits and lone surrogate escapes are JSON to Python's parser (and a
    Recorder writes them), not to msgspec's: the reader judges such a file, and its ops reach
    one sink after the discard."""
    path = write_merged(tmp_path, [(2**70, [1, 2, 3]), (0, ["\ud800", 5])])
    assert b"\\ud800" in path.read_bytes()
    discarded: list[int] = []
    got = scan.scan_history(path, make_sink, workers=1, discard=lambda: discarded.append(1))
    assert got.fallback and discarded == [1] and got.ops == 5
    ops = scanned_ops(got)
    assert ops == reader_ops(path)[0]
    assert [op["process"] for op in ops].count(2**70) == 3
    assert "\ud800" in [op["value"] for op in ops]
