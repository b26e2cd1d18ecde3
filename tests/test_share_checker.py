"""The share checker on histories of known shape: a correct run is valid, every planted
anomaly is found with exactly the count and the example planted, and the two engines' whole
results are equal.

No Kafka: each history is recorded as a real one (``history.Recorder`` per process, merged,
with ``config.json`` beside it), in the order its ops are written here, so a test reads as the
interleaving it plants. The plain-Python tests are unmarked; the engine-equality tests start
Spark and are marked ``spark``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checkers import anomalies as A
from checkers.share.run import check_share
from checkers.suites import SUITES, RunContext
from history import Recorder, merge_histories
from history.logdump import CheckerInputError

OPTIONS: dict[str, Any] = {
    "members": 3,
    "partitions": 2,
    "input_topic": "in",
    "output_topic": "out",
    "group_id": "share-g",
    "lock_ms": 1000,
    "delivery_limit": 3,
    "isolation": "read_committed",
    "release_p": 0.1,
    "reject_p": 0.05,
    "max_records": 10,
    "variant": "correct",
}


class Run:
    """A share run being recorded: the seeder, the members, the final process."""

    def __init__(self, root: Path, **options: Any) -> None:
        self.root = root
        self.procs = root / "processes"
        self.procs.mkdir(parents=True)
        self.options = {**OPTIONS, **options}
        self.recs: dict[Any, Recorder] = {}
        self.where: dict[str, tuple[int, int]] = {}
        self.ends = [0, 0]
        self.written: list[tuple[str, int, int, int]] = []  # value, src p, src o, member

    def rec(self, process: Any) -> Recorder:
        if process not in self.recs:
            self.recs[process] = Recorder(self.procs / f"{process}.jsonl", process)
        return self.recs[process]

    def send(self, *values: str, acked: bool = True) -> None:
        rec, rows = self.rec("seeder"), []
        for v in values:
            p = int(v[1:]) % 2
            rows.append([v, p, self.ends[p] if acked else None])
            if acked:
                self.where[v] = (p, self.ends[p])
                self.ends[p] += 1
        rec.invoke("send", {"values": [r[:2] for r in rows]})
        if acked:
            rec.ok("send", {"values": rows})
        else:
            error = {"code": "UNACKNOWLEDGED", "message": "timed out", "count": len(rows)}
            rec.info("send", {"values": rows}, error)

    def probe(self, *values: str, acked: bool = True) -> None:
        """The supervisor's probes (``--share-offset-reset latest``): one per value, on
        partition 1, after every committed value there."""
        rec, rows = self.rec("supervisor"), []
        for value in values:
            rows.append([value, 1, self.ends[1] if acked else None])
            if acked:
                self.where[value] = (1, self.ends[1])
                self.ends[1] += 1
        rec.invoke("probe", {"values": [r[:2] for r in rows]})
        rec.ok("probe", {"values": rows})

    def send_aborted(self, v: str, p: int = 0) -> None:
        rec = self.rec("seeder")
        rec.invoke("send-aborted", {"values": [[v, p]]})
        error = {"code": "DELIBERATE_ABORT", "message": "aborted on purpose"}
        rec.fail("send-aborted", {"values": [[v, p, None]]}, error)

    def poll(self, member: int, *got: tuple[Any, ...]) -> None:
        """``got``: (value, count), or (value, count, partition, offset) for a value the
        seeder did not acknowledge."""
        rows = []
        for g in got:
            p, o = self.where.setdefault(g[0], g[2:]) if len(g) > 2 else self.where[g[0]]
            rows.append([p, o, g[0], g[1]])
        self.rec(member).invoke("poll", None)
        self.rec(member).ok("poll", {"records": rows})

    def process(self, member: int, *values: str) -> None:
        rows = [[*self.where.get(v, (0, 90)), v] for v in values]
        self.rec(member).invoke("process", {"records": rows})
        self.rec(member).ok("process", {"records": rows})
        self.written += [(v, p, o, member) for p, o, v in rows]

    def ack(self, member: int, *acks: tuple[str, str], how: str = "ok", **errors: str) -> None:
        """``acks``: (value, kind); ``errors``: value -> error code of an ``ok`` answer;
        ``how``: ``ok``, ``info`` (the commit raised) or ``open`` (the member died)."""
        rows = [[*self.where.get(v, (0, 90)), v, kind] for v, kind in acks]
        rec = self.rec(member)
        rec.invoke("ack", {"acks": rows})
        if how == "ok":
            rec.ok("ack", {"acks": [[*r, errors.get(r[2])] for r in rows]})
        elif how == "info":
            rec.info("ack", None, {"code": "_TIMED_OUT", "message": "commit timed out"})

    def consume(
        self, member: int, *got: tuple[Any, ...], ack: dict[str, str] | None = None
    ) -> None:
        """One correct poll: process what it accepts, then acknowledge everything."""
        kinds = {g[0]: (ack or {}).get(g[0], "accept") for g in got}
        self.poll(member, *got)
        accepted = [value for value, kind in kinds.items() if kind == "accept"]
        if accepted:
            self.process(member, *accepted)
        self.ack(member, *kinds.items())

    def finish(
        self,
        *,
        drained: bool = True,
        starts: list[int | None] | None = None,
        state: str = "ok",
        extra: tuple[tuple[int, str], ...] = (),
        read: str = "ok",
    ) -> Path:
        rec = self.rec("final")
        if state != "skip":
            rec.invoke("share-state", {"group": "share-g"})
            parts = [
                {"partition": p, "start": (starts or self.ends)[p], "end": self.ends[p]}
                for p in range(2)
            ]
            if state == "ok":
                value = {"group": "share-g", "partitions": parts, "drained": drained}
                rec.ok("share-state", value)
            else:
                rec.info("share-state", None, {"code": "TIMED_OUT", "message": "no answer"})
        for p in range(2):
            for iso in ("read_committed", "read_uncommitted"):
                ask = {"topic": "out", "partition": p, "isolation": iso}
                rec.invoke("read", ask)
                out = [(v, m, sp, so) for v, sp, so, m in self.written if sp == p]
                out += [(v, 0, p, 90) for q, v in extra if q == p]
                records = [
                    [i, v, v, {"src-partition": str(sp), "src-offset": str(so), "member": str(m)}]
                    for i, (v, m, sp, so) in enumerate(out)
                ]
                if read == "ok" or iso != "read_committed" or p == 0:
                    rec.ok("read", {**ask, "records": records})
                else:
                    rec.info("read", {**ask, "records": records[:1]}, {"code": "TIMED_OUT"})
        for r in self.recs.values():
            r.close()
        merged = self.root / "history.jsonl"
        meta = {"workload_options": self.options}
        merge_histories(sorted(self.procs.glob("*.jsonl")), merged, meta=meta)
        config = {
            "workload": "share",
            "checker_suites": ["share"],
            "workload_options": self.options,
        }
        (self.root / "config.json").write_text(json.dumps(config))
        return self.root


def v(i: int) -> str:
    return f"v{i:06d}"


def correct(run: Run) -> None:
    """Ten committed values consumed by three members: a release redelivered, a reject, a
    record released up to the limit (archived), an acknowledgement whose commit timed out
    (its record processed again by another member: a processing duplicate), a poison value
    aborted and an unacknowledged send never delivered."""
    run.send(*(v(i) for i in range(10)))
    run.send_aborted("x000000")
    run.send(v(10), acked=False)
    run.consume(0, (v(0), 1), (v(2), 1), (v(4), 1), ack={v(2): "release"})
    run.consume(1, (v(1), 1), (v(3), 1), (v(5), 1), ack={v(3): "reject"})
    run.consume(0, (v(2), 2), (v(6), 1), (v(8), 1))
    run.consume(1, (v(7), 1), ack={v(7): "release"})
    run.consume(0, (v(7), 2), ack={v(7): "release"})
    run.consume(1, (v(7), 3), ack={v(7): "release"})
    run.poll(1, (v(9), 1))
    run.process(1, v(9))
    run.ack(1, (v(9), "accept"), how="info")
    run.consume(2, (v(9), 2))


def planted(plant: Callable[[Run], None], **finish: Any) -> Callable[[Path], Path]:
    """The correct run, then ``plant``'s ops, then the final state (``finish``'s options)."""

    def build(root: Path) -> Path:
        run = Run(root)
        correct(run)
        plant(run)
        return run.finish(**finish)

    return build


def _accept_before_process(run: Run) -> None:
    """The ``accept-before-process`` variant killed between its commit and its write."""
    run.send(v(11))
    run.poll(0, (v(11), 1))
    run.ack(0, (v(11), "accept"))


def _reject_unknown(run: Run) -> None:
    """A reject whose commit raised and another whose member died inside it: either may
    have been taken (the record then never comes back), so neither value is lost."""
    run.send(v(12), v(13))
    run.poll(0, (v(12), 1))
    run.ack(0, (v(12), "reject"), how="info")
    run.poll(1, (v(13), 1))
    run.ack(1, (v(13), "reject"), how="open")


def _redelivered(run: Run) -> None:
    run.send(v(11))
    run.consume(0, (v(11), 1))
    run.consume(1, (v(11), 2))


def _concurrent(run: Run) -> None:
    run.send(v(11))
    run.poll(0, (v(11), 1))
    run.poll(1, (v(11), 2))  # handed out again while member 0 holds it
    run.process(0, v(11))
    run.ack(0, (v(11), "accept"))  # ... and member 0's accept is taken
    run.process(1, v(11))
    run.ack(1, (v(11), "accept"), **{v(11): "INVALID_RECORD_STATE"})


def _taken_twice(run: Run) -> None:
    """F10's shape: member 0 stopped holding the record; member 1 is handed it after the
    lock expired and accepts it; then member 0 accepts it too, and both are taken."""
    run.send(v(11))
    run.poll(0, (v(11), 1))
    run.consume(1, (v(11), 2))
    run.process(0, v(11))
    run.ack(0, (v(11), "accept"))


def _repeated(run: Run) -> None:
    run.send(v(11))
    run.consume(0, (v(11), 1), ack={v(11): "release"})
    run.consume(1, (v(11), 1))


def _skipped_back(run: Run) -> None:
    run.send(v(11))
    run.consume(0, (v(11), 2), ack={v(11): "release"})  # a first count of 2 is no anomaly
    run.consume(1, (v(11), 1))


def _over_limit(run: Run) -> None:
    run.send(v(11))
    run.consume(0, (v(11), 4))


def _aborted(run: Run) -> None:
    run.consume(0, ("x000000", 1, 0, 10), ack={"x000000": "release"})


def _unknown(run: Run) -> None:
    run.consume(0, ("v999999", 1, 1, 77), ack={"v999999": "release"})


def _undelivered(run: Run) -> None:
    run.send(v(11), v(13))  # never delivered


def _nothing(run: Run) -> None:
    pass


def _probes(run: Run) -> None:
    """Probes are owed nothing: one delivered, accepted and written, one never delivered,
    one that never landed."""
    run.probe("probe-1-0", "probe-1-1")
    run.probe("probe-1-2", acked=False)
    run.consume(2, ("probe-1-0", 1))


def _many_lost(run: Run) -> None:
    run.send(*(v(i) for i in range(11, 31)))
    for i in range(11, 31):
        run.poll(0, (v(i), 1))
        run.ack(0, (v(i), "accept"))


#: name -> (how the history is built, the anomalies it must give).
SCENARIOS: dict[str, tuple[Callable[[Path], Path], dict[str, int]]] = {
    "correct": (planted(_nothing), {}),
    "accept-before-process": (planted(_accept_before_process), {"lost": 1}),
    "lost-below-start": (
        planted(_accept_before_process, drained=False, starts=[5, 6]),
        {"lost": 1, "undelivered": 1},
    ),
    "redelivered-after-ack": (
        planted(_redelivered),
        {"redelivered-after-ack": 1, "acknowledged-twice": 1},
    ),
    "acknowledged-twice": (
        planted(_taken_twice),
        {"acknowledged-twice": 1, "concurrent-acquisition": 1},
    ),
    "concurrent-acquisition": (planted(_concurrent), {"concurrent-acquisition": 1}),
    "repeated": (planted(_repeated), {"delivery-count-reset": 1}),
    "skipped-back": (planted(_skipped_back), {"delivery-count-reset": 1}),
    "over-limit": (planted(_over_limit), {"delivery-count": 1}),
    "aborted-read": (planted(_aborted), {"aborted-read": 1}),
    "unknown-value": (planted(_unknown, extra=((1, "zz-out"),)), {"unknown-value": 2}),
    "undelivered": (
        planted(_undelivered, drained=False, starts=[5, 5]),
        {"undelivered": 3},
    ),
    "no-share-state": (planted(_undelivered, state="skip"), {"undelivered": 3}),
    "many-lost": (planted(_many_lost), {"lost": 20}),
    "probes": (planted(_probes), {}),
    "reject-unknown": (planted(_reject_unknown), {}),
}


def judged(tmp_path: Path, name: str, **kw: Any) -> dict[str, Any]:
    build, _ = SCENARIOS[name]
    return check_share(build(tmp_path / name), engine="python", **kw)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_planted_history_gives_exactly_what_was_planted(tmp_path: Path, name: str) -> None:
    result = judged(tmp_path, name)
    want = SCENARIOS[name][1]
    assert result["anomalies"] == want, result["examples"]
    assert result["valid"] is (not set(want) - {"delivery-count-reset"})
    for kind, examples in result["examples"].items():
        assert len(examples) == min(want[kind], 8)


def test_max_examples_zero_keeps_the_counts(tmp_path: Path) -> None:
    result = judged(tmp_path, "undelivered", max_examples=0)
    assert result["anomalies"] == {"undelivered": 3} and result["examples"] == {"undelivered": []}


def test_a_correct_run_is_valid_and_its_figures_are_counted(tmp_path: Path) -> None:
    result = judged(tmp_path, "correct")
    assert result["valid"] is True and result["anomalies"] == {}
    stats = result["stats"]
    assert stats["inputs"] == 10 and stats["deliveries"] == 14
    assert stats["records_delivered"] == 10 and stats["outputs"] == 9
    assert stats["redeliveries"] == 4  # v2 once, v7 twice, v9 once
    assert stats["processing_duplicates"] == 1  # v9, after its accept's commit timed out
    assert (stats["accepted"], stats["released"], stats["rejected"]) == (8, 4, 1)
    assert stats["archived"] == 2  # v3 rejected, v7 released at the limit
    assert stats["ack_unknown"] == 1 and stats["ack_errors"] == {}
    assert stats["drained"] is True and stats["delivery_limit"] == 3


def test_accepted_then_killed_before_processing_is_lost(tmp_path: Path) -> None:
    ex = judged(tmp_path, "accept-before-process")["examples"]["lost"][0]
    assert (ex["value"], ex["partition"], ex["offset"]) == (v(11), 1, 5)
    assert ex["drained"] is True and ex["start"] == 6
    assert ex["deliveries"] == [
        {"member": 0, "partition": 1, "offset": 5, "count": 1, "ack": "accept", "outcome": "ok"}
    ]
    assert [(o["process"], o["f"], o["type"]) for o in ex["ops"]] == [
        ("seeder", "send", "ok"),
        (0, "poll", "ok"),
        (0, "ack", "ok"),
    ]


def test_a_value_below_the_start_offset_is_lost_though_the_drain_did_not_finish(
    tmp_path: Path,
) -> None:
    result = judged(tmp_path, "lost-below-start")
    assert result["examples"]["lost"][0]["value"] == v(11)
    why = result["examples"]["undelivered"][0]
    assert why["reason"].startswith("the drain did not finish") and "value" not in why


def test_undelivered_values_follow_the_reason_the_drain_did_not_finish(tmp_path: Path) -> None:
    result = judged(tmp_path, "undelivered")
    first, *values = result["examples"]["undelivered"]
    assert first["reason"] == "the drain did not finish (partition 1: start 5, end 7)"
    assert [(e["value"], e["partition"], e["offset"], e["start"]) for e in values] == [
        (v(11), 1, 5, 5),
        (v(13), 1, 6, 5),
    ]
    assert any(note.startswith("the share group did not drain") for note in result["notes"])
    missing = judged(tmp_path, "no-share-state")["examples"]["undelivered"][0]
    assert missing["reason"].startswith("no share-state op") and missing["ops"] == []


def test_redelivery_after_a_taken_accept_names_the_ack_and_the_delivery(tmp_path: Path) -> None:
    ex = judged(tmp_path, "redelivered-after-ack")["examples"]["redelivered-after-ack"][0]
    assert ex["ack"] == {"member": 0, "count": 1, "kind": "accept"}
    assert ex["delivery"] == {"member": 1, "partition": 1, "offset": 5, "count": 2}
    assert [(o["process"], o["f"]) for o in ex["ops"]] == [(0, "poll"), (0, "ack"), (1, "poll")]


def test_a_second_taken_accept_of_another_delivery_is_acknowledged_twice(tmp_path: Path) -> None:
    ex = judged(tmp_path, "acknowledged-twice")["examples"]["acknowledged-twice"][0]
    assert (ex["value"], ex["partition"], ex["offset"]) == (v(11), 1, 5)
    assert ex["first"] == {"member": 1, "count": 2, "kind": "accept"}
    assert ex["second"] == {"member": 0, "count": 1, "kind": "accept"}
    steps = [(o["process"], o["f"]) for o in ex["ops"]]
    assert steps == [(0, "poll"), (1, "poll"), (1, "ack"), (0, "ack")]


def test_a_record_handed_out_while_held_is_a_concurrent_acquisition(tmp_path: Path) -> None:
    ex = judged(tmp_path, "concurrent-acquisition")["examples"]["concurrent-acquisition"][0]
    assert ex["holder"] == {"member": 0, "partition": 1, "offset": 5, "count": 1, "ack": "accept"}
    assert ex["other"] == {"member": 1, "partition": 1, "offset": 5, "count": 2}


@pytest.mark.parametrize(
    ("name", "kind", "counts"),
    [("repeated", "repeated", [1, 1]), ("skipped-back", "skipped-back", [2, 1]),
     ("over-limit", "over-limit", [4])],
)  # fmt: skip
def test_each_delivery_count_kind_is_named(
    tmp_path: Path, name: str, kind: str, counts: list[int]
) -> None:
    result = judged(tmp_path, name)
    reset = kind != "over-limit"  # KIP-932: a leader change forgets an acquisition's count
    ex = result["examples"]["delivery-count-reset" if reset else "delivery-count"][0]
    assert result["valid"] is reset
    assert (ex["kind"], ex["value"], ex["limit"]) == (kind, v(11), 3)
    assert [d["count"] for d in ex["deliveries"]] == counts


def test_aborted_values_are_an_aborted_read_only_under_read_committed(tmp_path: Path) -> None:
    ex = judged(tmp_path, "aborted-read")["examples"]["aborted-read"][0]
    assert ex["value"] == "x000000" and ex["records"] == []
    assert ex["deliveries"] == [{"member": 0, "partition": 0, "offset": 10, "count": 1}]
    assert [o["f"] for o in ex["ops"]] == ["send-aborted", "poll"]
    root = tmp_path / "aborted-read"
    loose = check_share(root, engine="python", options={"isolation": "read_uncommitted"})
    assert loose["valid"] is True, loose["anomalies"]
    assert any("read_uncommitted" in note for note in loose["notes"])


def test_a_poison_shaped_value_never_sent_is_an_aborted_read(tmp_path: Path) -> None:
    run = Run(tmp_path / "run")
    correct(run)
    run.consume(0, ("x000123", 1, 0, 11), ack={"x000123": "release"})
    result = check_share(run.finish(), engine="python")
    assert result["anomalies"] == {"aborted-read": 1}


def test_values_never_sent_are_unknown_delivered_or_written(tmp_path: Path) -> None:
    found = judged(tmp_path, "unknown-value")["examples"]["unknown-value"]
    assert [e["value"] for e in found] == ["v999999", "zz-out"]
    assert found[1]["deliveries"] == [] and found[1]["records"][0]["topic"] == "out"


def test_an_incomplete_output_read_cannot_be_judged(tmp_path: Path) -> None:
    root = planted(_nothing, read="info")(tmp_path / "run")
    result = check_share(root, engine="python")
    assert result["valid"] == "unknown" and result["anomalies"] == {}
    assert result["error"] == "incomplete final reads: out[1]"


def test_examples_are_bounded_and_counts_are_not(tmp_path: Path) -> None:
    result = judged(tmp_path, "many-lost", max_examples=2)
    assert result["anomalies"] == {"lost": 20}
    assert [e["value"] for e in result["examples"]["lost"]] == [v(12), v(14)]


def test_a_malformed_op_is_refused_in_one_line(tmp_path: Path) -> None:
    run = Run(tmp_path / "run")
    run.send(v(0))
    run.rec(0).invoke("poll", None)
    run.rec(0).ok("poll", {"records": [[0, 0, v(0)]]})  # no delivery count
    root = run.finish()
    with pytest.raises(CheckerInputError, match=r"op \d+ \(0 poll ok\): malformed value"):
        check_share(root, engine="python")


def test_the_run_s_config_options_win_over_the_history_header(tmp_path: Path) -> None:
    """With a limit of 4, count 4 is within it, and v7, released at count 3, was not
    archived: it is lost."""
    root = planted(_over_limit)(tmp_path / "run")
    result = check_share(root, engine="python", options={"delivery_limit": 4})
    assert result["anomalies"] == {"lost": 1}
    assert result["examples"]["lost"][0]["value"] == v(7)


def test_every_type_is_defined_once_with_ops_in_its_examples() -> None:
    assert A.names(A.SHARE) == (
        "lost",
        "redelivered-after-ack",
        "acknowledged-twice",
        "concurrent-acquisition",
        "delivery-count",
        "delivery-count-reset",
        "aborted-read",
        "unknown-value",
        "undelivered",
    )
    for t in A.SHARE:
        assert t.checker == "share" and t.example[-1] == "ops"
        assert A.lookup("share", t.name) is t
    found = A.found({"checkers": {"share": {"valid": False, "anomalies": {"lost": 2}}}})
    assert found == [("share", "lost", 2)]
    docs = (Path(__file__).resolve().parents[1] / "docs" / "anomalies.md").read_text()
    section = docs[docs.index("## share workload") :]
    for t in A.SHARE:
        assert f"`{t.name}`" in section, t.name


def messy(seed: int) -> Callable[[Path], Path]:
    """A history with everything at once, seeded: members polling overlapping records with
    counts that repeat, skip and go back, acknowledgements of every kind taken, refused,
    unknown or never answered (the member dies and a new one takes its place), poison and
    unknown values, a drain that may not have finished. Where the two engines could break a
    tie differently, this is where it shows."""

    def build(root: Path) -> Path:
        rng = random.Random(seed)
        run = Run(root)
        run.send(*(v(i) for i in range(16)))
        run.send_aborted("x000001")
        counts = [0] * 16
        members = [0, 1, 2]
        held: dict[int, dict[str, str]] = {}  # slot -> what its member will acknowledge
        for _ in range(60):
            slot = rng.randrange(3)
            if slot in held:  # acknowledged late: others may have polled meanwhile
                kinds = held.pop(slot)
                how = rng.choice(("ok",) * 6 + ("info", "open"))
                errors = {x: "INVALID_RECORD_STATE" for x in kinds if rng.random() < 0.15}
                run.ack(members[slot], *kinds.items(), how=how, **errors)
                if how == "open":
                    members[slot] = max(members) + 1  # the member died waiting
                continue
            got: list[tuple[Any, ...]] = []
            for i in rng.sample(range(16), rng.randint(1, 3)):
                counts[i] += rng.choice((0, 1, 1, 1, 2, -1))
                got.append((v(i), max(1, counts[i])))
            if rng.random() < 0.1:
                got.append(("x000001", rng.randint(1, 2), 0, 40))
            if rng.random() < 0.05:
                got.append(("v999998", 1, 1, 41))
            kinds = {g[0]: rng.choice(("accept", "accept", "release", "reject")) for g in got}
            run.poll(members[slot], *got)
            accepted = [x for x, k in kinds.items() if k == "accept" and rng.random() < 0.9]
            if accepted:
                run.process(members[slot], *accepted)
            held[slot] = kinds
        starts = [rng.randint(0, 8), rng.randint(0, 8)]
        return run.finish(drained=seed % 2 == 0, starts=starts)

    return build


@pytest.mark.parametrize("seed", [4, 7, 9])
def test_a_messy_history_is_judged_whole(tmp_path: Path, seed: int) -> None:
    result = check_share(messy(seed)(tmp_path / "run"), engine="python")
    assert result["valid"] is False
    assert {"lost", "concurrent-acquisition"} <= set(result["anomalies"])
    assert {"delivery-count", "delivery-count-reset"} & set(result["anomalies"])


# ------------------------------------------------------------------------------------------
# The engine of record against the reference


#: The planted histories held to both engines: every type and kind once (a second history
#: of the same type through the same code costs a Spark judgement and proves nothing more).
ON_SPARK = sorted(set(SCENARIOS) - {"many-lost", "no-share-state", "undelivered"})


@pytest.mark.spark
@pytest.mark.parametrize("name", ON_SPARK)
def test_spark_and_the_reference_give_equal_results(spark: Any, tmp_path: Path, name: str) -> None:
    """Whole results, examples and their ops included; two examples at most, so that the
    types with more cases are cut at the same place by both."""
    root = SCENARIOS[name][0](tmp_path / name)
    py = check_share(root, engine="python", max_examples=2)
    sp = check_share(root, spark=spark, max_examples=2)
    assert py == sp
    assert sp["anomalies"] == SCENARIOS[name][1]


@pytest.mark.spark
def test_the_share_suite_judges_a_run_directory_on_spark(spark: Any, tmp_path: Path) -> None:
    root = planted(_accept_before_process)(tmp_path / "run")
    config = json.loads((root / "config.json").read_text())
    part = SUITES["share"].run(RunContext(root, config=config, spark=spark))
    assert part["checkers"]["share"]["anomalies"] == {"lost": 1}
    assert part["checkers"]["share"] == check_share(root, engine="python")
