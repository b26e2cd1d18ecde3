"""The share workload (KIP-932 share groups): its options, its members' contract, its drain,
and real runs on the worker's cluster judged by the ``share`` checker family.

The real runs: a correct member under paused and killed members is valid and every committed
input is accepted; the broken-on-purpose ``accept-before-process`` member, armed to kill
itself between its commit and its processing, is invalid with ``lost``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from common.errors import HarnessError
from harness.cli import build_parser
from harness.run.arguments import options_from_args
from history import Recorder
from workloads.share import member
from workloads.share.driver import summarize
from workloads.share.options import ShareOptions
from workloads.share.report import REPORT
from workloads.share.state import _rows
from workloads.share.supervisor import outstanding, probed


def test_the_command_line_fills_the_share_options() -> None:
    args = build_parser().parse_args(
        ["run", "--workload", "share", "--processors", "2", "--lock-ms", "20000",
         "--delivery-limit", "3", "--variant", "accept-before-process", "--seed", "7"]
    )  # fmt: skip
    o = options_from_args(args).workload_options
    assert (o.members, o.lock_ms, o.delivery_limit, o.variant, o.seed) == (
        2, 20000, 3, "accept-before-process", 7,
    )  # fmt: skip
    assert o.group_settings() == {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": "20000",
        "share.delivery.count.limit": "3",
        "share.isolation.level": "read_committed",
    }


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"variant": "accept-late"}, "--share-variant"),
        ({"release_p": 0.6, "reject_p": 0.5}, "sum below 1"),
        ({"delivery_limit": 1}, "--delivery-limit"),
        ({"members": 0}, "at least one member"),
        ({"client": "kafkajs"}, "--client is one of"),
    ],
)
def test_bad_options_are_refused_in_one_line(change: dict[str, Any], words: str) -> None:
    with pytest.raises(HarnessError, match=words) as got:
        ShareOptions(**change).validate()
    assert "\n" not in str(got.value)


def test_a_member_config_carries_every_key_of_the_contract() -> None:
    """What the harness hands a member is what every member (Python, Java) requires."""
    cfg = ShareOptions().member_config(4, 1, "b:9092", "h.jsonl", "drain", 60.0)
    assert set(member.REQUIRED) <= set(cfg)
    assert member.main(["--config", json.dumps({"process": 1})]) == 2


def _write(path: Path, process: Any, ops: list[tuple[str, str, Any]]) -> None:
    with Recorder(path, process) as rec:
        for type_, f, value in ops:
            rec.record(type_, f, value)  # type: ignore[arg-type]


def test_the_drain_waits_for_every_committed_input_not_yet_taken(tmp_path: Path) -> None:
    """Accepted or rejected with the broker's answer, or delivered at the limit: done; a
    release, a refused acknowledgement and an unacknowledged value are left."""
    values = [["v1", 0, 0], ["v2", 0, 1], ["v3", 0, 2], ["v4", 0, 3], ["v5", 0, 4]]
    _write(tmp_path / "seeder.jsonl", "seeder", [("ok", "send", {"values": values})])
    acks = [
        [0, 0, "v1", "accept", None],
        [0, 1, "v2", "reject", None],
        [0, 2, "v3", "release", None],
        [0, 3, "v4", "accept", "INVALID_RECORD_STATE"],
    ]
    _write(
        tmp_path / "0.jsonl",
        0,
        [("ok", "poll", {"records": [[0, 4, "v5", 1]]}), ("ok", "ack", {"acks": acks})],
    )
    assert outstanding(tmp_path, 5) == {"v3", "v4", "v5"}
    _write(tmp_path / "1.jsonl", 1, [("ok", "poll", {"records": [[0, 2, "v3", 5]]})])
    assert outstanding(tmp_path, 5) == {"v4", "v5"}
    # A commit of unknown outcome, and one its member never finished (killed inside it):
    # either may have been taken, and then the record never comes back.
    unknown = {"acks": [[0, 3, "v4", "accept"]]}
    _write(tmp_path / "2.jsonl", 2, [("invoke", "ack", unknown), ("info", "ack", unknown)])
    assert outstanding(tmp_path, 5) == {"v5"}
    _write(tmp_path / "3.jsonl", 3, [("invoke", "ack", {"acks": [[0, 4, "v5", "reject"]]})])
    assert outstanding(tmp_path, 5) == set()


def test_the_share_groups_tool_table_is_read_by_its_header() -> None:
    text = (
        "\nGROUP    TOPIC   PARTITION  LEADER-EPOCH  START-OFFSET  LAG\n"
        "g        t       0          -             -             -\n"
        "g        t       1          0             17            3\n"
    )
    rows = _rows(text)
    assert [r["START-OFFSET"] for r in rows] == ["-", "17"]


def test_the_summary_counts_deliveries_and_answers() -> None:
    def op(i: int, f: str, value: Any, type_: str = "ok") -> dict[str, Any]:
        return {"index": i, "time": i * 10**9, "process": 0, "type": type_, "f": f, "value": value}

    ops = [
        op(0, "poll", {"records": [[0, 0, "v1", 1], [0, 1, "v2", 2]]}),
        op(1, "ack", {"acks": [[0, 0, "v1", "accept", None], [0, 1, "v2", "release", "X"]]}),
        op(2, "ack", {"acks": [[0, 0, "v1", "accept"]]}, "info"),
    ]
    s = summarize(ops)  # type: ignore[arg-type]
    assert s.tally == {
        "deliveries": 2, "redeliveries": 1, "accepted": 1, "released": 0, "rejected": 0,
        "ack_errors": 1, "ack_unknown": 1,
    }  # fmt: skip


# --- real runs ------------------------------------------------------------------------------


def ops_of(run_dir: Path) -> list[dict[str, Any]]:
    """Every op of a run's merged history."""
    return [json.loads(line) for line in (run_dir / "history.jsonl").open()][1:]


def _member_ops(run_dir: Path) -> list[dict[str, Any]]:
    return [op for op in ops_of(run_dir) if isinstance(op.get("process"), int)]


@pytest.mark.cluster
def test_correct_members_under_pauses_and_kills_are_valid(scenario: Any) -> None:
    """Members paused (their locks expire, the records go to others) and killed with records
    acquired: every committed input is accepted and processed, nothing is judged lost.

    At ``latest`` the seeder waits for every partition's probe to be delivered, so the
    members consume while the faults act even on a loaded machine (joining a share group
    can take longer than the load: then every record was first delivered in the drain)."""
    verdict, result, _report = scenario(
        "share", "faults", nemesis="pause-processor,kill-processor", time_limit=30,
        values=600, lock_ms=15000, interval=3.0, duration=17.0, offset_reset="latest",
    )  # fmt: skip
    assert result.drained, "the drain did not see every committed input taken"
    assert verdict["valid"] is True, verdict
    tally = summarize(_member_ops(result.run_dir)).tally or {}
    assert tally["accepted"] > 0 and tally["redeliveries"] > 0, tally
    # The start offsets were looked at during the run, and moved with the acceptances.
    looks = [
        op for op in ops_of(result.run_dir)
        if op["process"] == "share-monitor" and op["type"] == "ok"
    ]  # fmt: skip
    assert looks, "no start-offsets look completed"
    assert any(start for op in looks for _p, start in op["value"]["partitions"]), looks


@pytest.mark.cluster
def test_accepting_before_processing_loses_records_when_killed(scenario: Any) -> None:
    """Armed to kill itself after its commit (crash-clients), the broken member loses the
    records it accepted and never wrote."""
    verdict, result, _report = scenario(
        "share", "abp", nemesis="crash-clients", time_limit=20, values=1500,
        variant="accept-before-process", correct=False, monitor_s=0,
    )  # fmt: skip
    assert verdict["valid"] is False, verdict
    assert "lost" in verdict["bad_anomaly_types"], verdict["bad_anomaly_types"]
    ops = ops_of(result.run_dir)
    hits = [
        h for op in ops if op["process"] == "nemesis-clients" and op["f"] == "stop"
        and op["type"] == "ok" for h in op["value"].get("hit", [])
    ]  # fmt: skip
    assert {h["at"] for h in hits} & {"after-commit", "during-commit"}, hits


def test_latest_is_the_group_s_reset_and_names_the_run() -> None:
    o = ShareOptions(offset_reset="latest")
    o.validate()
    assert o.group_settings()["share.auto.offset.reset"] == "latest"
    assert "latest" in o.name_parts()
    with pytest.raises(HarnessError, match="--share-offset-reset is one of earliest, latest"):
        ShareOptions(offset_reset="newest").validate()


def test_a_partition_counts_as_probed_once_a_member_was_delivered_a_probe_from_it(
    tmp_path: Path,
) -> None:
    _write(tmp_path / "supervisor.jsonl", "supervisor", [("ok", "probe", {"values": []})])
    _write(
        tmp_path / "0.jsonl",
        0,
        [("ok", "poll", {"records": [[0, 0, "probe-0-0", 1], [1, 4, "v000001", 1]]})],
    )
    assert probed(tmp_path) == {0}
    _write(tmp_path / "1.jsonl", 1, [("ok", "poll", {"records": [[2, 1, "probe-2-1", 1]]})])
    assert probed(tmp_path) == {0, 2}


def test_the_report_plots_each_share_partition_s_start_offset() -> None:
    points = REPORT.series[-1].points()
    monitor = {"process": "share-monitor", "type": "ok", "f": "start-offsets"}
    got = points({**monitor, "value": {"partitions": [[0, 12], [1, None], [3, 0]]}})
    assert got == [("partition 0", 12.0), ("partition 3", 0.0)]
    final = {"process": "final", "type": "ok", "f": "share-state"}
    rows = [{"partition": 0, "start": 40, "end": 40}, {"partition": 1, "start": None}]
    assert points({**final, "value": {"partitions": rows}}) == [("partition 0", 40.0)]
    assert points({**monitor, "type": "info", "value": {}}) is None
    assert points({"process": 0, "type": "ok", "f": "poll", "value": {}}) is None


def test_the_seeder_follows_partitions_added_under_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seeder's count of partitions grows with the topic's metadata and never shrinks;
    a metadata request that fails changes nothing."""
    from types import SimpleNamespace

    from common.waits import wait_for
    from workloads import seeder

    monkeypatch.setattr(seeder, "FOLLOW_S", 0.01)
    answers: list[Any] = [5, RuntimeError("brokers away"), 4]

    class Producer:
        def list_topics(self, topic: str, timeout: float) -> Any:
            answer = answers.pop(0) if answers else 4
            if isinstance(answer, Exception):
                raise answer
            parts = {p: None for p in range(answer)}
            return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=parts)})

    s = seeder.Seeder("b:1", "in", 3, tmp_path / "seeder.jsonl", values=1)
    stop = threading.Event()
    follower = threading.Thread(target=s._follow, args=(Producer(), stop))
    follower.start()
    try:
        wait_for(lambda: not answers, timeout=10, what="every answer read")
        assert s.partitions == 5
    finally:
        stop.set()
        follower.join(timeout=10)
    assert not follower.is_alive()


def test_a_group_setting_the_brokers_do_not_know_is_named_from_their_answer() -> None:
    from workloads.share.state import _unknown_name

    answer = (
        'KafkaError{code=INVALID_CONFIG,val=40,str="Unknown group config name: '
        'share.delivery.count.limit"}'
    )
    assert _unknown_name(answer) == "share.delivery.count.limit"
    assert _unknown_name("KafkaError{code=_TIMED_OUT}") is None
