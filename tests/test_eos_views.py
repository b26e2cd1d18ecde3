"""Tests for checkers/eos/views.py: the views the eos checks read, joined with Arrow.

Each drained record must be mapped back to its input the way the Python reference maps it
(:func:`checkers.eos.pyref_parse.resolve_record`): by its source headers when it has both, by
its value otherwise; and to its writer transaction by its headers. The small facts (committed
offsets, fences, the drain op) follow the history's order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from checkers.eos.extract import EosTables
from checkers.eos.views import write_views


def _views(tmp_path: Path, ops: list[tuple[Any, str, str, dict[str, Any]]]) -> tuple[dict, dict]:
    t = EosTables()
    for i, (process, f, type_, value) in enumerate(ops):
        assert t.wants(process, type(process) is int, type_, f)
        t.add(
            i, 10 * i, "2024-05-01T12:00:00.000001Z", process, type_, f, json.dumps(value).encode()
        )
    t.write(tmp_path / "eos", 0, every=True)
    info = write_views(tmp_path / "eos", tmp_path / "views")
    names = ("drain", "txns", "committed", "fences", "poison")
    return {n: pq.read_table(tmp_path / "views" / n).to_pylist() for n in names}, info


def _hdr(p: Any, o: Any, instance: int, seq: int) -> dict[str, Any]:
    return {"src-partition": p, "src-offset": o, "instance": str(instance), "txn-seq": str(seq)}


def test_records_find_their_inputs_and_writers(tmp_path: Path) -> None:
    records = [
        [0, "k", "out-v000001", _hdr("0", "5", 3, 1)],  # by position: the seed's value wins
        [1, "k", "v000002", {}],  # the Java copier: no headers, found by value
        [2, "k", "out-v000009", _hdr("0", "x", 3, 1)],  # a header not an integer: by value
        [3, "k", "zzz", None],  # neither: identity by its (missing) input value
        [4, "k", "out-v000001", _hdr("0", "5", 4, 9)],  # a writer with no transaction
    ]
    ops = [
        ("seeder", "send", "ok", {"values": [["v000001", 0, 5], ["v000002", 1, 6]]}),
        (3, "txn", "invoke", {"txn": 1, "generation": 2, "inputs": [[0, 5, "v000001"]]}),
        (3, "txn", "ok", {"txn": 1, "offsets": [[0, 6]]}),
        ("final", "read", "ok", {"topic": "out", "partition": 0,
                                 "isolation": "read_committed", "records": records}),
    ]  # fmt: skip
    v, info = _views(tmp_path, ops)
    drain = {r["offset"]: r for r in v["drain"]}
    got = {o: (r["src_p"], r["src_o"], r["in_value"], r["ident"]) for o, r in drain.items()}
    assert got == {
        0: (0, 5, "v000001", "0/5"),
        1: (1, 6, "v000002", "1/6"),
        2: (None, None, "v000009", "v:v000009"),
        3: (None, None, None, "v:None"),
        4: (0, 5, "v000001", "0/5"),
    }
    assert (drain[0]["inv_index"], drain[0]["done_index"], drain[0]["instance"]) == (1, 2, 3)
    assert drain[4]["inv_index"] is None and drain[4]["txn_seq"] == 9
    assert drain[0]["headers"] == list(_hdr("0", "5", 3, 1).items())
    assert v["txns"][0]["inputs"] == [["0", "5", "v000001"]]
    assert v["txns"][0]["txn_offsets"] == [[0, 6]]
    assert info["reads"] == [[0, True]] and info["output_topic"] == "out"


def test_small_facts_follow_the_history(tmp_path: Path) -> None:
    ops = [
        (1, "start", "ok", {"transactional_id": "t1"}),
        ("nemesis", "start", "ok", {"transactional_id": "t1", "kind": "hijack"}),
        (2, "start", "ok", {"transactional_id": "t1"}),
        ("seeder", "send-aborted", "invoke", {"values": [["x000001"], ["x000001"]]}),
        ("final", "drain", "ok", {"offsets": [[0, 4], [1, 2]]}),
        ("final", "group-offsets", "ok", {"offsets": [["in", 0, 7], ["in", 1, "8"]]}),
        ("final", "group-offsets", "ok", {"offsets": [["in", 0, 9]]}),
    ]
    v, info = _views(tmp_path, ops)
    # Instance 1's id was taken first by the hijack (op 1), instance 2's by no one after it.
    assert v["fences"] == [{"instance": 1, "fence_time": 10, "fence_index": 1}]
    assert v["poison"] == [{"pv": "x000001"}]
    # group-offsets win over the drain's offsets; a later one wins partition by partition.
    assert info["committed_map"] == [[0, 9], [1, 8]]
    assert info["offsets_index"] == 5
    assert info["drain_op"] == {"index": 4, "type": "ok"}
    # No group-offsets: the drain's.
    v, info = _views(tmp_path / "b", ops[:5])
    assert info["committed_map"] == [[0, 4], [1, 2]] and info["offsets_index"] is None
