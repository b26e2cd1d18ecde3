"""The one definition of each anomaly type (checkers.anomalies): complete, used, documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from checkers import anomalies as A
from checkers.eos import results as eos_results
from checkers.logs import rules as log_rules
from checkers.queue.checks import ANOMALY_TYPES as QUEUE_TYPES

DOCS = Path(__file__).resolve().parents[1] / "docs" / "anomalies.md"


def test_each_engine_family_takes_its_names_from_the_definitions() -> None:
    assert eos_results.SAFETY_CHECKS == (
        "lost",
        "duplicate",
        "zombie-write",
        "aborted-read",
        "committed-in-later-transaction",
        "premature-commit",
        "torn-transaction",
        "order",
        "hanging-transaction",
        "started-below-committed",
    )
    every_log_type = log_rules.EPOCH_TYPES + log_rules.DIVERGENCE_TYPES + log_rules.HANGING_TYPES
    assert every_log_type == A.names(A.LOG_EVIDENCE)
    assert {
        "duplicate-marker",
        "unreconciled-replica",
        "open-transaction",
    } == log_rules.ALLOWED_TYPES
    assert A.names(A.QUEUE) == QUEUE_TYPES


def test_names_are_unique_per_checker_and_lookup_finds_each() -> None:
    every = (*A.EOS, A.EOS_PROGRESS, *A.LOG_EVIDENCE, *A.QUEUE, *A.CONNECT, *A.STREAMS)
    keys = [(t.checker, t.name) for t in every]
    assert len(keys) == len(set(keys))
    for t in every:
        assert A.lookup(t.checker, t.name) is t
        assert A.describe(t.name, t.checker) == t.summary and t.summary
        assert t.counts
    assert A.lookup("hanging_in_log", "lost") is None
    assert A.describe("no-such-type") == ""


def test_a_name_two_checkers_share_is_told_apart_by_checker() -> None:
    eos = A.lookup("hanging-transaction", "hanging-transaction")
    log = A.lookup("hanging_in_log", "hanging-transaction")
    assert eos is not None and log is not None and eos.summary != log.summary
    assert A.describe("hanging-transaction") == eos.summary  # eos first without a checker


def test_an_example_outside_its_shape_is_refused() -> None:
    ok = A.LOST.make(ops=[], committed_offset=3, input=[0, 1], values=["v000001"])
    assert list(ok) == ["values", "input", "committed_offset", "ops"]  # declared order
    with pytest.raises(ValueError, match="missing"):
        A.LOST.make(values=[], input=[0, 1], ops=[])
    with pytest.raises(ValueError, match="unexpected"):
        A.ZOMBIE_WRITE.make(values=[], reason="fenced", records=[], ops=[], fence_op={})
    with pytest.raises(ValueError, match="kind"):
        A.TORN_TRANSACTION.make(
            values=[], kind="half", txn=[0, 1], expected=2, present=1, missing=[], ops=[]
        )


def test_a_fenced_zombie_shows_its_fence_among_the_ops() -> None:
    rec = {"topic": "out", "partition": 0, "offset": 5, "key": "k", "value": "out-v1"}
    rec |= {"headers": {}, "instance": 1}
    ex, idx = eos_results.zombie_write("v1", rec, [10, 11], fence_index=4)
    assert ex["reason"] == "fenced" and "newer" not in ex and idx == [10, 11, 4]
    ops = {i: {"index": i} for i in idx}
    res = eos_results.check_result("zombie-write", 1, [(ex, idx)], lambda want: ops)
    assert [o["index"] for o in res["examples"][0]["ops"]] == [4, 10, 11]
    with pytest.raises(ValueError):
        eos_results.zombie_write("v1", rec, [10])  # neither fenced nor overtaken


def test_torn_transaction_example_is_computed_from_inputs_and_outputs() -> None:
    inputs = [("1", "7", "v7"), ("0", "3", "v3"), ("1", "7", "v7")]
    ex, _ = eos_results.torn_transaction((2, 5), "partial", inputs, {"1/7"}, [])
    assert ex["values"] == ["v3", "v7"] and ex["missing"] == ["0/3"]
    assert (ex["expected"], ex["present"], ex["txn"]) == (2, 1, [2, 5])


def test_every_type_is_documented_in_its_section() -> None:
    text = DOCS.read_text()
    sections = {
        "eos": text[text.index("## eos workload") : text.index("## streams workload")],
        "streams": text[text.index("## streams workload") :],
        "log": text[text.index("## Broker log evidence") : text.index("## eos workload")],
        "queue": text[text.index("## queue workload") : text.index("## Broker log evidence")],
    }
    for family, types in (
        ("eos", (*A.EOS, A.EOS_PROGRESS)),
        ("log", A.LOG_EVIDENCE),
        ("queue", A.QUEUE),
        ("streams", A.STREAMS),
    ):
        for t in types:
            assert re.search(rf"`{re.escape(t.name)}`", sections[family]), (family, t.name)
    assert "checkers/anomalies.py" in text


def test_found_reads_every_result_shape() -> None:
    queue = {"checker": "queue", "valid": False, "anomalies": {"G1c": 2, "unseen": 0}}
    assert A.found(queue) == [("queue", "G1c", 2)]
    run = {
        "checkers": {
            "epoch_violation": {"valid": True, "anomalies": {"duplicate-marker": 1}},
            "lost": {"valid": False, "count": 3, "examples": []},
            "order": {"valid": True, "count": 0, "examples": []},
            "order-unknown": {"valid": "unknown", "count": 0, "examples": [], "error": "x"},
        }
    }
    assert A.found(run) == [("epoch_violation", "duplicate-marker", 1), ("lost", "lost", 3)]
    for checker, name, _n in A.found(run):
        assert A.describe(name, checker)


def test_counts_of_reads_one_checker_as_found_does() -> None:
    """The report's table and the summary table count one checker's result the same way."""
    from checkers.anomalies import counts_of

    queue = {"checker": "queue", "valid": True, "anomalies": {"int-send-skip": 5, "lost": 0}}
    assert counts_of("queue", queue) == {"int-send-skip": 5}
    assert counts_of("duplicate", {"valid": False, "count": 3}) == {"duplicate": 3}
    assert counts_of("duplicate", {"valid": True, "count": 0}) == {}
