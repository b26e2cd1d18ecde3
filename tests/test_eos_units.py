"""The eos workload's cluster-free parts: metadata decoding, configs, table parsing, summary."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.errors import HarnessError
from history.eos_records import (
    SEED_PATTERN,
    decode_headers,
    input_of,
    is_seed_value,
    poison_value,
    seed_value,
    source_position,
    transform,
)
from workloads.clientinfo import parse_group_metadata
from workloads.eos.config import EosOptions, Hook, ProcessorConfig
from workloads.eos.driver import drain_tally, run_stats, tally_line
from workloads.finalreads import find_hanging, max_timeout_minutes, parse_table


def _cgmd(generation: int, group: str, member: str, instance: str | None) -> bytes:
    out = b"CGMDv2:" + struct.pack("=i", generation) + group.encode() + b"\0"
    out += member.encode() + b"\0"
    out += b"\1" if instance is None else b"\0" + instance.encode() + b"\0"
    return out


def test_group_metadata_round_trip() -> None:
    meta = parse_group_metadata(_cgmd(7, "g", "m-1", None))
    assert meta == {"generation": 7, "group_id": "g", "member_id": "m-1", "group_instance_id": None}
    assert parse_group_metadata(_cgmd(-1, "g", "", "i-3"))["group_instance_id"] == "i-3"


def test_group_metadata_from_the_real_client() -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "grp", "log_level": 0})
    try:
        meta = parse_group_metadata(consumer.consumer_group_metadata())
    finally:
        consumer.close()
    assert meta["generation"] == -1 and meta["group_id"] == "grp"


@pytest.mark.parametrize("blob", [b"", b"nope", b"CGMDv2:\x01", b"CGMDv2:\x01\x00\x00\x00g"])
def test_group_metadata_garbage_is_empty(blob: bytes) -> None:
    assert parse_group_metadata(blob) == {}


def test_transform_is_invertible() -> None:
    assert input_of(transform("v000123")) == "v000123"
    # Kafka's Java copier copies values unchanged: a bare seed value maps to itself, a poison
    # value (written only in aborted transactions) never maps to an input.
    assert input_of("v000123") == "v000123"
    assert input_of("x000123") is None
    assert input_of("out-") == ""


@given(st.text(max_size=9) | st.integers(0, 10**7).map(lambda i: f"v{i:06d}"))
def test_seed_shape_is_one_rule_in_python_and_in_the_spark_pattern(value: str) -> None:
    """The Spark engine matches seeds with SEED_PATTERN, the reference with is_seed_value."""
    assert is_seed_value(value) == (re.fullmatch(SEED_PATTERN.strip("^$"), value) is not None)


def test_seed_and_poison_values_are_told_apart() -> None:
    assert [seed_value(7), poison_value(7)] == ["v000007", "x000007"]
    assert input_of(seed_value(7)) == seed_value(7)
    assert input_of(poison_value(7)) is None
    assert input_of(transform(poison_value(7))) == poison_value(7)  # caught as poison later


def test_source_position_needs_both_headers() -> None:
    assert source_position({"src-partition": "2", "src-offset": "17"}) == (2, 17)
    assert source_position({"src-partition": "2"}) is None
    assert source_position({"src-partition": "2", "src-offset": "x"}) is None
    assert source_position({}) is None  # the Java copier writes no headers


def test_headers_are_stored_as_text() -> None:
    raw = [("src-partition", b"3"), ("member-id", None), ("bad", b"\xff")]
    assert decode_headers(raw) == {"src-partition": "3", "member-id": None, "bad": "\ufffd"}
    assert decode_headers(None) == {}


def test_processor_config_json_round_trip() -> None:
    cfg = EosOptions(name_suffix="-x").processor_config(4, 1, "b:1", "/tmp/4.jsonl")
    cfg.hook = Hook(at="after-flush", txn=2, action="stop")
    back = ProcessorConfig.from_json(cfg.to_json())
    assert back == cfg
    assert back.transactional_id == "eos-x-p4"
    cfg.txn_id_strategy = "static"
    assert cfg.transactional_id == "eos-x-slot-1"
    cfg.variant = "at-least-once"
    assert cfg.transactional_id is None


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"instance": 1}', '{"bogus": 1}'],
)
def test_processor_config_rejects_bad_input(text: str) -> None:
    with pytest.raises(HarnessError):
        ProcessorConfig.from_json(text)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"variant": "nope"},
        {"processors": 0},
        {"values": 0},
        {"abort_probability": 2.0},
        {"txn_id_strategy": "random"},
        {"hooks": {5: Hook(at="after-flush")}},
        {"hooks": {0: Hook(at="somewhere")}},
    ],
)
def test_options_validation_is_one_line(kwargs: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(HarnessError) as info:
        EosOptions(**kwargs).validate()
    assert "\n" not in str(info.value)


def test_find_hanging_looks_at_transactions_older_than_the_run_timeout() -> None:
    """The tool's default (15 minutes) is longer than most runs: it would never agree with a
    stuck LSO. The run's timeout, rounded up to whole minutes, is the least that is sound."""
    assert max_timeout_minutes(10_000) == 1
    assert max_timeout_minutes(60_000) == 1
    assert max_timeout_minutes(60_001) == 2
    assert max_timeout_minutes(None) == 15

    class Tools:
        internal_bootstrap = "b:9092"
        args: tuple[str, ...] = ()

        def run_tool(self, *args: str) -> str:
            Tools.args = args
            return "Topic\tPartition\t\n"

    assert find_hanging(Tools(), 2, max_timeout_minutes(10_000)) == []  # type: ignore[arg-type]
    assert Tools.args[-4:] == ("--broker-id", "2", "--max-transaction-timeout", "1")


def test_parse_find_hanging_table() -> None:
    text = (
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
        "LastTimestamp\tDuration(min)\t\n"
        "out   \t3        \t1001      \t0            \t1               \t17         \t"
        "1700000000000\t16          \t\n"
    )
    rows = parse_table(text)
    assert rows == [
        {
            "Topic": "out",
            "Partition": "3",
            "ProducerId": "1001",
            "ProducerEpoch": "0",
            "CoordinatorEpoch": "1",
            "StartOffset": "17",
            "LastTimestamp": "1700000000000",
            "Duration(min)": "16",
        }
    ]
    assert parse_table(text.splitlines()[0] + "\n") == []
    assert parse_table("") == []


def _op(process, f, type_, value, time=0):  # type: ignore[no-untyped-def]
    return {"process": process, "f": f, "type": type_, "value": value, "time": time}


def _read(records):  # type: ignore[no-untyped-def]
    return _op(
        "final",
        "read",
        "ok",
        {"topic": "o", "partition": 0, "isolation": "read_committed", "records": records},
    )


def _rec(offset, value, src_p, src_o):  # type: ignore[no-untyped-def]
    headers = {"src-partition": str(src_p), "src-offset": str(src_o)}
    return [offset, None, transform(value), headers]


def test_summary_counts_duplicates_missing_and_unexpected() -> None:
    ops = [
        _op("seeder", "send", "ok", {"values": [["v0", 0, 0], ["v1", 0, 1], ["v2", 0, 2]]}),
        _read([_rec(0, "v0", 0, 0), _rec(1, "v0", 0, 0), _rec(2, "v1", 0, 1)]),
        _read([_rec(0, "x9", 0, 5)]),
    ]
    s = drain_tally(ops)
    assert s["seeded"] == 3 and s["committed_outputs"] == 4
    assert s["distinct_inputs"] == 2 and s["duplicates"] == 1
    assert s["missing"] == 1 and s["unexpected"] == 1
    assert s["complete_read"]
    # Counts only: no verdict words of its own, whatever the counts say.
    assert "exactly_once" not in s and "exactly-once" not in tally_line(s)
    assert tally_line(s) == (
        "final drain: 3 seeded, 4 committed outputs (2 distinct inputs), 1 duplicated, "
        "1 missing, 1 unexpected"
    )
    good = drain_tally([ops[0], _read([_rec(i, f"v{i}", 0, i) for i in range(3)])])
    assert (good["duplicates"], good["missing"], good["unexpected"]) == (0, 0, 0)


def test_run_stats_rates() -> None:
    ops = [
        _op(0, "txn", "invoke", {}, time=0),
        _op(0, "txn", "ok", {"outputs": [1, 2, 3]}, time=1_000_000_000),
        _op(1, "txn", "invoke", {}, time=1_000_000_000),
        _op(1, "txn", "fail", {"outputs": [1]}, time=2_000_000_000),
    ]
    stats = run_stats(ops)
    assert stats["txns_committed"] == 1 and stats["txns_not_committed"] == 1
    assert stats["records_per_s"] == 1.5 and stats["span_s"] == 2.0


def test_processor_signals_pause_resume_kill(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The nemesis-facing controls, on a stand-in process (no cluster needed)."""
    import subprocess
    import sys
    import types

    from common.procfs import process_state
    from workloads.eos.supervisor import EosWorkload
    from workloads.processes import Child

    cluster = types.SimpleNamespace(dir=tmp_path)
    workload = EosWorkload(EosOptions(), cluster, tmp_path)  # type: ignore[arg-type]
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    log = open(tmp_path / "p.log", "ab")  # noqa: SIM115
    workload._children[5] = Child(5, 0, proc, log, 0.0)
    workload._slots[0] = 5
    try:
        assert set(workload.processors()) == {5}
        workload.pause_processor(5)
        assert process_state(proc.pid) == "T" and workload.paused() == [5]
        workload.resume_processor(5)
        assert workload.paused() == []
        workload.kill_processor(5)
        assert proc.wait(timeout=10) == -9
        assert workload.processors() == {}
        with pytest.raises(HarnessError):
            workload.kill_processor(5)
        with pytest.raises(HarnessError):
            workload.pause_processor(99)
    finally:
        if proc.poll() is None:
            proc.kill()
        workload.close()
    assert workload._children[5].reaped


def test_final_reads_wait_for_open_transactions_to_end(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The final read_committed reads wait until no transaction holds an LSO (a killed
    processor's open transaction until its timeout abort), and say so when one outlives
    the bound."""
    from history import Recorder, read_process_file
    from workloads import finalreads

    answers = iter(
        [
            [{"partition": 0, "low": 0, "lso": 5, "hwm": 9}, {"partition": 1, "lso": 3, "hwm": 3}],
            [{"partition": 0, "low": 0, "lso": 9, "hwm": 9}, {"partition": 1, "lso": 3, "hwm": 3}],
        ]
    )
    monkeypatch.setattr(finalreads, "_in_child", lambda call, *a, **k: next(answers))
    with Recorder(tmp_path / "final.jsonl", "final") as rec:
        assert finalreads.record_settle(rec, "b", "out", 2, 10000, poll_s=0.01) is True
    monkeypatch.setattr(finalreads, "ABORT_SWEEP_S", 0.05)
    stuck = [{"partition": 0, "low": 0, "lso": 5, "hwm": 9}]
    monkeypatch.setattr(finalreads, "_in_child", lambda call, *a, **k: stuck)
    with Recorder(tmp_path / "stuck.jsonl", "final") as rec:
        assert finalreads.record_settle(rec, "b", "out", 1, 0, poll_s=0.01) is False
    _h, ops, _w = read_process_file(tmp_path / "final.jsonl")
    assert [(o["f"], o["type"]) for o in ops] == [("settle", "invoke"), ("settle", "ok")]
    assert ops[1]["value"]["open"] == []
    _h, ops, _w = read_process_file(tmp_path / "stuck.jsonl")
    assert ops[-1]["type"] == "info" and ops[-1]["value"]["open"] == [0]
    assert ops[-1]["error"]["code"] == "TIMED_OUT"
