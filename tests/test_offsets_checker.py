"""The offsets checker on histories of known shape: a correct run is valid, a planted lost
commit is found with exactly the example planted, what the rule must not compare (a read
concurrent with a commit, a commit of unknown outcome) is not flagged, and the two engines'
whole results are equal.

No Kafka: each history is recorded as a real one (``history.Recorder`` per committer, merged,
with ``config.json`` beside it), in the order its ops are written here, so a test reads as the
interleaving it plants. The plain-Python tests are unmarked; the engine-equality tests start
Spark and are marked ``spark``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checkers import anomalies as A
from checkers.offsets.run import check_offsets
from checkers.suites import SUITES, RunContext
from history import Recorder, merge_histories
from history.logdump import CheckerInputError

TOPIC = "offsets-in"
OPTIONS: dict[str, Any] = {"groups": 3, "topic": TOPIC, "variant": "correct"}


class Run:
    """An offsets run being recorded: one committer process per group (a second process of a
    group stands for a successor, or for a read concurrent with a commit)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs = root / "processes"
        self.procs.mkdir(parents=True)
        self.recs: dict[int, Recorder] = {}

    def rec(self, process: int, group: str) -> Recorder:
        if process not in self.recs:
            meta = {"workload": "offsets", "role": "committer", "group": group}
            self.recs[process] = Recorder(self.procs / f"{process}.jsonl", process, meta)
        return self.recs[process]

    def commit(self, process: int, group: str, offset: int, how: str = "ok") -> None:
        """A whole commit: ``how`` ``ok`` (acknowledged), ``info``, ``fail`` or ``open``."""
        self.commit_invoke(process, group, offset)
        if how != "open":
            self.commit_done(process, group, offset, how)

    def commit_invoke(self, process: int, group: str, offset: int) -> None:
        value = {"group": group, "topic": TOPIC, "partition": 0, "offset": offset}
        self.rec(process, group).invoke("commit", value)

    def commit_done(self, process: int, group: str, offset: int, how: str = "ok") -> None:
        rec = self.rec(process, group)
        value = {"group": group, "topic": TOPIC, "partition": 0, "offset": offset}
        if how == "ok":
            rec.ok("commit", value)
        elif how == "info":
            rec.info("commit", value, "REQUEST_TIMED_OUT")
        else:
            rec.fail("commit", value, "NOT_COORDINATOR")

    def read(self, process: int, group: str, offset: int | None, how: str = "ok") -> None:
        self.read_invoke(process, group)
        self.read_done(process, group, offset, how)

    def read_invoke(self, process: int, group: str) -> None:
        self.rec(process, group).invoke("read", {"group": group, "topic": TOPIC, "partition": 0})

    def read_done(self, process: int, group: str, offset: int | None, how: str = "ok") -> None:
        rec, value = self.rec(process, group), {"group": group, "topic": TOPIC, "partition": 0}
        if how == "ok":
            rec.ok("read", {**value, "offset": offset})
        else:
            rec.info("read", value, "COORDINATOR_LOAD_IN_PROGRESS")

    def register(
        self, process: int, group: str, offsets: range, *, last: int | None = None
    ) -> None:
        """A correct committer: read, commit, read, commit, ..., a final read."""
        seen: int | None = None
        for offset in offsets:
            self.read(process, group, seen)
            self.commit(process, group, offset)
            seen = offset
        self.read(process, group, seen if last is None else last)

    def finish(self) -> Path:
        for r in self.recs.values():
            r.close()
        merged = self.root / "history.jsonl"
        merge_histories(
            sorted(self.procs.glob("*.jsonl")), merged, meta={"workload_options": OPTIONS}
        )
        config = {"workload": "offsets", "checker_suites": ["offsets"], "workload_options": OPTIONS}
        (self.root / "config.json").write_text(json.dumps(config))
        return self.root


def correct(run: Run) -> None:
    """Three groups committing 1..4 and reading each back, with a refused commit, one of
    unknown outcome (then committed again, as the committer does), and a read that raised."""
    run.register(0, "g0", range(1, 5))
    run.read(1, "g1", None)
    run.commit(1, "g1", 1, how="fail")
    run.read(1, "g1", None)
    run.commit(1, "g1", 1, how="info")
    run.read(1, "g1", 1, how="info")
    run.read(1, "g1", 1)
    run.commit(1, "g1", 2)
    run.read(1, "g1", 2)
    run.register(2, "g2", range(5, 8))


def _lost(run: Run) -> None:
    """KAFKA-20634: offset 3 acknowledged, then read back as 2."""
    run.register(0, "g0", range(1, 3))
    run.commit(0, "g0", 3)
    run.read(0, "g0", 2)
    run.register(1, "g1", range(1, 4))


def _lost_to_nothing(run: Run) -> None:
    """The group's only commit acknowledged, then no committed offset at all."""
    run.read(0, "g0", None)
    run.commit(0, "g0", 0)
    run.read(0, "g0", None)


def _concurrent(run: Run) -> None:
    """A read (another process of the group) invoked while the commit of 3 was in flight
    returns 2: the commit may be applied after the read was answered."""
    run.register(0, "g0", range(1, 3))
    run.commit_invoke(0, "g0", 3)
    run.read_invoke(1, "g0")
    run.commit_done(0, "g0", 3)
    run.read_done(1, "g0", 2)
    run.read(0, "g0", 3)


def _unknown(run: Run) -> None:
    """Commits of 3 that timed out, were refused or never returned are not acknowledged:
    reading 2 back loses nothing."""
    run.register(0, "g0", range(1, 3))
    run.commit(0, "g0", 3, how="info")
    run.read(0, "g0", 2)
    run.commit(0, "g0", 3, how="fail")
    run.read(0, "g0", 2)
    run.register(1, "g1", range(1, 3))
    run.commit(1, "g1", 3, how="open")  # the committer died; its successor reads 2
    run.read(2, "g1", 2)


def _twice_then_again(run: Run) -> None:
    """Two reads show 3 lost (counted once, the first read shown); a later commit of 5 is
    lost to a read of 4 (a second count); g1's last commit is never read back (a note)."""
    run.register(0, "g0", range(1, 3))
    run.commit(0, "g0", 3)
    run.read(0, "g0", 2)
    run.read(0, "g0", 2)
    run.commit(0, "g0", 4)
    run.read(0, "g0", 4)
    run.commit(0, "g0", 5)
    run.read(0, "g0", 4)
    run.read(1, "g1", None)
    run.commit(1, "g1", 1)


def _unread(run: Run) -> None:
    """g0's final read raised and g1's committer died after its commit: valid, with a note."""
    run.register(0, "g0", range(1, 3))
    run.commit(0, "g0", 3)
    run.read(0, "g0", None, how="info")
    run.register(1, "g1", range(1, 3))
    run.commit(1, "g1", 3)
    run.register(2, "g2", range(1, 3))


def planted(plant: Callable[[Run], None]) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        run = Run(root)
        plant(run)
        return run.finish()

    return build


#: name -> (history builder, the counts it must give).
SCENARIOS: dict[str, tuple[Callable[[Path], Path], dict[str, int]]] = {
    "correct": (planted(correct), {}),
    "lost": (planted(_lost), {"lost-commit": 1}),
    "lost-to-nothing": (planted(_lost_to_nothing), {"lost-commit": 1}),
    "concurrent": (planted(_concurrent), {}),
    "unknown": (planted(_unknown), {}),
    "twice-then-again": (planted(_twice_then_again), {"lost-commit": 2}),
    "unread": (planted(_unread), {}),
}


def judged(tmp_path: Path, name: str, **kw: Any) -> dict[str, Any]:
    return check_offsets(SCENARIOS[name][0](tmp_path / name), engine="python", **kw)


def op_shapes(example: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [(op["f"], op["type"], op["value"].get("offset", "-")) for op in example["ops"]]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_planted_history_gives_exactly_what_was_planted(tmp_path: Path, name: str) -> None:
    result = judged(tmp_path, name)
    assert result["checker"] == "offsets"
    assert result["anomalies"] == SCENARIOS[name][1]
    assert result["valid"] is (not SCENARIOS[name][1])


def test_a_correct_run_is_valid_and_its_figures_are_counted(tmp_path: Path) -> None:
    result = judged(tmp_path, "correct")
    assert result["valid"] is True and result["anomalies"] == {} and result["examples"] == {}
    assert result["stats"] == {
        "commits_acknowledged": 8,
        "commits_unknown": 1,
        "commits_refused": 1,
        "reads_ok": 13,
        "groups": 3,
        "unread": 0,
        "variant": "correct",
    }
    assert "notes" not in result


def test_an_acknowledged_commit_read_back_lower_is_lost(tmp_path: Path) -> None:
    result = judged(tmp_path, "lost")
    (example,) = result["examples"]["lost-commit"]
    assert {k: v for k, v in example.items() if k != "ops"} == {
        "values": [f"g0/{TOPIC}-0@3"],
        "group": "g0",
        "topic": TOPIC,
        "partition": 0,
        "acknowledged_offset": 3,
        "read_offset": 2,
    }
    assert op_shapes(example) == [
        ("commit", "invoke", 3),
        ("commit", "ok", 3),
        ("read", "invoke", "-"),
        ("read", "ok", 2),
    ]
    assert [op["process"] for op in example["ops"]] == [0, 0, 0, 0]


def test_a_null_read_after_an_acknowledged_commit_is_a_loss(tmp_path: Path) -> None:
    result = judged(tmp_path, "lost-to-nothing")
    (example,) = result["examples"]["lost-commit"]
    assert (example["acknowledged_offset"], example["read_offset"]) == (0, None)
    assert example["values"] == [f"g0/{TOPIC}-0@0"]


def test_a_read_invoked_before_the_commit_completed_is_not_compared_with_it(
    tmp_path: Path,
) -> None:
    result = judged(tmp_path, "concurrent")
    assert result["valid"] is True and result["anomalies"] == {}


def test_a_commit_of_unknown_outcome_or_refused_is_not_acknowledged(tmp_path: Path) -> None:
    result = judged(tmp_path, "unknown")
    assert result["valid"] is True and result["anomalies"] == {}
    stats = result["stats"]
    assert (stats["commits_unknown"], stats["commits_refused"]) == (2, 1)


def test_each_lost_commit_counts_once_and_examples_are_in_order(tmp_path: Path) -> None:
    root = SCENARIOS["twice-then-again"][0](tmp_path / "run")
    result = check_offsets(root, engine="python")
    examples = result["examples"]["lost-commit"]
    assert [(e["acknowledged_offset"], e["read_offset"]) for e in examples] == [(3, 2), (5, 4)]
    first_read = examples[0]["ops"][2]["index"]
    reads = [e["ops"][2]["index"] for e in examples]
    assert reads[0] == first_read < reads[1]
    assert result["stats"]["unread"] == 1
    assert result["notes"] == ["1 group's last acknowledged commit was never read back, so its "
                               "loss could not show: g1"]  # fmt: skip
    bounded = check_offsets(root, engine="python", max_examples=1)
    assert bounded["anomalies"] == {"lost-commit": 2}
    assert bounded["examples"]["lost-commit"] == examples[:1]


def test_a_group_whose_last_commit_was_never_read_back_is_a_note(tmp_path: Path) -> None:
    result = judged(tmp_path, "unread")
    assert result["valid"] is True and result["stats"]["unread"] == 2
    assert result["notes"] == ["2 groups' last acknowledged commit was never read back, so its "
                               "loss could not show: g0, g1"]  # fmt: skip


def test_a_history_without_committers_cannot_be_judged(tmp_path: Path) -> None:
    run = Run(tmp_path / "run")
    rec = run.rec(0, "g0")
    rec.invoke("exit", {"reason": "sigterm"})
    rec.ok("exit", {"reason": "sigterm"})
    result = check_offsets(run.finish(), engine="python")
    assert result["valid"] == "unknown" and result["anomalies"] == {}
    assert "no committer ops" in result["error"]


@pytest.mark.parametrize(
    ("plant", "says"),
    [
        (lambda r: r.rec(0, "g0").invoke("commit", {"group": "g0", "topic": TOPIC,
                                                    "partition": 0, "offset": "3"}),
         r"op 0 \(0 commit invoke\): malformed: offset must be a non-negative int, got '3'"),
        (lambda r: (r.read_invoke(0, "g0"), r.rec(0, "g0").ok("read", {"group": "g0"})),
         r"op 1 \(0 read ok\): malformed: offset must be a non-negative int or null, got nothing"),
        (lambda r: r.rec(0, "g0").ok("commit", None),
         r"op 0 \(0 commit ok\): malformed: a commit completion with no commit invocation open"),
        (lambda r: (r.commit_invoke(0, "g0", 4), r.commit_done(0, "g1", 4)),
         r"op 1 \(0 commit ok\): malformed: group 'g1' answers an invocation of 'g0'"),
    ],
)  # fmt: skip
def test_a_malformed_op_is_refused_in_one_line(
    tmp_path: Path, plant: Callable[[Run], Any], says: str
) -> None:
    run = Run(tmp_path / "run")
    plant(run)
    root = run.finish()
    with pytest.raises(CheckerInputError, match=says) as caught:
        check_offsets(root, engine="python")
    assert "\n" not in str(caught.value)


def test_a_line_that_is_not_json_is_refused(tmp_path: Path) -> None:
    root = planted(_lost)(tmp_path / "run")
    history = root / "history.jsonl"
    lines = history.read_text().splitlines(keepends=True)
    history.write_text("".join([*lines[:3], "{not json\n", *lines[3:]]))
    with pytest.raises(CheckerInputError, match=r"history\.jsonl:4"):
        check_offsets(root, engine="python")


def test_the_type_is_defined_once_and_documented() -> None:
    assert A.names(A.OFFSETS) == ("lost-commit",)
    (t,) = A.OFFSETS
    assert t.checker == "offsets" and t.example[0] == "values" and t.example[-1] == "ops"
    assert A.lookup("offsets", "lost-commit") is t and not t.allowed
    found = A.found({"checkers": {"offsets": {"valid": False, "anomalies": {"lost-commit": 1}}}})
    assert found == [("offsets", "lost-commit", 1)]
    docs = (Path(__file__).resolve().parents[1] / "docs" / "anomalies.md").read_text()
    section = docs[docs.index("## offsets workload") :]
    assert "`lost-commit`" in section and "KAFKA-20634" in section


def test_the_suite_s_python_twin_is_the_reference(tmp_path: Path) -> None:
    root = planted(_lost)(tmp_path / "run")
    config = json.loads((root / "config.json").read_text())
    suite = SUITES["offsets"]
    assert suite.python is not None and suite.spark
    part = suite.python(RunContext(root, config=config))
    assert part == {"checkers": {"offsets": check_offsets(root, engine="python")}}


# ------------------------------------------------------------------------------------------
# The engine of record against the reference


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_spark_and_the_reference_give_equal_results(spark: Any, tmp_path: Path, name: str) -> None:
    """Whole results, examples and their ops included; one example at most where there are
    two, so both engines must cut the list at the same place."""
    root = SCENARIOS[name][0](tmp_path / name)
    for n in (1, 8):
        py = check_offsets(root, engine="python", max_examples=n)
        sp = check_offsets(root, spark=spark, max_examples=n)
        assert py == sp
        assert sp["anomalies"] == SCENARIOS[name][1]


@pytest.mark.spark
def test_the_offsets_suite_judges_a_run_directory_on_spark(spark: Any, tmp_path: Path) -> None:
    root = planted(_twice_then_again)(tmp_path / "run")
    config = json.loads((root / "config.json").read_text())
    part = SUITES["offsets"].run(RunContext(root, config=config, spark=spark))
    assert part["checkers"]["offsets"]["anomalies"] == {"lost-commit": 2}
    assert part["checkers"]["offsets"] == check_offsets(root, engine="python")
