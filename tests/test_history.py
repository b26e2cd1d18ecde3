"""Tests for history format v1 (history/): the contract every workload, nemesis and checker uses.

The properties that matter most are the ones a checker silently depends on: a crash can only
cost the last line, a corrupted file is never half-read, and a merge is a faithful, deterministic
interleaving of the per-process files that does not hold the history in memory.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import tempfile
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from history import (
    FORMAT_VERSION,
    HistoryError,
    HistoryWarning,
    Op,
    Process,
    Recorder,
    UnsupportedFormatError,
    check_pairing,
    iter_history,
    iter_process_file,
    load_history,
    merge_histories,
    read_process_file,
    validate_header,
    validate_op,
)

WALL = "2024-05-01T12:00:00.000001Z"

# --------------------------------------------------------------------------------------------
# helpers


def write_process_file(
    path: Path, process: Process, times: list[int], *, header: dict[str, Any] | None = None
) -> list[Op]:
    """Write a per-process file with chosen times, which a real Recorder cannot produce."""
    ops: list[Op] = []
    for i, t in enumerate(times):
        op: Op = {
            "index": i,
            "time": t,
            "wall": WALL,
            "process": process,
            "type": "invoke" if i % 2 == 0 else "ok",
            "f": "step",
            "value": [str(process), i],
        }
        ops.append(op)
    head = header if header is not None else {"history_format": 1, "process": process, "meta": {}}
    with open(path, "w") as fh:
        fh.write(json.dumps(head) + "\n")
        for op in ops:
            fh.write(json.dumps(op) + "\n")
    return ops


def line_offsets(data: bytes) -> list[tuple[int, int]]:
    """(start, end-without-newline) of each line."""
    spans = []
    start = 0
    while start < len(data):
        nl = data.index(b"\n", start)
        spans.append((start, nl))
        start = nl + 1
    return spans


def expected_key(op: Op) -> tuple[int, int, int, str, int]:
    # Written independently of history.merge.merge_key on purpose.
    p = op["process"]
    if isinstance(p, int):
        return (op["time"], 0, p, "", op["index"])
    return (op["time"], 1, 0, p, op["index"])


def strip_merge_fields(op: Op) -> dict[str, Any]:
    out = {k: v for k, v in op.items() if k not in ("index", "pindex")}
    out["index"] = op["pindex"]  # type: ignore[typeddict-item]
    return out


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
process_ids = st.integers(min_value=0, max_value=10**6) | st.text(min_size=1, max_size=8)


# --------------------------------------------------------------------------------------------
# recorder + reader round trip


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "p3.jsonl"
    with Recorder(path, 3, meta={"workload": "queue", "seed": 7}) as rec:
        written = [
            rec.invoke("send", [["send", "k", 1]]),
            rec.ok("send", [["send", "k", [0, 1]]]),
            rec.invoke("poll", [["poll"]]),
            rec.fail("poll", [["poll"]], {"code": "UNKNOWN_TOPIC"}),
            rec.invoke("txn", []),
            rec.info("txn", [], "timeout"),
            rec.invoke("crash", None),
            rec.info("crash", None),
        ]
        assert rec.count == len(written)
    assert rec.closed

    header, ops, warnings = read_process_file(path)
    assert warnings == []
    assert header is not None
    assert header["history_format"] == FORMAT_VERSION
    assert header["process"] == 3
    assert header["meta"] == {"workload": "queue", "seed": 7}
    assert ops == written
    assert [op["index"] for op in ops] == list(range(len(ops)))
    times = [op["time"] for op in ops]
    assert times == sorted(times)
    assert "error" not in ops[7]  # info without error omits the field entirely
    assert ops[3]["error"] == {"code": "UNKNOWN_TOPIC"}
    for op in ops:
        validate_op(op)
        wall = datetime.fromisoformat(op["wall"])
        assert wall.utcoffset() is not None and wall.utcoffset().total_seconds() == 0
        assert abs((datetime.now(UTC) - wall).total_seconds()) < 600


def test_file_is_compact_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with Recorder(path, "seeder") as rec:
        rec.invoke("seed", {"a": [1, 2]})
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # every line, including the last, is newline-terminated
    assert len(lines) == 3
    assert b": " not in lines[1] and b", " not in lines[1]
    assert json.loads(lines[0])["history_format"] == 1


@settings(max_examples=60, deadline=None)
@given(process=process_ids, values=st.lists(json_values, min_size=1, max_size=10))
def test_round_trip_any_json_value(process: Process, values: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.jsonl"
        with Recorder(path, process) as rec:
            for v in values:
                rec.invoke("f", v)
                rec.info("f", v, error=v if v is not None else "x")
        header, ops, warnings = read_process_file(path)
    assert warnings == []
    assert header is not None and header["process"] == process
    assert [op["value"] for op in ops[::2]] == values
    assert [op["value"] for op in ops[1::2]] == values


def test_recorder_refuses_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("precious\n")
    with pytest.raises(FileExistsError):
        Recorder(path, 1)
    assert path.read_text() == "precious\n"


def test_recorder_rejects_contract_violations_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with Recorder(path, 1) as rec:
        size = path.stat().st_size
        with pytest.raises(ValueError, match="op type"):
            rec.record("done", "f", None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="cannot carry an error"):
            rec.record("ok", "f", None, "boom")
        with pytest.raises(ValueError, match="needs an error"):
            rec.fail("f", None, None)
        with pytest.raises(TypeError):
            rec.invoke("f", b"raw bytes are not JSON")
        with pytest.raises(ValueError):
            rec.invoke("f", float("nan"))
        assert path.stat().st_size == size
        assert rec.count == 0
        rec.invoke("f", 1)  # the failed attempts left no gap in the index sequence
    _, ops, _ = read_process_file(path)
    assert [op["index"] for op in ops] == [0]
    with pytest.raises(ValueError, match="closed"):
        rec.invoke("f", 2)
    with pytest.raises(ValueError, match="process"):
        Recorder(tmp_path / "q.jsonl", -1)
    with pytest.raises(ValueError, match="process"):
        Recorder(tmp_path / "r.jsonl", True)


def test_short_writes_are_completed_or_stop_the_recorder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import history.recorder as recorder_module

    real_write = os.write
    calls = {"n": 0}

    def half_then(fail: bool) -> Any:
        def fake_write(fd: int, data: bytes) -> int:
            calls["n"] += 1
            if calls["n"] == 1:
                return real_write(fd, data[: len(data) // 2])
            if fail:
                raise OSError(28, "No space left on device")
            return real_write(fd, data)

        return fake_write

    path = tmp_path / "p.jsonl"
    with Recorder(path, 0) as rec:
        rec.invoke("f", 0)
        monkeypatch.setattr(recorder_module, "_os_write", half_then(fail=False))
        rec.ok("f", 0)  # short write, then the rest: the line is whole
        calls["n"] = 0
        monkeypatch.setattr(recorder_module, "_os_write", half_then(fail=True))
        with pytest.raises(OSError):
            rec.invoke("f", 1)
        assert rec.closed  # nothing may be appended after the torn line
        with pytest.raises(ValueError, match="closed"):
            rec.invoke("f", 2)
    _, ops, warnings = read_process_file(path)
    assert [(op["type"], op["value"]) for op in ops] == [("invoke", 0), ("ok", 0)]
    assert len(warnings) == 1 and ":4:" in warnings[0]


def test_recorder_cannot_be_pickled(tmp_path: Path) -> None:
    with Recorder(tmp_path / "p.jsonl", 1) as rec, pytest.raises(TypeError, match="pickled"):
        pickle.dumps(rec)


def _child_writes_parent_recorder(rec: Recorder) -> None:
    try:
        rec.invoke("stolen", None)
    except RuntimeError:
        os._exit(0)
    os._exit(1)


def test_recorder_is_disarmed_in_forked_child(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    ctx = multiprocessing.get_context("fork")
    with Recorder(path, 1) as rec:
        rec.invoke("mine", 0)
        child = ctx.Process(target=_child_writes_parent_recorder, args=(rec,))
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0
        rec.ok("mine", 0)  # the parent's descriptor is untouched by the child's disarm
    _, ops, _ = read_process_file(path)
    assert [op["f"] for op in ops] == ["mine", "mine"]


# --------------------------------------------------------------------------------------------
# crash tolerance


def test_truncated_last_line_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with Recorder(path, 0) as rec:
        for i in range(5):
            rec.invoke("f", i)
    data = path.read_bytes()
    path.write_bytes(data[:-10])  # tear the last op mid-line, as a crash during write would

    header, ops, warnings = read_process_file(path)
    assert header is not None
    assert [op["value"] for op in ops] == [0, 1, 2, 3]
    assert len(warnings) == 1
    assert f"{path}:6:" in warnings[0] and "torn last line" in warnings[0]


def test_garbage_after_last_line_tolerated(tmp_path: Path) -> None:
    # A machine crash can leave NUL-filled blocks at the end of a file instead of a clean tear.
    path = tmp_path / "p.jsonl"
    with Recorder(path, 0) as rec:
        rec.invoke("f", 0)
    with open(path, "ab") as fh:
        fh.write(b"\x00" * 300)
    _, ops, warnings = read_process_file(path)
    assert len(ops) == 1
    assert len(warnings) == 1 and ":3:" in warnings[0]


def test_torn_header_and_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b'{"history_format":1,"proc')
    for path in (empty, torn):
        header, ops, warnings = read_process_file(path)
        assert header is None
        assert ops == []
        assert len(warnings) == 1 and f"{path}:1:" in warnings[0]


def test_streaming_reader_reports_warnings_after_iteration(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with Recorder(path, 0) as rec:
        rec.invoke("f", 0)
        rec.ok("f", 0)
    path.write_bytes(path.read_bytes()[:-3])
    with iter_process_file(path) as reader:
        assert reader.header is not None and reader.header["process"] == 0
        assert reader.warnings == []
        it = iter(reader)
        assert next(it)["type"] == "invoke"
        assert list(it) == []
        assert len(reader.warnings) == 1
        with pytest.raises(RuntimeError, match="once"):
            iter(reader)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(json_values, min_size=1, max_size=6), data=st.data())
def test_any_truncation_yields_a_prefix(values: list[Any], data: st.DataObject) -> None:
    """Wherever a crash cuts the file, the reader returns exactly the ops whose lines survived."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.jsonl"
        with Recorder(path, 0) as rec:
            written = [rec.invoke("f", v) for v in values]
        full = path.read_bytes()
        cut = data.draw(st.integers(min_value=0, max_value=len(full)), label="cut")
        path.write_bytes(full[:cut])
        header, ops, warnings = read_process_file(path)

    spans = line_offsets(full)
    complete = sum(1 for _, end in spans if end <= cut)
    torn = any(start < cut < end for start, end in spans)
    if complete == 0:
        assert header is None and ops == []
    else:
        assert header is not None
        assert ops == written[: complete - 1]
    assert len(warnings) == (1 if torn or cut == 0 else 0)


def _corrupt_line(path: Path, lineno: int, replacement: bytes) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[lineno - 1] = replacement
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize(
    "garbage", [b"not json", b'{"index": 2, "time"', b"[1, 2, 3]", b"", b"\xff\xfe"]
)
def test_garbled_middle_line_rejected(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "p.jsonl"
    with Recorder(path, 0) as rec:
        for i in range(5):
            rec.invoke("f", i)
    _corrupt_line(path, 4, garbage)  # header is line 1, so this is op index 2
    with pytest.raises(HistoryError) as exc_info:
        read_process_file(path)
    message = str(exc_info.value)
    assert f"{path}:4:" in message
    assert "\n" not in message


def test_garbled_header_with_ops_after_it_rejected(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with Recorder(path, 0) as rec:
        rec.invoke("f", 0)
    _corrupt_line(path, 1, b'{"history_format": 1, "proc')
    with pytest.raises(HistoryError, match=r":1: header line is not valid JSON"):
        read_process_file(path)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda op: op.update(index=7), "index 7 out of sequence"),
        (lambda op: op.update(time=0), "goes backwards"),
        (lambda op: op.update(process=99), "differs from header process"),
        (lambda op: op.update(type="done"), "field 'type'"),
    ],
)
def test_invalid_op_in_file_rejected_with_line(tmp_path: Path, mutate: Any, reason: str) -> None:
    path = tmp_path / "p.jsonl"
    with Recorder(path, 0) as rec:
        for i in range(4):
            rec.invoke("f", i)
    lines = path.read_bytes().split(b"\n")
    op = json.loads(lines[3])
    mutate(op)
    _corrupt_line(path, 4, json.dumps(op).encode())
    with pytest.raises(HistoryError, match=reason) as exc_info:
        read_process_file(path)
    assert f"{path}:4:" in str(exc_info.value)


def test_complete_but_invalid_last_line_is_not_forgiven(tmp_path: Path) -> None:
    # Tolerance is for torn writes only; a whole line that breaks the contract is a bug.
    path = tmp_path / "p.jsonl"
    with Recorder(path, 0) as rec:
        rec.invoke("f", 0)
    with open(path, "a") as fh:
        fh.write(json.dumps({"index": 1, "time": 1}) + "\n")
    with pytest.raises(HistoryError, match=r":3: .*missing required field"):
        read_process_file(path)


# --------------------------------------------------------------------------------------------
# versioning


def test_unknown_major_version_rejected(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    write_process_file(
        path, 0, [1, 2], header={"history_format": 2, "process": 0, "shiny": "new field"}
    )
    with pytest.raises(UnsupportedFormatError) as exc_info:
        read_process_file(path)
    message = str(exc_info.value)
    assert "unsupported history format version 2" in message
    assert "supports 1" in message
    assert f"{path}:1:" in message
    with pytest.raises(UnsupportedFormatError):
        merge_histories([path], tmp_path / "merged.jsonl")
    assert not (tmp_path / "merged.jsonl").exists()


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ({"process": 0}, "not a history file"),
        ([1, 2], "not a history file"),
        ({"history_format": "1", "process": 0}, "int major version"),
        ({"history_format": True, "process": 0}, "int major version"),
        ({"history_format": 1}, "header 'process'"),
        ({"history_format": 1, "process": 0, "kind": "other"}, "header 'kind'"),
        ({"history_format": 1, "process": 0, "meta": []}, "header 'meta'"),
    ],
)
def test_bad_headers_rejected(header: object, reason: str) -> None:
    with pytest.raises(HistoryError, match=reason):
        validate_header(header)


def test_header_without_kind_is_a_process_file_and_extra_keys_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    written = write_process_file(
        path, "nemesis", [5, 6], header={"history_format": 1, "process": "nemesis", "x-new": 1}
    )
    header, ops, _ = read_process_file(path)
    assert header is not None and header["process"] == "nemesis"
    assert ops == written


# --------------------------------------------------------------------------------------------
# op validation


def valid_op(**overrides: Any) -> dict[str, Any]:
    op: dict[str, Any] = {
        "index": 0,
        "time": 10,
        "wall": WALL,
        "process": 0,
        "type": "invoke",
        "f": "send",
        "value": None,
    }
    op.update(overrides)
    return op


def without(key: str) -> dict[str, Any]:
    op = valid_op()
    del op[key]
    return op


@pytest.mark.parametrize(
    "op",
    [
        valid_op(),
        valid_op(process="nemesis", type="info", error={"exit": 137}),
        valid_op(type="fail", error="NOT_LEADER"),
        valid_op(type="ok", value={"k": [[0, 1]]}, pindex=3),
        valid_op(wall="2024-05-01T12:00:00.000001+00:00"),
    ],
)
def test_valid_ops_accepted(op: dict[str, Any]) -> None:
    validate_op(op)


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        *[
            (without(k), f"missing required field '{k}'")
            for k in ("index", "time", "wall", "process", "type", "f", "value")
        ],
        ([], "not a JSON object"),
        (valid_op(index=-1), "'index'"),
        (valid_op(index=True), "'index'"),
        (valid_op(index=1.0), "'index'"),
        (valid_op(time="10"), "'time'"),
        (valid_op(time=-1), "'time'"),
        (valid_op(wall=12), "'wall'"),
        (valid_op(wall="yesterday"), "not ISO-8601"),
        (valid_op(wall="2024-05-01T12:00:00.000001+02:00"), "not UTC"),
        (valid_op(wall="2024-05-01T12:00:00.000001"), "not UTC"),
        (valid_op(process=1.5), "'process'"),
        (valid_op(process=True), "'process'"),
        (valid_op(process=-3), "'process'"),
        (valid_op(process=""), "'process'"),
        (valid_op(process=None), "'process'"),
        (valid_op(type="done"), "one of invoke/ok/fail/info"),
        (valid_op(type="OK"), "one of invoke/ok/fail/info"),
        (valid_op(type=None), "'type' must be a string"),
        (valid_op(f=3), "'f'"),
        (valid_op(f=""), "'f'"),
        (valid_op(type="info", error=None), "omit the field"),
        (valid_op(type="ok", error="x"), "not allowed on a 'ok'"),
        (valid_op(type="invoke", error="x"), "not allowed on a 'invoke'"),
        (valid_op(type="fail"), "must carry an 'error'"),
        (valid_op(pindex=-1), "'pindex'"),
    ],
)
def test_validation_errors(op: object, reason: str) -> None:
    with pytest.raises(HistoryError) as exc_info:
        validate_op(op)
    message = str(exc_info.value)
    assert reason in message
    assert "\n" not in message


# --------------------------------------------------------------------------------------------
# invoke/completion pairing


def test_check_pairing_returns_open_invokes() -> None:
    ops = [
        valid_op(index=0, process=0, type="invoke", f="send"),
        valid_op(index=1, process=1, type="invoke", f="poll"),
        valid_op(index=2, process=0, type="ok", f="send"),
        valid_op(index=3, process="nemesis", type="invoke", f="kill"),
        valid_op(index=4, process="nemesis", type="info", f="kill", error="timeout"),
        valid_op(index=5, process=2, type="invoke", f="send"),
        valid_op(index=6, process=2, type="fail", f="send", error="x"),
    ]
    pending = check_pairing(ops)  # type: ignore[arg-type]
    assert list(pending) == [1]  # process 1 crashed mid-poll: no completion, ever
    assert pending[1]["index"] == 1


@pytest.mark.parametrize(
    ("ops", "reason"),
    [
        ([valid_op(type="ok")], "has no preceding invoke"),
        ([valid_op(f="send"), valid_op(index=1, type="ok", f="poll")], "does not match"),
        ([valid_op(f="send"), valid_op(index=1, f="poll")], "still open"),
    ],
)
def test_check_pairing_rejects(ops: list[dict[str, Any]], reason: str) -> None:
    with pytest.raises(HistoryError, match=reason):
        check_pairing(ops)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# merge


def test_merge_orders_interleaved_times_across_three_files(tmp_path: Path) -> None:
    a = write_process_file(tmp_path / "a.jsonl", 2, [10, 20, 30, 30, 45])
    b = write_process_file(tmp_path / "b.jsonl", 0, [5, 20, 31, 60])
    c = write_process_file(tmp_path / "c.jsonl", "nemesis", [1, 20, 30, 44])
    out = tmp_path / "history.jsonl"

    summary = merge_histories(
        [tmp_path / "c.jsonl", tmp_path / "a.jsonl", tmp_path / "b.jsonl"],
        out,
        meta={"run": "t1"},
    )

    assert summary.ops == 13
    assert summary.ops_per_process == {0: 4, 2: 5, "nemesis": 4}
    assert summary.warnings == () and summary.skipped == ()
    merged = load_history(out)
    assert [(op["time"], op["process"], op["pindex"]) for op in merged] == [
        (1, "nemesis", 0),
        (5, 0, 0),
        (10, 2, 0),
        (20, 0, 1),  # equal times: int processes before string ones, ints by value
        (20, 2, 1),
        (20, "nemesis", 1),
        (30, 2, 2),  # equal times within a process keep file order
        (30, 2, 3),
        (30, "nemesis", 2),
        (31, 0, 2),
        (44, "nemesis", 3),
        (45, 2, 4),
        (60, 0, 3),
    ]
    assert [op["index"] for op in merged] == list(range(13))
    by_process = {
        p: [strip_merge_fields(op) for op in merged if op["process"] == p] for p in (2, 0)
    }
    assert by_process[2] == a
    assert by_process[0] == b
    assert [strip_merge_fields(op) for op in merged if op["process"] == "nemesis"] == c

    with iter_history(out) as reader:
        assert reader.header is not None
        assert reader.header["kind"] == "merged"
        assert reader.header["meta"] == {"run": "t1"}
        assert [s["process"] for s in reader.header["sources"]] == [0, 2, "nemesis"]
        assert sum(1 for _ in reader) == 13


@settings(max_examples=80, deadline=None)
@given(
    files=st.dictionaries(
        keys=process_ids,
        values=st.lists(st.integers(min_value=0, max_value=40), max_size=25).map(sorted),
        max_size=5,
    ),
    data=st.data(),
)
def test_streaming_merge_property(files: dict[Process, list[int]], data: st.DataObject) -> None:
    """Merge = stable interleaving by (time, process, pindex), whatever order inputs come in."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = []
        written: dict[Process, list[Op]] = {}
        for n, (process, times) in enumerate(files.items()):
            path = root / f"p{n}.jsonl"
            written[process] = write_process_file(path, process, times)
            paths.append(path)
        order = data.draw(st.permutations(paths), label="input order")
        summary = merge_histories(order, root / "merged.jsonl")
        merged = load_history(root / "merged.jsonl")
        again = merge_histories(list(reversed(order)), root / "merged2.jsonl")
        merged2 = load_history(root / "merged2.jsonl")

    everything = [op for ops in written.values() for op in ops]
    assert summary.ops == again.ops == len(everything)
    assert merged == merged2
    assert [op["index"] for op in merged] == list(range(len(everything)))
    assert [strip_merge_fields(op) for op in merged] == sorted(everything, key=expected_key)
    for process, ops in written.items():
        assert [strip_merge_fields(op) for op in merged if op["process"] == process] == ops
        assert summary.ops_per_process[process] == len(ops)


def _write_many(path: Path, process: int, start: int, count: int) -> None:
    head = json.dumps({"history_format": 1, "process": process})
    with open(path, "w") as fh:
        fh.write(head + "\n")
        for i in range(count):
            fh.write(
                f'{{"index":{i},"time":{start + 3 * i},"wall":"{WALL}","process":{process},'
                f'"type":"invoke","f":"send","value":["send",{i},"{"x" * 40}"]}}\n'
            )


def test_merge_streams_in_bounded_memory(tmp_path: Path) -> None:
    """Loading this history would take tens of MB of dicts; a streaming merge stays far below."""
    per_file = 10_000  # 30k ops: well over 6 MB as dicts, so a merge that loads them fails
    paths = []
    for p in range(3):
        path = tmp_path / f"p{p}.jsonl"
        _write_many(path, p, p, per_file)
        paths.append(path)

    tracemalloc.start()
    try:
        summary = merge_histories(paths, tmp_path / "merged.jsonl")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert summary.ops == 3 * per_file
    assert peak < 6 * 1024 * 1024, f"merge peaked at {peak / 1e6:.1f} MB"
    with iter_history(tmp_path / "merged.jsonl") as reader:
        processes = [op["process"] for _, op in zip(range(6), reader, strict=False)]
    assert processes == [0, 1, 2, 0, 1, 2]


def test_merge_skips_writers_that_died_before_their_header(tmp_path: Path) -> None:
    write_process_file(tmp_path / "a.jsonl", 0, [1, 2])
    (tmp_path / "dead.jsonl").write_bytes(b'{"histo')
    with Recorder(tmp_path / "torn.jsonl", 1) as rec:
        rec.invoke("f", 0)
        rec.ok("f", 0)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(torn.read_bytes()[:-5])

    summary = merge_histories(
        [tmp_path / "a.jsonl", tmp_path / "dead.jsonl", torn], tmp_path / "m.jsonl"
    )
    assert summary.skipped == (tmp_path / "dead.jsonl",)
    assert summary.ops_per_process == {0: 2, 1: 1}
    assert len(summary.warnings) == 2
    assert any("dead.jsonl:1:" in w for w in summary.warnings)
    assert any("torn.jsonl:3:" in w for w in summary.warnings)


def test_merge_rejects_inconsistent_inputs(tmp_path: Path) -> None:
    write_process_file(tmp_path / "a.jsonl", 0, [1])
    write_process_file(tmp_path / "b.jsonl", 0, [2])
    with pytest.raises(HistoryError, match="process 0 appears in both"):
        merge_histories([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], tmp_path / "m.jsonl")

    for name, process, boot in (("x.jsonl", 1, "boot-A"), ("y.jsonl", 2, "boot-B")):
        write_process_file(
            tmp_path / name,
            process,
            [1],
            header={"history_format": 1, "process": process, "clock": {"boot_id": boot}},
        )
    with pytest.raises(HistoryError, match="different kernel boots"):
        merge_histories([tmp_path / "x.jsonl", tmp_path / "y.jsonl"], tmp_path / "m.jsonl")

    with pytest.raises(HistoryError, match="also one of its inputs"):
        merge_histories([tmp_path / "a.jsonl"], tmp_path / "a.jsonl")
    assert not (tmp_path / "m.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_merged_and_process_files_are_not_confused(tmp_path: Path) -> None:
    write_process_file(tmp_path / "a.jsonl", 0, [1, 2])
    merge_histories([tmp_path / "a.jsonl"], tmp_path / "m.jsonl")
    with pytest.raises(HistoryError, match="expected a 'merged' history file"):
        load_history(tmp_path / "a.jsonl")
    with pytest.raises(HistoryError, match="expected a 'process' history file"):
        read_process_file(tmp_path / "m.jsonl")


def test_load_history_warns_about_torn_last_line(tmp_path: Path) -> None:
    write_process_file(tmp_path / "a.jsonl", 0, [1, 2, 3])
    merged = tmp_path / "m.jsonl"
    merge_histories([tmp_path / "a.jsonl"], merged)
    merged.write_bytes(merged.read_bytes()[:-4])
    with pytest.warns(HistoryWarning, match="torn last line"):
        ops = load_history(merged)
    assert [op["pindex"] for op in ops] == [0, 1]


def test_merged_file_invariants_are_checked(tmp_path: Path) -> None:
    write_process_file(tmp_path / "a.jsonl", 0, [1, 2, 3])
    merged = tmp_path / "m.jsonl"
    merge_histories([tmp_path / "a.jsonl"], merged)
    lines = merged.read_bytes().split(b"\n")
    op = json.loads(lines[2])
    op["pindex"] = 5
    lines[2] = json.dumps(op).encode()
    merged.write_bytes(b"\n".join(lines))
    with pytest.raises(HistoryError, match=r":3: pindex 5 of process 0 out of sequence"):
        load_history(merged)


# --------------------------------------------------------------------------------------------
# two OS processes


def _pingpong_writer(path: str, process: int, my_turn: Any, their_turn: Any, rounds: int) -> None:
    """Strict alternation via semaphores: the causal order is known, so the merge must match it."""
    with Recorder(path, process, meta={"pid": os.getpid()}) as rec:
        for i in range(rounds):
            if not my_turn.acquire(timeout=60):
                raise TimeoutError(f"process {process} never got turn {i}")
            rec.invoke("step", i)
            rec.ok("step", i)
            their_turn.release()


def _run_pingpong(tmp_path: Path, rounds: int) -> list[Path]:
    ctx = multiprocessing.get_context("spawn")
    turn_a, turn_b = ctx.Semaphore(1), ctx.Semaphore(0)
    paths = [tmp_path / "client-0.jsonl", tmp_path / "client-1.jsonl"]
    workers = [
        ctx.Process(target=_pingpong_writer, args=(str(paths[0]), 0, turn_a, turn_b, rounds)),
        ctx.Process(target=_pingpong_writer, args=(str(paths[1]), 1, turn_b, turn_a, rounds)),
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0]
    return paths


def test_recorders_in_two_os_processes_merge_in_causal_order(tmp_path: Path) -> None:
    rounds = 50
    paths = _run_pingpong(tmp_path, rounds)
    headers = [read_process_file(p)[0] for p in paths]
    assert all(h is not None for h in headers)
    pids = {h["meta"]["pid"] for h in headers if h is not None}
    assert len(pids) == 2 and os.getpid() not in pids

    summary = merge_histories(paths, tmp_path / "history.jsonl")
    assert summary.ops == 4 * rounds
    merged = load_history(tmp_path / "history.jsonl")
    # Process 1 only ever records after process 0 released it and vice versa, so monotonic time
    # across processes must reproduce the alternation exactly.
    expected = [(p, t, i) for i in range(rounds) for p in (0, 1) for t in ("invoke", "ok")]
    assert [(op["process"], op["type"], op["value"]) for op in merged] == expected
    assert check_pairing(merged) == {}
