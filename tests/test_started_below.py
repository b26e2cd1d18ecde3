"""``started-below-committed`` by the reference on hand-made transactions, and finding F5's
signature on hand-made verdicts (both engines on real histories: tests/test_eos_checks.py)."""

from __future__ import annotations

from typing import Any

from checkers.eos import assignments as A
from checkers.findings import finding_lines, known_findings

Invokes = dict[tuple[int, int], tuple[int, list[tuple[int, int, str | None]]]]
Dones = dict[tuple[int, int], tuple[int, str, list[tuple[int, int]]]]


def _run(
    first_offset: int, commit_done_at: int, *, reassign: bool = False
) -> tuple[list[A.Rebalance], Invokes, Dones]:
    """Instance 1 commits partition 0 up to 8 (its transaction completes at
    ``commit_done_at``); instance 2 is given partition 0 at index 10 and reads it from
    ``first_offset`` at 20; instance 3's transaction over partition 0 (index 9) never ends."""
    rebalances: list[A.Rebalance] = [(1, 1, "assign", 1, [0])]
    if reassign:
        rebalances += [(2, 6, "assign", 2, [0, 1]), (2, 8, "revoke", 2, [0, 1])]
    rebalances.append((2, 10, "assign", 3, [0]))
    invokes: Invokes = {
        (1, 1): (2, [(0, o, f"v{o}") for o in range(8)]),
        (3, 1): (9, [(0, 8, "v8")]),
        (2, 1): (20, [(0, o, f"v{o}") for o in range(first_offset, first_offset + 4)]),
    }
    dones: Dones = {(1, 1): (commit_done_at, "ok", [(0, 8)])}
    return rebalances, invokes, dones


def test_a_start_below_an_offset_committed_before_the_assignment_is_one_case() -> None:
    rebalances, invokes, dones = _run(0, 5, reassign=True)
    (fact,) = A.reference_facts(rebalances, invokes, dones)
    assert (fact.instance, fact.partition, fact.first_offset, fact.committed) == (2, 0, 0, 8)
    assert fact.committed_by == (1, 1, 5) and fact.pending == (3, 1, 9, 9, None)
    ((ex, idx),) = A.examples([fact], rebalances, 8)
    assert ex["values"] == ["v0", "v1", "v2"]
    # It waited from its first assignment of partition 0 (index 6) through a revoke.
    assert [w["index"] for w in ex["waited"]] == [6, 8, 10]
    assert sorted(idx) == [5, 6, 8, 9, 10, 20]


def test_a_start_at_the_committed_offset_or_after_a_later_commit_is_none() -> None:
    assert A.reference_facts(*_run(8, 5)) == []
    # Committed after the member was told of the partition: it may have fetched before.
    assert A.reference_facts(*_run(0, 15)) == []


def test_a_start_at_an_offset_the_group_moved_back_to_is_none() -> None:
    """Instance 2 starts below 8 and commits 4 (moving the group's offset back); instance 4,
    given the partition later, starts at 4: right, and not a second case. Had instance 2's
    commit raced instance 1's (invoked before it completed), either could be the last, and
    a start at 4 is still not below it for certain."""
    rebalances, invokes, dones = _run(0, 5, reassign=True)
    dones[(2, 1)] = (21, "ok", [(0, 4)])
    rebalances.append((4, 30, "assign", 4, [0]))
    invokes[(4, 1)] = (31, [(0, 4, "v4")])
    assert [(f.instance, f.committed) for f in A.reference_facts(rebalances, invokes, dones)] == [
        (2, 8)
    ]
    # Instance 2's transaction invoked before instance 1's commit completed (its read is then
    # before its assignment: no case of its own either).
    invokes[(2, 1)] = (4, invokes[(2, 1)][1])
    facts = A.reference_facts(rebalances, invokes, dones)
    assert [(f.instance, f.committed) for f in facts] == []
    # ... while a start below both is a case, measured against the lower.
    invokes[(4, 1)] = (31, [(0, 2, "v2")])
    facts = A.reference_facts(rebalances, invokes, dones)
    assert [(f.instance, f.first_offset, f.committed) for f in facts] == [(4, 2, 4)]


def test_f5_s_window_is_counted_where_a_member_was_given_a_pending_partition() -> None:
    """Instance 2 is given partition 0 at 10 while instance 3's transaction over it (invoked at
    9) never completes, and reads it at 20: one assignment in the window. A revoke and a new
    assignment at 15 and 16 change it before the read: two in the window, one changed."""
    rebalances, invokes, dones = _run(8, 5, reassign=True)
    assert A.pending_waits(rebalances, invokes, dones) == (1, 0)
    rebalances += [(2, 15, "revoke", 3, [0]), (2, 16, "assign", 4, [0])]
    assert A.pending_waits(rebalances, invokes, dones) == (2, 1)
    # Once instance 3's transaction completed before the assignment, nothing was pending.
    invokes[(3, 1)] = (3, invokes[(3, 1)][1])
    dones[(3, 1)] = (4, "ok", [(0, 9)])
    assert A.pending_waits(rebalances, invokes, dones) == (0, 0)


def _verdict(waited: int, pending: bool, copy_by: str = "2") -> dict[str, Any]:
    start = {
        "instance": 2,
        "partition": 0,
        "first_read": {"offset": 0},
        "committed": {"offset": 8},
        "waited": [{"index": i} for i in range(waited)],
    }
    if pending:
        start["pending"] = {"txn": [3, 1]}
    dup = {"records": [{"headers": {"instance": i, "src-partition": "0"}} for i in ("1", copy_by)]}
    return {
        "valid": False,
        "checkers": {
            "started-below-committed": {"valid": False, "examples": [start]},
            "duplicate": {"valid": False, "examples": [dup]},
        },
    }


def test_f5_is_named_only_for_its_whole_signature() -> None:
    (f5,) = known_findings(_verdict(3, True))
    assert f5["id"] == "F5" and f5["link"] == "docs/findings.md#f5"
    assert "instance 2 read partition 0 from offset 0, below the committed 8" in f5["evidence"][0]
    assert finding_lines({"known_findings": [f5]}) == [
        f"known finding F5: {f5['title']} (docs/findings.md#f5)"
    ]
    assert known_findings(_verdict(1, True)) == []  # no rebalance during the wait
    assert known_findings(_verdict(3, False)) == []  # nothing pending to wait on
    assert known_findings(_verdict(3, True, copy_by="5")) == []  # the copies are another's
    assert known_findings({**_verdict(3, True), "valid": True}) == []


def test_the_report_and_the_summary_name_a_known_finding(tmp_path: Any) -> None:
    import io
    import json

    from rich.console import Console

    from harness.report import write_report
    from harness.run.summary import print_summary

    verdict = _verdict(3, True)
    verdict["known_findings"] = known_findings(verdict)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"workload": "eos", "test_name": "f5"}))
    (run / "results.json").write_text(json.dumps(verdict))
    page = write_report(run).read_text()
    assert 'id="known-f5"' in page and "Known finding F5" in page and "docs/findings.md#f5" in page
    out = io.StringIO()
    print_summary(verdict, run, None, console=Console(file=out, width=200))
    assert "known finding F5: librdkafka starts a partition" in out.getvalue()
