"""Tests for the ``queue`` checker (``checkers.queue.checks``) and its CLI.

Why these tests: the checker's verdict decides whether a Kafka run is reported as broken, so
each anomaly needs a minimal history that triggers it, allowed anomalies must not flip the
verdict, clean histories of any shape must pass (property test), and known corruptions of a
clean history must be caught (mutation tests). Fixtures in ``tests/data/queue`` re-express the
cases of Jepsen's ``kafka_test.clj`` with the verdict Jepsen's checker gives.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from checkers.queue.checks import (
    ANOMALY_TYPES,
    HistoryInputError,
    allowed_anomaly_types,
    check_queue,
    load_queue_history,
)
from checkers.queue.cycles import strongly_connected_components

DATA = Path(__file__).parent / "data" / "queue"
EXPECTED: dict[str, dict[str, Any]] = json.loads((DATA / "expected.json").read_text())

Op = dict[str, Any]


# --------------------------------------------------------------------------------------------
# History builders


class H:
    """Tiny history builder: each call appends an invoke/completion pair."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def _pair(self, p: Any, f: str, typ: str, inv: Any, done: Any) -> Op:
        i = len(self.ops)
        self.ops.append(
            {"index": i, "time": i, "process": p, "type": "invoke", "f": f, "value": inv}
        )
        op = {"index": i + 1, "time": i + 1, "process": p, "type": typ, "f": f, "value": done}
        self.ops.append(op)
        return op

    def send(self, p: Any, *sends: tuple[Any, int | None, Any], typ: str = "ok") -> Op:
        """``sends`` are (key, offset, value); offset None means unknown."""
        inv = [["send", k, v] for k, _, v in sends]
        done = [["send", k, [o, v]] for k, o, v in sends]
        return self._pair(p, "send", typ, inv, done)

    def poll(self, p: Any, *results: dict[Any, list[list[Any]]], typ: str = "ok") -> Op:
        """Each positional arg is one poll micro-op result ``{k: [[offset, v], ...]}``."""
        return self._pair(
            p, "poll", typ, [["poll"] for _ in results], [["poll", r] for r in results]
        )

    def txn(self, p: Any, mops: list[list[Any]], typ: str = "ok") -> Op:
        inv = [["poll"] if m[0] == "poll" else ["send", m[1], m[2][1]] for m in mops]
        return self._pair(p, "txn", typ, inv, mops)

    def sub(self, p: Any, f: str, keys: list[Any], typ: str = "ok") -> Op:
        return self._pair(p, f, typ, keys, keys)


def check(ops: list[Op], **kw: Any) -> dict[str, Any]:
    r = check_queue(ops, **kw)
    json.dumps(r)  # results must always be JSON-serializable
    return r


def clean_base() -> H:
    """x: a@0 b@1 c@2 sent by one producer, fully read by consumer 9."""
    h = H()
    h.send(1, ("x", 0, "a"))
    h.send(1, ("x", 1, "b"))
    h.send(1, ("x", 2, "c"))
    return h


# --------------------------------------------------------------------------------------------
# Basics


def test_minimal_clean_history_passes() -> None:
    h = clean_base()
    h.sub(9, "assign", ["x"])
    h.poll(9, {"x": [[0, "a"], [1, "b"]]})
    h.poll(9, {"x": [[2, "c"]]})
    r = check(h.ops)
    assert r["valid"] is True
    assert r["anomalies"] == {}
    assert r["bad_anomaly_types"] == []
    assert r["stats"]["graph"]["wr_edges"] == 3
    assert set(r) >= {
        "valid",
        "anomalies",
        "anomaly_types",
        "bad_anomaly_types",
        "examples",
        "stats",
    }


def test_integer_and_string_keys_are_the_same_partition() -> None:
    h = H()
    h.send(1, (3, 0, "a"), (3, 1, "b"))
    h.poll(2, {"3": [[0, "a"], [1, "b"]]})
    assert check(h.ops)["valid"] is True


def test_allowed_sets_follow_jepsen() -> None:
    assert allowed_anomaly_types() == {"int-send-skip", "G0"}
    assert allowed_anomaly_types(sub_via="subscribe") == {
        "int-send-skip",
        "G0",
        "poll-skip",
        "nonmonotonic-poll",
    }
    assert allowed_anomaly_types(ww_deps=True) == {"int-send-skip", "G0", "G1c"}
    assert set(allowed_anomaly_types(ww_deps=True, sub_via="subscribe")) <= set(ANOMALY_TYPES)


@pytest.mark.parametrize(
    "ops",
    [
        [],
        [
            {"type": "invoke", "f": "assign", "process": 0, "value": ["x"]},
            {"type": "ok", "f": "assign", "process": 0, "value": ["x"]},
        ],
    ],
)
def test_empty_history_is_invalid(ops: list[Op]) -> None:
    r = check(ops)
    assert r["valid"] is False
    assert r["anomalies"] == {"empty-transaction-graph": 1}


def test_polls_that_never_see_a_send_are_an_empty_graph() -> None:
    h = H()
    h.poll(0, {})
    h.poll(0, {"x": []})
    r = check(h.ops)
    assert r["valid"] is False
    assert "empty-transaction-graph" in r["bad_anomaly_types"]


def test_bad_options_rejected() -> None:
    with pytest.raises(ValueError):
        check_queue([], sub_via="both")
    with pytest.raises(ValueError):
        check_queue([], max_examples=-1)


def test_max_examples_caps_examples_not_counts() -> None:
    h = H()
    for i in range(5):
        h.send(1, ("x", i, i))
    r = check(h.ops, max_examples=2)
    assert r["anomalies"]["unseen"] == 5
    assert len(r["examples"]["unseen"]) == 2


# --------------------------------------------------------------------------------------------
# One hand-built history per anomaly type


def test_duplicate() -> None:
    h = clean_base()
    h.poll(9, {"x": [[0, "a"], [1, "b"], [2, "c"], [3, "a"]]})
    r = check(h.ops)
    assert r["anomalies"]["duplicate"] == 1
    ex = r["examples"]["duplicate"][0]
    assert (ex["key"], ex["value"], ex["offsets"]) == ("x", "a", [0, 3])
    assert {s["offset"] for s in ex["sources"]} == {0, 3}
    assert not r["valid"]


def test_inconsistent_offsets() -> None:
    h = clean_base()
    h.poll(9, {"x": [[0, "a"], [1, "z"], [2, "c"]]})
    h.send(2, ("x", 3, "z"))
    h.poll(8, {"x": [[0, "a"], [1, "b"], [2, "c"], [3, "z"]]})
    r = check(h.ops)
    assert r["anomalies"]["inconsistent-offsets"] == 1
    ex = r["examples"]["inconsistent-offsets"][0]
    assert ex["offset"] == 1 and set(ex["values"]) == {"b", "z"}
    assert not r["valid"]


def test_lost_write() -> None:
    h = clean_base()
    h.poll(9, {"x": [[0, "a"]]})
    h.poll(8, {"x": [[2, "c"]]})
    r = check(h.ops)
    assert r["anomalies"]["lost-write"] == 1
    ex = r["examples"]["lost-write"][0]
    assert (ex["value"], ex["max_read_value"]) == ("b", "c")
    assert ex["writer"]["value"] == [["send", "x", [1, "b"]]]
    assert ex["max_read"]["process"] == 8
    assert not r["valid"]


def test_unseen_only_judges_the_final_state() -> None:
    h = clean_base()
    h.poll(9, {"x": [[0, "a"], [1, "b"]]})
    r = check(h.ops)
    assert r["anomalies"] == {"unseen": 1}
    assert r["stats"]["unseen_by_key"] == {"x": 1}
    assert not r["valid"]
    # Seen later: fine, even if it was unseen for a while.
    h.poll(9, {"x": [[2, "c"]]})
    assert check(h.ops)["valid"]


def test_g1a_aborted_read() -> None:
    h = clean_base()
    h.send(2, ("x", None, "f"), typ="fail")
    h.poll(9, {"x": [[0, "a"], [1, "b"], [2, "c"], [3, "f"]]})
    r = check(h.ops)
    assert r["anomalies"] == {"G1a": 1}
    ex = r["examples"]["G1a"][0]
    assert ex["writer"]["type"] == "fail" and ex["reader"]["process"] == 9
    assert not r["valid"]


def test_precommitted_read() -> None:
    h = clean_base()
    h.txn(5, [["send", "x", [3, "d"]], ["poll", {"x": [[0, "a"], [1, "b"], [2, "c"], [3, "d"]]}]])
    r = check(h.ops)
    assert r["anomalies"] == {"precommitted-read": 1}
    assert r["examples"]["precommitted-read"][0]["value"] == "d"


def test_int_poll_skip_and_rebalance_exemption() -> None:
    h = clean_base()
    op = h.poll(9, {"x": [[0, "a"], [2, "c"]]})
    h.poll(8, {"x": [[0, "a"], [1, "b"], [2, "c"]]})
    r = check(h.ops)
    assert r["anomalies"] == {"int-poll-skip": 1}
    assert r["examples"]["int-poll-skip"][0]["skipped"] == ["b"]
    op["rebalance_log"] = [{"keys": ["x"]}]
    assert check(h.ops)["valid"]


def test_int_nonmonotonic_poll() -> None:
    h = clean_base()
    h.poll(9, {"x": [[0, "a"], [1, "b"], [2, "c"]]}, {"x": [[2, "c"]]})
    r = check(h.ops)
    assert r["anomalies"] == {"int-nonmonotonic-poll": 1}
    assert r["examples"]["int-nonmonotonic-poll"][0]["delta"] == 0


def test_int_nonmonotonic_send() -> None:
    h = H()
    h.send(1, ("x", 1, "a"), ("x", 0, "b"))
    h.poll(9, {"x": [[0, "b"], [1, "a"]]})
    r = check(h.ops)
    assert r["anomalies"] == {"int-nonmonotonic-send": 1}
    assert not r["valid"]


def test_int_send_skip_is_allowed() -> None:
    h = H()
    h.send(1, ("x", 0, "a"), ("x", 2, "c"))
    h.send(2, ("x", 1, "b"))
    h.poll(9, {"x": [[0, "a"], [1, "b"], [2, "c"]]})
    r = check(h.ops)
    assert r["anomalies"] == {"int-send-skip": 1}
    assert r["valid"] is True


def test_nonmonotonic_send() -> None:
    h = H()
    h.send(1, ("x", 1, "b"))
    h.send(1, ("x", 0, "a"))
    h.poll(9, {"x": [[0, "a"], [1, "b"]]})
    r = check(h.ops)
    assert r["anomalies"] == {"nonmonotonic-send": 1}
    assert r["examples"]["nonmonotonic-send"][0]["delta"] == -1


def _poll_skip_history(f: str) -> H:
    h = clean_base()
    h.sub(9, f, ["x"])
    h.poll(9, {"x": [[0, "a"]]})
    h.poll(9, {"x": [[2, "c"]]})
    h.poll(8, {"x": [[0, "a"], [1, "b"], [2, "c"]]})
    return h


@pytest.mark.parametrize("f", ["assign", "subscribe"])
def test_poll_skip_depends_on_sub_via(f: str) -> None:
    ops = _poll_skip_history(f).ops
    under_assign = check(ops, sub_via="assign")
    under_subscribe = check(ops, sub_via="subscribe")
    assert under_assign["anomalies"] == under_subscribe["anomalies"] == {"poll-skip": 1}
    assert under_assign["valid"] is False
    assert under_assign["bad_anomaly_types"] == ["poll-skip"]
    assert under_subscribe["valid"] is True
    ex = under_assign["examples"]["poll-skip"][0]
    assert ex["skipped"] == ["b"] and len(ex["ops"]) == 2


def test_nonmonotonic_poll_depends_on_sub_via() -> None:
    h = clean_base()
    h.poll(9, {"x": [[0, "a"], [1, "b"]]})
    h.poll(9, {"x": [[1, "b"], [2, "c"]]})
    assert check(h.ops)["anomalies"] == {"nonmonotonic-poll": 1}
    assert check(h.ops)["valid"] is False
    assert check(h.ops, sub_via="subscribe")["valid"] is True


def test_reassign_and_crash_reset_consumer_position() -> None:
    h = clean_base()
    h.poll(9, {"x": [[0, "a"], [1, "b"]]})
    h.sub(9, "assign", ["y"])
    h.poll(9, {"x": [[0, "a"], [1, "b"], [2, "c"]]})
    assert check(h.ops)["valid"]
    h2 = clean_base()
    h2.poll(9, {"x": [[0, "a"], [1, "b"]]})
    h2._pair(9, "crash", "info", None, None)
    h2.poll(9, {"x": [[0, "a"], [1, "b"], [2, "c"]]})
    assert check(h2.ops)["valid"]


def test_aborted_poll_must_resume_from_last_commit() -> None:
    h = clean_base()
    h.poll(9, {"x": [[0, "a"]]})
    h.poll(9, {"x": [[1, "b"]]}, typ="fail")
    h.poll(9, {"x": [[1, "b"], [2, "c"]]})
    assert check(h.ops)["valid"]
    h.poll(8, {"x": [[0, "a"]]})
    h.poll(8, {"x": [[2, "c"]]}, typ="fail")  # skipped b relative to the committed position
    assert check(h.ops)["anomalies"] == {"poll-skip": 1}


def test_g1c_from_wr_edges_is_bad() -> None:
    h = H()
    t1 = h.txn(1, [["send", "x", [0, "a"]], ["poll", {"y": [[0, "b"]]}]])
    t2 = h.txn(2, [["send", "y", [0, "b"]], ["poll", {"x": [[0, "a"]]}]])
    r = check(h.ops)
    assert r["anomalies"] == {"G1c": 1}
    assert r["valid"] is False
    ex = r["examples"]["G1c"][0]
    assert ex["length"] == 2 and ex["cycle"][0] is ex["cycle"][-1]
    assert {id(o) for o in ex["cycle"]} == {id(t1), id(t2)}
    assert [s["type"] for s in ex["steps"]] == ["wr", "wr"]


def test_g1c_with_ww_deps_is_allowed() -> None:
    h = H()
    h.txn(1, [["send", "x", [0, "a"]], ["send", "y", [2, "c"]]])
    h.txn(2, [["poll", {"x": [[0, "a"]]}], ["send", "y", [1, "b"]]])
    h.poll(9, {"y": [[1, "b"], [2, "c"]]})
    plain = check(h.ops)
    assert plain["anomalies"] == {} and plain["valid"]
    ww = check(h.ops, ww_deps=True)
    assert ww["anomalies"] == {"G1c": 1}
    assert ww["valid"] is True
    assert sorted(s["type"] for s in ww["examples"]["G1c"][0]["steps"]) == ["wr", "ww"]


def test_g0_is_allowed() -> None:
    h = H()
    h.send(1, ("x", 0, "a"), ("y", 1, "b"))
    h.send(2, ("x", 1, "c"), ("y", 0, "d"))
    h.poll(9, {"x": [[0, "a"], [1, "c"]], "y": [[0, "d"], [1, "b"]]})
    r = check(h.ops, ww_deps=True)
    assert r["anomalies"] == {"G0": 1}
    assert r["valid"] is True
    assert {s["type"] for s in r["examples"]["G0"][0]["steps"]} == {"ww"}
    assert check(h.ops)["anomalies"] == {}


def test_every_anomaly_type_is_exercised_by_some_fixture() -> None:
    seen: set[str] = set()
    for name, e in EXPECTED.items():
        seen |= set(e["present"])
        seen |= set(e.get("counts", {}))
        assert (DATA / name).exists()
    assert set(ANOMALY_TYPES) <= seen


# --------------------------------------------------------------------------------------------
# Jepsen's own test cases, re-expressed as JSON fixtures


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_jepsen_fixture(name: str) -> None:
    e = EXPECTED[name]
    r = check_queue(load_queue_history(DATA / name), **e.get("options", {}))
    for t in e["present"]:
        assert t in r["anomalies"], (t, r["anomalies"])
    for t in e["absent"]:
        assert t not in r["anomalies"], (t, r["anomalies"])
    for t, n in e.get("counts", {}).items():
        assert r["anomalies"].get(t) == n, (t, r["anomalies"])
    assert r["valid"] is e["valid"], r["bad_anomaly_types"]


# --------------------------------------------------------------------------------------------
# Loading


def test_load_json_jsonl_and_v1(tmp_path: Path) -> None:
    ops = clean_base().ops
    a = tmp_path / "h.json"
    a.write_text(json.dumps(ops))
    b = tmp_path / "h.jsonl"
    b.write_text("\n".join(json.dumps(o) for o in ops) + "\n")
    c = tmp_path / "h.v1.jsonl"
    c.write_text(
        json.dumps({"history_format": 1, "workload": "queue"})
        + "\n"
        + "\n".join(json.dumps(o) for o in ops)
        + "\n"
    )
    assert load_queue_history(a) == load_queue_history(b) == load_queue_history(c) == ops
    assert load_queue_history(c).notes and not load_queue_history(b).notes


def test_truncated_jsonl_last_line_is_skipped_and_noted(tmp_path: Path) -> None:
    h = clean_base()
    h.poll(9, {"x": [[0, "a"], [1, "b"], [2, "c"]]})
    text = "\n".join(json.dumps(o) for o in h.ops)
    p = tmp_path / "h.jsonl"
    p.write_text(text + "\n" + json.dumps(h.ops[0])[:17])
    loaded = load_queue_history(p)
    assert loaded == h.ops
    r = check_queue(loaded)
    assert r["valid"] and "truncated" in r["input_notes"][0]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "empty"),
        ('[{"type": "ok", "f": "send"', "truncated JSON array"),
        ('{"type": "ok", "f": "poll"}\n{oops\n{"type": "ok", "f": "poll"}\n', "line 2"),
        ("hello", "neither"),
        ("[1, 2]", "not a JSON object"),
        ('{"history_format": 1}\n[1]\n{"type": "ok", "f": "poll"}\n', "line 2"),
    ],
)
def test_malformed_files_raise_one_line(tmp_path: Path, content: str, reason: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(HistoryInputError) as e:
        check_queue(load_queue_history(p))
    assert reason in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        ({"f": "send", "value": []}, "type"),
        ({"type": "done", "f": "send"}, "type"),
        ({"type": ["ok"], "f": "send"}, "type"),
        ({"type": "ok"}, "'f'"),
        ({"type": "ok", "f": "send", "value": "x"}, "list of micro-ops"),
        ({"type": "ok", "f": "send", "value": [["send", "x"]]}, "[send, k, v]"),
        ({"type": "ok", "f": "send", "value": [["send", 1.5, [0, 1]]]}, "key"),
        ({"type": "ok", "f": "send", "value": [["send", "x", [-1, 1]]]}, "offset"),
        ({"type": "ok", "f": "poll", "value": [["poll", [1]]]}, "map"),
        ({"type": "ok", "f": "poll", "value": [["poll", {"x": [[0]]}]]}, "[offset, value]"),
        ({"type": "ok", "f": "poll", "value": [["poll", {"x": 3}]]}, "not a list"),
        ({"type": "ok", "f": "poll", "value": [["peek"]]}, "unknown micro-op"),
        ({"type": "ok", "f": "assign", "value": "x"}, "list of keys"),
        ("not an op", "not an object"),
    ],
)
def test_malformed_ops_raise_one_line(op: Any, reason: str) -> None:
    with pytest.raises(HistoryInputError) as e:
        check_queue([*clean_base().ops, op])
    assert reason in str(e.value)
    assert "op #6" in str(e.value)


def test_edn_keyword_strings_are_accepted() -> None:
    ops = [
        {"type": ":invoke", "f": ":send", "process": 0, "value": [[":send", ":x", "a"]]},
        {"type": ":ok", "f": ":send", "process": 0, "value": [[":send", ":x", [0, "a"]]]},
        {"type": ":ok", "f": ":poll", "process": 1, "value": [[":poll", {"x": [[0, "a"]]}]]},
    ]
    assert check(ops)["valid"]


# --------------------------------------------------------------------------------------------
# CLI


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "checkers", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_exit_codes() -> None:
    ok = run_cli("queue", str(DATA / "clean_assign.json"))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["valid"] is True
    bad = run_cli("queue", str(DATA / "jepsen_g1c_pure_wr.json"))
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["anomalies"] == {"G1c": 1}


def test_cli_options(tmp_path: Path) -> None:
    p = tmp_path / "skip.json"
    p.write_text(json.dumps(_poll_skip_history("subscribe").ops))
    assert run_cli("queue", str(p)).returncode == 1
    r = run_cli("queue", str(p), "--sub-via", "subscribe", "--max-examples", "0")
    assert r.returncode == 0
    out = json.loads(r.stdout)
    assert out["examples"]["poll-skip"] == [] and out["options"]["sub_via"] == "subscribe"
    g = run_cli("queue", str(DATA / "jepsen_g1c_ww_wr.json"), "--ww-deps")
    assert json.loads(g.stdout)["bad_anomaly_types"] == ["unseen"]


@pytest.mark.parametrize(
    "content",
    [
        '[{"type": "ok", "f": "send", "value": [["send", "x", [0,',
        '{"type": "ok"}\n',
        "garbage",
        "",
    ],
)
def test_cli_unusable_input_exit_2_one_line(tmp_path: Path, content: str) -> None:
    p = tmp_path / "h.json"
    p.write_text(content)
    r = run_cli("queue", str(p))
    assert r.returncode == 2
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_cli_truncated_jsonl_is_checked_with_note(tmp_path: Path) -> None:
    ops = json.loads((DATA / "clean_assign.json").read_text())
    p = tmp_path / "h.jsonl"
    p.write_text("\n".join(json.dumps(o) for o in ops) + '\n{"type": "ok", "f"')
    r = run_cli("queue", str(p))
    assert r.returncode == 0, r.stderr
    assert "truncated" in json.loads(r.stdout)["input_notes"][0]


@pytest.mark.parametrize(
    "args",
    [
        ("queue", "/nonexistent/history.json"),
        ("queue",),
        ("queue", "x.json", "--sub-via", "both"),
        ("queue", "x.json", "--max-examples", "-3"),
        ("frobnicate",),
        (),
    ],
)
def test_cli_usage_errors_exit_2_one_line(args: tuple[str, ...]) -> None:
    r = run_cli(*args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cli_run_dir_dispatch(tmp_path: Path) -> None:
    r = run_cli(str(tmp_path))
    assert r.returncode == 2
    assert "nothing to check" in r.stderr


def test_cli_main_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from checkers.cli import check_run_dir, main

    assert main(["queue", str(DATA / "clean_assign.json")]) == 0
    assert json.loads(capsys.readouterr().out)["valid"]
    assert check_run_dir(tmp_path) == 2


# --------------------------------------------------------------------------------------------
# Property tests: random clean histories pass; known corruptions are caught


def _key_for_send(k: str, flip: bool) -> Any:
    # Sends may name a numeric partition as an int; polls always use strings (JSON keys).
    return int(k) if flip and k.isdigit() else k


@st.composite
def clean_histories(draw: st.DrawFn) -> list[Op]:
    """Producers append unique values (offsets increase, sometimes with gaps or unknown in the
    ack); consumers poll contiguous ranges from their own positions (aborted polls do not
    advance them); consume-produce txns poll then send; a final poll reads every key to the
    end so nothing is unseen."""
    keys = draw(
        st.lists(st.sampled_from(["0", "1", "7", "x", "y"]), min_size=1, max_size=3, unique=True)
    )
    n_consumers = draw(st.integers(1, 3))
    flip = draw(st.booleans())
    sub_f = draw(st.sampled_from(["assign", "subscribe"]))
    actions = draw(
        st.lists(
            st.tuples(st.integers(0, 6), st.integers(0, 7), st.integers(0, 7)),
            min_size=1,
            max_size=30,
        )
    )
    logs: dict[str, list[tuple[int, int]]] = {k: [] for k in keys}
    nxt = dict.fromkeys(keys, 0)
    pos: dict[tuple[int, str], int] = {}
    counter = iter(range(1, 10**9))
    h = H()
    for c in range(n_consumers):
        h.sub(c, sub_f, list(keys))

    def append(k: str, gap: int) -> tuple[int, int]:
        nxt[k] += gap
        rec = (nxt[k], next(counter))
        nxt[k] += 1
        logs[k].append(rec)
        return rec

    def read(c: int, n: int) -> dict[str, list[list[int]]]:
        res: dict[str, list[list[int]]] = {}
        for k in keys:
            at = pos.get((c, k), 0)
            recs = logs[k][at : at + n]
            if recs:
                res[k] = [list(r) for r in recs]
        return res

    def advance(c: int, res: dict[str, list[list[int]]]) -> None:
        for k, recs in res.items():
            pos[(c, k)] = pos.get((c, k), 0) + len(recs)

    actions = [(0, 0, 0), *actions]  # at least one send, so the graph has an edge
    for kind, a, b in actions:
        k = keys[a % len(keys)]
        if kind == 0:  # ok send to one or two keys
            ks = [k] if b % 2 == 0 or len(keys) == 1 else [k, keys[(a + 1) % len(keys)]]
            sends = []
            for kk in ks:
                o, v = append(kk, int(b % 3 == 2))
                sends.append((_key_for_send(kk, flip), None if b == 5 else o, v))
            h.send(100 + a % 3, *sends)
        elif kind == 1:  # failed send: never lands
            h.send(100 + a % 3, (_key_for_send(k, flip), None, next(counter)), typ="fail")
        elif kind == 2:  # crashed send: may or may not land; the ack has no offset
            v = append(k, 0)[1] if b % 2 else next(counter)
            h.send(100 + a % 3, (_key_for_send(k, flip), None, v), typ="info")
        elif kind in (3, 4):  # poll, split into one or two micro-ops
            c = a % n_consumers
            first = read(c, b % 4)
            advance(c, first)
            if kind == 4:
                second = read(c, 1 + b % 2)
                advance(c, second)
                h.poll(c, first, second)
            else:
                h.poll(c, first)
        elif kind == 5:  # consume-produce txn, committed
            c = a % n_consumers
            res = read(c, 1 + b % 3)
            advance(c, res)
            o, v = append(k, 0)
            h.txn(c, [["poll", res], ["send", _key_for_send(k, flip), [o, v]]])
        else:  # aborted poll txn: reads are real but the position does not move
            c = a % n_consumers
            h.txn(c, [["poll", read(c, 1 + b % 3)]], typ="fail" if b % 2 else "info")
            if b % 2 == 0:  # an info ends the process: Jepsen would use a new process id
                for kk in keys:
                    pos.pop((c, kk), None)
                h.sub(c, sub_f, list(keys))
    final = {k: [list(r) for r in logs[k][pos.get((0, k), 0) :]] for k in keys}
    h.poll(0, final)
    return h.ops


PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY
@given(clean_histories(), st.booleans(), st.sampled_from(["assign", "subscribe"]))
def test_random_clean_histories_pass(ops: list[Op], ww: bool, sub_via: str) -> None:
    r = check(ops, ww_deps=ww, sub_via=sub_via)
    event(f"ww edges inferred: {r['stats']['graph']['ww_edges'] > 0}")
    assert r["valid"], (r["anomalies"], r["examples"])
    assert r["anomalies"] == {}


def _ok_records(ops: list[Op]) -> Iterator[tuple[int, int, str, int]]:
    """(op position, mop position, key, record position) of every record in an ok poll/txn."""
    for i, op in enumerate(ops):
        if op["type"] == "ok" and op["f"] in ("poll", "txn"):
            for m, mop in enumerate(op["value"]):
                if mop[0] == "poll":
                    for k, recs in mop[1].items():
                        for j in range(len(recs)):
                            yield i, m, k, j


def _writer(ops: list[Op], k: str, v: Any) -> Op | None:
    for op in ops:
        if op["type"] != "invoke" and op["f"] in ("send", "txn"):
            for mop in op["value"]:
                if mop[0] == "send" and str(mop[1]) == k:
                    val = mop[2][1] if isinstance(mop[2], list) else mop[2]
                    if val == v:
                        return op
    return None


def _reads_key(op: Op, k: str) -> bool:
    return op["f"] in ("poll", "txn") and any(
        mop[0] == "poll" and mop[1].get(k) for mop in op["value"] if len(mop) > 1
    )


def _expected_after_drop(ops: list[Op], i: int, m: int, k: str, j: int) -> set[str]:
    """Anomaly groups that must appear after dropping record j of key k in ops[i] mop m."""
    op = ops[i]
    v = op["value"][m][1][k][j][1]
    placed = False  # is v's position still known after the drop?
    read_elsewhere = False
    w = _writer(ops, k, v)
    if w is not None and w["type"] == "ok":
        for mop in w["value"]:
            if mop[0] == "send" and str(mop[1]) == k and isinstance(mop[2], list):
                placed |= mop[2][0] is not None and mop[2][1] == v
    for i2, m2, k2, j2 in _ok_records(ops):
        if k2 == k and (i2, m2, j2) != (i, m, j) and ops[i2]["value"][m2][1][k2][j2][1] == v:
            placed = read_elsewhere = True
    for i2, o2 in enumerate(ops):  # any poll completion mentioning v counts for placement
        if i2 != i and o2["type"] in ("info", "fail") and o2["f"] in ("poll", "txn"):
            for mop in o2["value"]:
                if mop[0] == "poll" and any(r[1] == v for r in mop[1].get(k, [])):
                    placed = True
    # A skip is visible only if the same process read k both before and after the hole within
    # one session (an info completion ends a session; assigns here always keep every key).
    proc = op["process"]
    flat = [r for mop in op["value"] if mop[0] == "poll" for r in mop[1].get(k, [])]
    here = sum(len(mop[1].get(k, [])) for mop in op["value"][:m] if mop[0] == "poll") + j
    earlier = here > 0
    later = here + 1 < len(flat)
    for o2 in reversed(ops[:i]):
        if earlier or o2["process"] != proc or o2["type"] == "invoke":
            continue
        if o2["type"] == "info":
            break
        earlier = o2["type"] == "ok" and _reads_key(o2, k)
    for o2 in ops[i + 1 :]:
        if later or o2["process"] != proc or o2["type"] == "invoke":
            continue
        later = _reads_key(o2, k)
        if o2["type"] == "info":
            break
    expected = set()
    if placed and earlier and later:
        expected.add("skip")
    if not read_elsewhere:
        expected.add("unseen")
    return expected


@PROPERTY
@given(clean_histories(), st.integers(0, 10**6), st.booleans())
def test_dropping_a_polled_record_is_detected(ops: list[Op], pick: int, interior: bool) -> None:
    candidates = [
        c
        for c in _ok_records(ops)
        if (_writer(ops, c[2], ops[c[0]]["value"][c[1]][1][c[2]][c[3]][1]) or {}).get("type")
        == "ok"
    ]
    if interior:  # prefer holes the consumer itself can notice (reads before and after)
        candidates = [
            c for c in candidates if "skip" in _expected_after_drop(ops, *c)
        ] or candidates
    if not candidates:
        return
    i, m, k, j = candidates[pick % len(candidates)]
    expected = _expected_after_drop(ops, i, m, k, j)
    event(f"expected after drop: {sorted(expected) or 'still valid'}")
    mutated = json.loads(json.dumps(ops))
    del mutated[i]["value"][m][1][k][j]
    r = check(mutated)
    found = set(r["anomalies"])
    if not expected:
        assert r["valid"], r["anomalies"]
        return
    assert not r["valid"]
    if "skip" in expected:
        assert found & {"poll-skip", "int-poll-skip"}, found
    if "unseen" in expected:
        assert found & {"unseen", "lost-write"}, found


def _last_ok_poll(ops: list[Op]) -> dict[str, list[list[Any]]]:
    return ops[-1]["value"][0][1]


@PROPERTY
@given(clean_histories(), st.integers(0, 10**6))
def test_value_at_two_offsets_is_a_duplicate(ops: list[Op], pick: int) -> None:
    recs = [(k, r) for i, m, k, j in _ok_records(ops) for r in [ops[i]["value"][m][1][k][j]]]
    k, (_, v) = recs[pick % len(recs)]
    mutated = json.loads(json.dumps(ops))
    top = max(r[0] for kk, r in recs if kk == k)
    _last_ok_poll(mutated).setdefault(k, []).append([top + 1, v])
    r = check(mutated)
    assert "duplicate" in r["anomalies"] and not r["valid"]


@PROPERTY
@given(clean_histories(), st.integers(0, 10**6))
def test_reading_a_failed_write_is_g1a(ops: list[Op], pick: int) -> None:
    mutated = json.loads(json.dumps(ops))
    final = _last_ok_poll(mutated)
    keys = sorted(final) or ["x"]
    k = keys[pick % len(keys)]
    top = max((r[0] for _, kk, r in _all_records(mutated) if kk == k), default=-1)
    mutated.insert(
        len(mutated) - 2,
        {"type": "invoke", "f": "send", "process": 555, "value": [["send", k, "ghost"]]},
    )
    mutated.insert(
        len(mutated) - 2,
        {"type": "fail", "f": "send", "process": 555, "value": [["send", k, "ghost"]]},
    )
    final.setdefault(k, []).append([top + 1, "ghost"])
    r = check(mutated)
    assert "G1a" in r["anomalies"] and not r["valid"]


def _all_records(ops: list[Op]) -> Iterator[tuple[int, str, list[Any]]]:
    for i, op in enumerate(ops):
        if op["type"] != "invoke" and op["f"] in ("poll", "txn", "send"):
            for mop in op["value"]:
                if mop[0] == "poll":
                    for k, recs in mop[1].items():
                        for r in recs:
                            yield i, k, r
                elif isinstance(mop[2], list) and mop[2][0] is not None:
                    yield i, str(mop[1]), mop[2]


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.sampled_from(["send", "poll", "x", "ok", ":send"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["x", "1", "type", "f", "value"]), inner, max_size=3)
    ),
    max_leaves=12,
)
_fuzz_op = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["invoke", "ok", "fail", "info"]) | _json,
        "f": st.sampled_from(["send", "poll", "txn", "assign", "subscribe", "crash"]) | _json,
        "process": _json,
        "value": _json | st.lists(st.lists(_json, max_size=3), max_size=3),
    },
    optional={"rebalance_log": _json, "index": _json},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_fuzz_op | _json, max_size=6))
def test_garbage_never_crashes(ops: list[Any]) -> None:
    try:
        r = check_queue(ops)
    except HistoryInputError as e:
        assert "\n" not in str(e)
    else:
        json.dumps(r, default=str)


# --------------------------------------------------------------------------------------------
# Scale


def synthetic_history(n_ops: int, keys: int = 8, seed: int = 7) -> list[Op]:
    """A clean history of ~n_ops ops: producers send to 1-2 keys, four consumers poll."""
    rnd = random.Random(seed)
    logs: dict[str, list[list[int]]] = {str(k): [] for k in range(keys)}
    nxt = dict.fromkeys(logs, 0)
    pos: dict[tuple[int, str], int] = {}
    ops: list[Op] = []
    val = 0
    while len(ops) < n_ops - 2:
        if rnd.random() < 0.5:
            p = rnd.randrange(16)
            inv, done = [], []
            for k in rnd.sample(list(logs), rnd.randint(1, 2)):
                val += 1
                o = nxt[k]
                nxt[k] += rnd.choice((1, 1, 2))
                logs[k].append([o, val])
                inv.append(["send", k, val])
                done.append(["send", k, [o, val]])
            ops.append({"type": "invoke", "f": "send", "process": p, "value": inv})
            ops.append({"type": "ok", "f": "send", "process": p, "value": done})
        else:
            c = 100 + rnd.randrange(4)
            res = {}
            for k in logs:
                at = pos.get((c, k), 0)
                recs = logs[k][at : at + rnd.randint(0, 3)]
                pos[(c, k)] = at + len(recs)
                if recs:
                    res[k] = recs
            ops.append({"type": "invoke", "f": "poll", "process": c, "value": [["poll"]]})
            ops.append({"type": "ok", "f": "poll", "process": c, "value": [["poll", res]]})
    final = {k: logs[k][pos.get((100, k), 0) :] for k in logs}
    ops.append({"type": "invoke", "f": "poll", "process": 100, "value": [["poll"]]})
    ops.append({"type": "ok", "f": "poll", "process": 100, "value": [["poll", final]]})
    for i, op in enumerate(ops):
        op["index"] = i
        op["time"] = i * 1_000
    return ops


def test_100k_ops_in_a_few_seconds() -> None:
    ops = synthetic_history(100_000)
    for ww in (False, True):
        t0 = time.perf_counter()
        r = check_queue(ops, ww_deps=ww)
        elapsed = time.perf_counter() - t0
        assert r["valid"], r["anomalies"]
        assert r["stats"]["ops"] == 100_000
        assert elapsed < 15, elapsed  # ~1-2 s on a laptop; generous for loaded CI


def test_big_cycle_needs_no_recursion() -> None:
    n = 200_000
    succ = [[(i + 1) % n] for i in range(n)]
    comps = strongly_connected_components(succ)
    assert len(comps) == 1 and len(comps[0]) == n
    h = H()
    n_txn = 5_000
    for i in range(n_txn):  # txn i reads txn i-1's value and sends its own: a long wr cycle
        prev = (i - 1) % n_txn
        h.txn(i, [["poll", {"x": [[prev, prev]]}], ["send", "x", [i, i]]])
    r = check(h.ops)
    assert r["anomalies"]["G1c"] == 1
    ex = r["examples"]["G1c"][0]
    assert ex["length"] == n_txn
    assert len(ex["steps"]) + ex["elided_steps"] == n_txn  # long cycles show both ends only
    assert len(ex["cycle"]) == len(ex["steps"]) + 1
