"""The streams checker on facts of known shape: a correct run is valid, every planted anomaly
is found by both engines, and the two engines' whole results are equal."""

from __future__ import annotations

import copy
import gzip
from pathlib import Path
from typing import Any

from checkers.streams.facts import StreamsFacts, read_facts
from checkers.streams.run import judge_facts
from history.streams_records import aggregate_value, group_key, number

OPTIONS = {
    "input_topic": "in",
    "output_topic": "out",
    "aggregate_topic": "agg",
    "changelog_topic": "app-aggregates-changelog",
    "groups": 2,
    "guarantee": "exactly_once_v2",
}


def correct(partitions: int = 2, per_partition: int = 12) -> StreamsFacts:
    """What a correct application leaves: every input once in the output, every aggregate
    update the count and sum of its key's inputs so far, the changelog's last value the
    total, offsets committed past everything."""
    facts = StreamsFacts(dict(OPTIONS), drained=True)
    totals: dict[str, tuple[int, int]] = {}
    agg_offsets = [0, 0]
    change_offsets = [0, 0]
    i = 0
    for o in range(per_partition):
        for p in range(partitions):
            v = f"v{i:06d}"
            i += 1
            facts.inputs.append((p, o, v))
            facts.outputs.append((p, o, v, "out-" + v, p, o, v))
            k = group_key(v, p, 2)
            c, s = totals.get(k, (0, 0))
            totals[k] = (c + 1, s + number(v))
            ap = hash(k) % 2
            facts.aggregates.append((ap, agg_offsets[ap], k, aggregate_value(*totals[k]), p, o, v))
            agg_offsets[ap] += 1
            facts.changelog.append((p, change_offsets[p], k, aggregate_value(*totals[k])))
            change_offsets[p] += 1
        facts.committed = {p: per_partition for p in range(partitions)}
    return facts


def both(spark: Any, facts: StreamsFacts, max_examples: int = 3) -> dict[str, Any]:
    py = judge_facts(facts, engine="python", max_examples=max_examples)
    sp = judge_facts(facts, spark=spark, max_examples=max_examples)
    assert py == sp
    return py


def test_a_correct_run_is_valid(spark: Any) -> None:
    result = both(spark, correct())
    assert result["valid"] is True, result
    assert result["stats"]["inputs"] == 24


def test_an_input_processed_twice_is_a_duplicate_and_a_double_count(spark: Any) -> None:
    facts = correct()
    p, _o, k, _v, sp, so, sv = next(a for a in facts.aggregates if a[5] == 3)
    facts.outputs.append((0, 99, "out-" + sv, "out-" + sv, sp, so, sv))
    # The second copy of the update counted the input again.
    later = [a for a in facts.aggregates if a[2] == k]
    c, s = map(int, later[-1][3].split(","))
    facts.aggregates.append((p, 999, k, aggregate_value(c + 1, s + number(sv)), sp, so, sv))
    result = both(spark, facts)
    assert result["anomalies"]["duplicate"] == 2  # one extra output, one extra update
    wrong = result["examples"]["wrong-aggregate"][0]
    assert wrong["kind"] == "counted-twice" and wrong["value"] == sv
    assert result["anomalies"]["wrong-final-aggregate"] == 1


def test_an_update_that_skipped_an_input_is_named(spark: Any) -> None:
    facts = correct()
    n = next(i for i, a in enumerate(facts.aggregates) if a[5] == 5)
    p, o, k, value, sp, so, sv = facts.aggregates[n]
    c, s = map(int, value.split(","))
    facts.aggregates[n] = (p, o, k, aggregate_value(c - 1, s - number(sv)), sp, so, sv)
    result = both(spark, facts)
    assert result["anomalies"] == {"wrong-aggregate": 1}
    assert result["examples"]["wrong-aggregate"][0]["kind"] == "skipped"


def test_an_output_of_an_aborted_input_is_an_aborted_read(spark: Any) -> None:
    facts = correct()
    facts.outputs.append((1, 50, "x000001", "out-x000001", 1, 40, "x000001"))
    result = both(spark, facts)
    assert result["anomalies"] == {"aborted-read": 1}
    assert result["examples"]["aborted-read"][0]["value"] == "x000001"


def test_an_input_below_the_committed_offset_without_output_is_lost(spark: Any) -> None:
    facts = correct()
    gone = facts.outputs.pop(4)
    result = both(spark, facts)
    assert result["anomalies"] == {"lost": 1}
    ex = result["examples"]["lost"][0]
    assert (ex["partition"], ex["offset"], ex["topic"]) == (gone[4], gone[5], "out")


def test_an_input_above_the_committed_offset_is_not_lost(spark: Any) -> None:
    facts = correct()
    facts.outputs = [r for r in facts.outputs if not (r[4] == 1 and r[5] == 11)]
    facts.aggregates = [r for r in facts.aggregates if not (r[4] == 1 and r[5] == 11)]
    facts.changelog = [r for r in facts.changelog if not (r[0] == 1 and r[1] == 11)]
    facts.committed[1] = 11
    facts.drained = False
    result = both(spark, facts)
    assert result["valid"] is True, result
    assert any("did not drain" in n for n in result["notes"])


def test_a_changelog_behind_the_output_is_a_mismatch(spark: Any) -> None:
    facts = correct()
    facts.changelog.pop()
    result = both(spark, facts)
    assert result["anomalies"] == {"changelog-mismatch": 1}


def test_a_drain_that_timed_out_is_a_progress_anomaly(spark: Any) -> None:
    facts = correct()
    facts.incomplete = ["the application did not commit past every input in time"]
    result = both(spark, facts)
    assert result["anomalies"] == {"progress": 1}


def test_an_incomplete_read_cannot_be_judged(spark: Any) -> None:
    facts = correct()
    facts.outputs = facts.outputs[:5]  # what an incomplete read would leave
    facts.unread = ["out[1]"]
    result = both(spark, facts)
    assert result["valid"] == "unknown" and result["anomalies"] == {}
    assert "incomplete final reads: out[1]" in result["error"]


def test_examples_are_bounded_and_counts_are_not(spark: Any) -> None:
    facts = correct()
    base = copy.deepcopy(facts.outputs)
    facts.outputs += [(r[0], r[1] + 100, r[2], r[3], r[4], r[5], r[6]) for r in base]
    result = both(spark, facts, max_examples=2)
    assert result["anomalies"] == {"duplicate": 24}
    assert len(result["examples"]["duplicate"]) == 2


DATA = Path(__file__).resolve().parent / "data" / "streams"


def _kept(name: str, tmp_path: Path) -> Path:
    run = tmp_path / name
    run.mkdir()
    with gzip.open(DATA / f"{name}.history.jsonl.gz", "rb") as src:
        (run / "history.jsonl").write_bytes(src.read())
    return run


def test_a_real_at_least_once_run_under_kills_is_caught_by_both_engines(
    spark: Any, tmp_path: Path
) -> None:
    """Kafka 4.4.0, two instances, at_least_once, SIGKILLs every 6 s: replayed inputs after
    each kill (duplicates, updates counted twice) and poison inputs read uncommitted."""
    facts = read_facts(_kept("streams-alo-kills", tmp_path) / "history.jsonl")
    result = both(spark, facts)
    assert result["valid"] is False
    assert {"duplicate", "wrong-aggregate", "aborted-read"} <= set(result["anomalies"])
    kinds = {e["kind"] for e in result["examples"]["wrong-aggregate"]}
    assert "counted-twice" in kinds, result["examples"]


def test_a_real_exactly_once_run_under_kills_and_a_zombie_is_valid_in_both_engines(
    spark: Any, tmp_path: Path
) -> None:
    """Kafka 4.4.0, two instances, exactly_once_v2, an instance SIGKILLed and one paused past
    its session timeout (seed 7): every input once, every update right."""
    facts = read_facts(_kept("streams-eos-kills-zombie", tmp_path) / "history.jsonl")
    result = both(spark, facts)
    assert result["valid"] is True, result
    assert result["stats"]["inputs"] == 1200 and result["stats"]["drained"] is True
