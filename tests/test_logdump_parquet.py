"""The log dump's conversion without Spark: the same frame as Spark's reader, or none at all.

:mod:`checkers.logdump_parquet` converts a dump whose records are all well typed; anything else
must go to Spark's reader as before (same values, same one-line errors). These tests load the
same dumps both ways (the Spark way forced by making the Arrow way decline) and compare.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers import load as L
from checkers import logdump_parquet as LP
from history.logdump import CheckerInputError
from history.synthetic_logdump import generate


def _rows(loaded: L.Loaded) -> list[tuple[Any, ...]]:
    """The records in file order, every column but ``_row`` (whose values differ by design)."""
    df = loaded.df.orderBy("_row")
    cols = [c for c in df.columns if c != "_row"]
    return [tuple(r[c] for c in cols) for r in df.select(*cols).collect()]


def _both(spark: object, run: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[L.Loaded, L.Loaded]:
    fast = L.load_logdump(spark, run, cache=False)  # type: ignore[arg-type]
    with monkeypatch.context() as m:
        m.setattr(LP, "convert", lambda *a, **k: None)
        slow = L.load_logdump(spark, run, cache=False)  # type: ignore[arg-type]
    return fast, slow


def _outcome(spark: object, run: Path) -> Any:
    """The records as loaded, or the one-line error."""
    try:
        return _rows(L.load_logdump(spark, run, cache=False))  # type: ignore[arg-type]
    except CheckerInputError as e:
        return str(e)


def _dump(tmp_path: Path, records: int = 600) -> tuple[Path, int]:
    """A synthetic run with a dump of about ``records`` records; the run and its count."""
    run = tmp_path / "run"
    (run / "evidence").mkdir(parents=True)
    return run, generate(run / "evidence" / "logdump.jsonl", records, partitions=3)


def _append(run: Path, text: str) -> None:
    with open(run / "evidence" / "logdump.jsonl", "a") as fh:
        fh.write(text)


def test_a_well_typed_dump_converts_to_the_frame_spark_reads(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, n = _dump(tmp_path)
    record = {
        "node": 2,
        "kind": "txnlog",
        "topic": "__transaction_state",
        "partition": 7,
        "offset": 2**40,
        "producerId": -1,
        "producerEpoch": -1,
        "isTransactional": False,
        "isControl": False,
        "header_keys": ["a", None, "é"],
        "key": "transaction_id=x",
        "payload": 'state={"a": 1}',
        "nodes": None,
        "logdump_format": None,
        "unknown_field": [1, {"x": 2}],
    }
    _append(run, json.dumps(record) + "\n")
    out = tmp_path / "direct"
    assert LP.convert(run / "evidence" / "logdump.jsonl", out, torn_expected=False) == n + 1
    fast, slow = _both(spark, run, monkeypatch)
    assert fast.rows == slow.rows == n + 1
    assert fast.df.schema == slow.df.schema
    assert _rows(fast) == _rows(slow)


def test_big_dumps_are_converted_in_chunks_by_workers(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, n = _dump(tmp_path, 3000)
    monkeypatch.setattr(LP, "CHUNK_BYTES", 64 << 10)
    monkeypatch.setattr(LP, "INLINE_BYTES", 0)
    out = tmp_path / "direct"
    assert LP.convert(run / "evidence" / "logdump.jsonl", out, torn_expected=False) == n
    assert len(list(out.glob("part-*.parquet"))) > 4
    fast, slow = _both(spark, run, monkeypatch)
    assert _rows(fast) == _rows(slow)


@pytest.mark.parametrize(
    "line",
    [
        '{"node":1,"kind":"data","topic":5,"partition":0,"offset":9,"producerId":1,'
        '"producerEpoch":0,"isTransactional":false,"isControl":false}',  # a number as the topic
        '{"node":1,"kind":"data","topic":"t","partition":0,"offset":9,"producerId":1,'
        '"producerEpoch":0,"isTransactional":false,"isControl":false,"payload":{"a":[1]}}',
        '{"node":1,"kind":"data","topic":"t","partition":0,"offset":9,"producerId":1,'
        '"producerEpoch":0,"isTransactional":false,"isControl":false,"count":"3"}',  # an error
    ],
)
def test_an_oddly_typed_record_is_left_to_spark(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    run, _ = _dump(tmp_path)
    _append(run, line + "\n")
    assert (
        LP.convert(run / "evidence" / "logdump.jsonl", tmp_path / "x", torn_expected=False) is None
    )
    fast = _outcome(spark, run)
    monkeypatch.setattr(LP, "convert", lambda *a, **k: None)
    assert fast == _outcome(spark, run)


def test_a_torn_last_line_is_skipped_with_the_same_note(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, n = _dump(tmp_path)
    _append(run, '{"node":1,"kind":"da')
    out = tmp_path / "direct"
    assert LP.convert(run / "evidence" / "logdump.jsonl", out, torn_expected=True) == n
    fast, slow = _both(spark, run, monkeypatch)
    assert fast.rows == slow.rows == n
    assert fast.notes == slow.notes and "torn last line" in fast.notes[0]
    assert _rows(fast) == _rows(slow)


@pytest.mark.parametrize(
    ("bad", "expect"),
    [
        ("not json\n", r"logdump.jsonl:\d+: not valid JSON"),
        ('{"node": 1}\n', r"logdump.jsonl:\d+: bad record \(partition must be an integer"),
        ('{"logdump_format": 1, "nodes": 3}\n', r"logdump.jsonl:\d+: bad record"),
        ("\n", None),  # a blank line: Spark's reader skips it, and so does the reference
    ],
)
def test_bad_lines_get_the_one_line_errors_of_before(
    spark: object, tmp_path: Path, bad: str, expect: str | None
) -> None:
    run, n = _dump(tmp_path)
    _append(run, bad)
    _append(run, (run / "evidence" / "logdump.jsonl").read_text().splitlines()[1] + "\n")
    assert (
        LP.convert(run / "evidence" / "logdump.jsonl", tmp_path / "x", torn_expected=False) is None
    )
    if expect is None:
        assert L.load_logdump(spark, run, cache=False).rows == n + 1  # type: ignore[arg-type]
        return
    with pytest.raises(CheckerInputError, match=expect):
        L.load_logdump(spark, run, cache=False)  # type: ignore[arg-type]


def test_a_scratch_dir_outside_a_run_is_removed_when_the_process_ends(tmp_path: Path) -> None:
    """A log dump converted without a cache (a read-only run) is read from a scratch dir in
    the temp dir for as long as the process lives; it must not outlive the process."""
    import subprocess
    import sys

    code = "from checkers.load import _scratch; d = _scratch(None, 'logdump'); print(d)"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    made = Path(proc.stdout.strip())
    assert made.name.startswith("kh-logdump-")
    assert not made.exists()
