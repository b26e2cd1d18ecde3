"""The streams workload's logic without a cluster: options, instance configuration, the
readiness read from an instance's history, the report's journeys and the run tally."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.errors import HarnessError
from history import Recorder
from workloads.streams.config import StreamsOptions
from workloads.streams.driver import run_stats, tally
from workloads.streams.report import carried, describe
from workloads.streams.supervisor import SPEC, instance_facts


def test_options_round_trip_with_their_derived_names() -> None:
    o = StreamsOptions(threads=2, standby=1, name_suffix="-x", variant="at-least-once")
    raw = o.to_dict()
    assert raw["changelog_topic"] == "streams-app-x-aggregates-changelog"
    assert raw["guarantee"] == "at_least_once"
    assert StreamsOptions.from_dict(raw) == o
    assert o.name_parts() == ["at-least-once", "t2", "standby1"]
    with pytest.raises(HarnessError, match="unknown streams option"):
        StreamsOptions.from_dict({"txn_size": 5})


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("variant", "no-rewind", "--variant"),
        ("threads", 0, "--stream-threads"),
        ("standby", 3, "--standby-replicas"),
        ("group_protocol", "consumer", "--group-protocol"),
        ("commit_interval_ms", 0, "--commit-interval-ms"),
        ("values", 1_000_000, "--values"),
    ],
)
def test_bad_options_are_one_line_errors(field: str, value: object, words: str) -> None:
    with pytest.raises(HarnessError, match=words):
        StreamsOptions(**{field: value}).validate()


def test_the_instance_config_carries_the_guarantee_and_leaves_defaults_to_streams() -> None:
    o = StreamsOptions(variant="at-least-once", group_protocol="streams")
    cfg = json.loads(o.instance_config(3, 1, "b:1", "/h.jsonl", "/s").to_json())
    assert cfg["guarantee"] == "at_least_once"
    assert cfg["commit_interval_ms"] is None  # Streams' own default for the guarantee
    assert cfg["group_protocol"] == "streams" and cfg["application_id"] == "streams-app"
    assert SPEC.needs_kafka(o) == ("4.3.0", "--group-protocol streams")
    assert SPEC.needs_kafka(StreamsOptions()) is None


def test_readiness_reads_the_last_state_and_the_tasks_at_the_last_running(
    tmp_path: Path,
) -> None:
    path = tmp_path / "0.jsonl"
    assert instance_facts(path).state is None
    with Recorder(path, 0, meta={"workload": "streams"}) as rec:
        rec.invoke("start", {"instance": 0})
        rec.ok("start", {"instance": 0, "transactional_ids": ["app-uuid-1", "app-uuid-2"]})
        for old, new in (("CREATED", "REBALANCING"), ("REBALANCING", "RUNNING")):
            rec.invoke("state", {"old": old, "new": new})
            rec.ok("state", {"old": old, "new": new})
        threads = [{"thread": "t1", "active": ["0_0", "0_1"], "standby": []}]
        rec.invoke("tasks", {"threads": threads})
        rec.ok("tasks", {"threads": threads})
        facts = instance_facts(path)
        assert (facts.state, facts.tasks) == ("RUNNING", threads)
        assert facts.transactional_ids == ["app-uuid-1", "app-uuid-2"]
        rec.invoke("state", {"old": "RUNNING", "new": "REBALANCING"})
        rec.ok("state", {"old": "RUNNING", "new": "REBALANCING"})
    assert instance_facts(path).state == "REBALANCING"


def _read(topic: str, records: list[list[object]]) -> dict[str, object]:
    value = {"topic": topic, "partition": 1, "isolation": "read_committed", "records": records}
    return {"process": "final", "f": "read", "type": "ok", "value": value}


def test_the_journey_follows_an_input_through_its_output_and_its_aggregate() -> None:
    h = {"src-value": "v000004", "src-partition": "1", "src-offset": "1", "instance": "2"}
    h["task"] = "0_1"
    out = _read("streams-output", [[10, "v000004", "out-v000004", h]])
    agg = _read("streams-aggregates", [[3, "p1-g0", "2,5", h]])
    changes = _read("streams-app-aggregates-changelog", [[7, "p1-g0", "2,5", {}]])
    inp = _read("streams-input", [[1, "v000004", "v000004", {}]])
    assert carried(out) == ["v000004"]
    assert carried(agg) == ["v000004", "p1-g0"]
    assert carried(changes) == ["p1-g0"] and carried(inp) == ["v000004"]
    inv = {"f": "read", "value": {}}
    assert "output out-v000004 @ 10 (instance 2, task 0_1)" in describe("v000004", inv, out)
    assert "aggregate p1-g0 = 2,5 @ 3 after input v000004" in describe("v000004", inv, agg)
    assert "aggregate p1-g0 = 2,5" in describe("p1-g0", inv, agg)
    assert "changelog p1-g0 = 2,5 @ 7" in describe("p1-g0", inv, changes)


def test_the_tally_counts_duplicates_and_keys_against_the_seeds() -> None:
    start = {
        "process": 0,
        "f": "start",
        "type": "ok",
        "value": {"output_topic": "o", "aggregate_topic": "a", "groups": 1},
    }
    seed = {
        "process": "seeder",
        "f": "send",
        "type": "ok",
        "value": {"values": [["v000001", 0, 0], ["v000002", 0, 1]]},
    }
    h1 = {"src-partition": "0", "src-offset": "0", "src-value": "v000001"}
    h2 = {"src-partition": "0", "src-offset": "1", "src-value": "v000002"}
    reads = [
        _read("o", [[0, None, "out-v000001", h1], [1, None, "out-v000001", h1]]),
        _read("a", [[0, "p0-g0", "1,1", h1], [1, "p0-g0", "2,3", h2]]),
    ]
    t = tally([start, seed, *reads])
    assert (t["seeded"], t["committed_outputs"], t["duplicates"], t["missing"]) == (2, 2, 1, 1)
    assert (t["keys"], t["keys_right"]) == (1, 1)


def test_the_pace_sums_what_each_instance_processed_over_the_span() -> None:
    def op(process: object, f: str, t: float, **value: object) -> dict[str, object]:
        return {"process": process, "f": f, "type": "ok", "time": int(t * 1e9), "value": value}

    ops = [
        op(0, "start", 1.0),
        op(1, "start", 1.5),
        op(0, "progress", 3.0, processed=100),
        op(1, "progress", 5.0, processed=50),
        op(0, "progress", 11.0, processed=300),
        op(1, "exit", 12.0, processed=60),
    ]
    stats = run_stats(ops)
    assert stats == {
        "instances": 2,
        "records_processed": 360,
        "span_s": 10.0,
        "records_per_s": 36.0,
    }
    count = SPEC.figures.throughput()
    assert [count(o) for o in ops] == [None, None, 100, 50, 200, None]
