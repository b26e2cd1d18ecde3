"""Tests for checkers/eos/extract.py: the typed fast path must give the general path's rows.

The general path reads an op's value the way Spark's ``from_json`` reads it into the eos
schemas (a field of the wrong type is null, a number in a string field is its text); the
typed path decodes the common shapes straight into structs and must never disagree, whatever
the value holds: it either gives the same rows or gives way to the general path.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.arrow_rows import rows_table
from checkers.eos.extract import SCHEMAS, EosTables

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**65), 2**65)
    | st.integers(-5, 5)
    | st.sampled_from(["7", " 12 ", "x", "read_committed", ""])
    | st.floats(allow_nan=False, allow_infinity=False)
)
anything = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner)
)
position = st.integers(0, 2**40) | scalars
headers = st.none() | st.dictionaries(st.sampled_from(["a", "b", "src-offset"]), scalars)
record = st.tuples(position, scalars, scalars, headers).map(list) | anything
values = {
    ("txn", "invoke"): st.fixed_dictionaries(
        {},
        optional={
            "txn": position,
            "generation": position,
            "inputs": st.lists(st.lists(position | scalars, max_size=4) | anything, max_size=4),
        },
    ),
    ("txn", "ok"): st.fixed_dictionaries(
        {}, optional={"txn": position, "offsets": st.lists(st.lists(position, max_size=3))}
    ),
    ("send", "ok"): st.fixed_dictionaries(
        {},
        optional={
            "values": st.lists(
                st.tuples(scalars, position, position).map(list) | anything, max_size=4
            )
        },
    ),
    ("read", "ok"): st.fixed_dictionaries(
        {"isolation": st.sampled_from(["read_committed", "read_uncommitted"]) | scalars},
        optional={
            "topic": st.sampled_from(["out"]) | scalars,
            "partition": position,
            "records": st.lists(record, max_size=4) | scalars,
        },
    ),
}
PROCESS = {"txn": 3, "send": "seeder", "read": "final"}


def tables(ops: list[tuple[str, str, bytes]], *, typed: bool) -> dict[str, list[dict[str, Any]]]:
    t = EosTables()
    if not typed:
        t._typed = lambda *a: False  # type: ignore[method-assign]
    for i, (f, type_, value) in enumerate(ops):
        process = PROCESS[f]
        assert t.wants(process, type(process) is int, type_, f)
        t.add(i, 10 * i, "2024-05-01T12:00:00.000001Z", process, type_, f, value)
    return {name: rows_table(t.rows[name], SCHEMAS[name]).to_pylist() for name in SCHEMAS}


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), kinds=st.lists(st.sampled_from(sorted(values)), min_size=1, max_size=6))
def test_typed_rows_equal_the_general_rows(data: st.DataObject, kinds: list[Any]) -> None:
    ops = []
    for f, type_ in kinds:
        v = data.draw(values[(f, type_)] | anything)
        ops.append((f, type_ if f != "txn" else data.draw(st.sampled_from([type_, "fail"])), v))
    raw = [(f, t, json.dumps(v).encode()) for f, t, v in ops]
    assert tables(raw, typed=True) == tables(raw, typed=False)


def test_the_common_shapes_take_the_typed_path() -> None:
    """The shapes the workloads record are decoded typed (else the fast path is dead code)."""
    t = EosTables()
    ops = [
        ("txn", "invoke", {"txn": 1, "generation": 2, "inputs": [[0, 5, "v1"], [1, 6, "v2"]]}),
        ("txn", "ok", {"txn": 1, "offsets": [[0, 6], [1, 7]]}),
        ("send", "ok", {"values": [["v1", 0, 5], ["v2", 1, None]]}),
        ("read", "ok", {"topic": "out", "partition": 0, "isolation": "read_committed",
                        "records": [[0, "v1", "out-v1", {"src-offset": "5"}]]}),
        ("read", "ok", {"topic": "out", "partition": 0, "isolation": "read_uncommitted",
                        "records": [[0, "v1", "out-v1", {}]]}),
    ]  # fmt: skip
    for i, (f, type_, v) in enumerate(ops):
        process = PROCESS[f]
        assert t._typed(i, i, "w", process, type_, f, json.dumps(v).encode()), (f, type_)
    assert [len(t.rows[n]) for n in ("txn_inv", "txn_done", "seeds", "reads", "records")] == [
        1,
        1,
        1,
        1,
        1,
    ]
    assert t.rows["txn_inv"][0][5] == [["0", "5", "v1"], ["1", "6", "v2"]]
