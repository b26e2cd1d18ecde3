"""The Go (franz-go) and Node.js (KafkaJS, Confluent's JavaScript client) clients judged on a
real cluster: a broken variant on each is caught, and KafkaJS's processors made zombies commit
inputs their successors already committed (docs/findings.md, F7), which the verdict names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from checkers.contract import check_run
from checkers.findings import finding_lines


@pytest.mark.cluster
def test_a_kafkajs_zombie_commits_beside_its_successor_and_the_verdict_names_f7(
    scenario: Any, spark: Any
) -> None:
    """The transaction timeout is a minute, so the coordinator cannot abort the zombie's
    transaction on its own while it is paused: what is left to fence it is the group
    metadata KafkaJS does not send. The pause is 20 s, not cut short by the time limit: its
    successor commits the same inputs about 10 s into it on a quiet machine, later on a
    loaded one (a 10 s pause was once too short)."""
    verdict, result, report = scenario(
        "eos", "f7-kafkajs", client="kafkajs", nemesis="zombie", time_limit=32,
        interval=10.0, duration=20.0, session_timeout_ms=6000, transaction_timeout_ms=60000,
        correct=False,
    )  # fmt: skip
    assert verdict["valid"] is False, report
    # KafkaJS's OffsetFetch (v4 at most) cannot ask for stable offsets (KIP-447's
    # require_stable, v7), so a member given a partition whose last commit's markers are not
    # written yet may also start below it: ``started-below-committed`` now and then, beside.
    assert "duplicate" in verdict["anomalies"], (verdict["anomalies"], report)
    others = set(verdict["anomalies"]) - {"duplicate", "started-below-committed"}
    assert not others, (verdict["anomalies"], report)
    (f7,) = verdict["known_findings"]
    assert f7["id"] == "F7" and "with no generation in the offset commit" in f7["evidence"][0]
    assert any(line.startswith("known finding F7: ") for line in finding_lines(verdict))
    assert 'id="known-f7"' in report.read_text()
    assert check_run(result.run_dir) == []  # the processors kept the contract


@pytest.mark.cluster
@pytest.mark.parametrize("client", ["franz-go", "kafkajs", "confluent-js"])
def test_the_read_uncommitted_variant_of_each_new_client_is_caught(
    scenario: Any, spark: Any, client: str
) -> None:
    """Broken on purpose: the processors read what the seeder's aborted transactions wrote
    (its poison values), and the checkers say so. On the worker's shared cluster, with names
    of its own (the scenario fixture of the pytest plugin)."""
    verdict, _result, report = scenario(
        "eos", f"ru-{client}", client=client, variant="read-uncommitted", time_limit=8
    )
    assert verdict["valid"] is False, report
    assert verdict["anomalies"].get("aborted-read", 0) >= 1, (verdict["anomalies"], report)
    if client == "franz-go":
        # franz-go asks for its producer id lazily; the processor asks before its start ok,
        # the moment the checkers take for the producer holding its transactional id.
        starts = [
            op["value"]
            for path in (report.parent / "processes").glob("*.jsonl")
            for op in map(json.loads, path.read_text().splitlines()[1:])
            if op["f"] == "start" and op["type"] == "ok"
        ]
        assert starts and all(s["producer_id"] >= 0 for s in starts), starts
