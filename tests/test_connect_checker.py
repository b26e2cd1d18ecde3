"""Tests of the connect checker: Spark (checkers.connect.checks) against the Python reference.

No Kafka: a small model of a Kafka Connect exactly-once source connector (tasks writing
consecutive seqnos in transactions, committing their source offsets with each batch, task
instances replaced now and then, each journaling what it polled and what Connect confirmed)
is recorded as a real history (``history.Recorder`` per process, merged), correct by
construction; mutations then break one promise each, on a task
of its own so that none disturbs another, and both engines must find exactly what was
planted, with equal whole results. A broker log dump is laid out from the same model when a
test needs one. One SparkSession for the module.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers import anomalies as A
from checkers.connect.extract import (
    Confirmed,
    parse_confirmed,
    parse_data,
    parse_offset_key,
    parse_offset_value,
)
from checkers.connect.pyref import check_connect_pyref
from checkers.connect.results import ANOMALY_TYPES, NO_DUMP_NOTE, NO_JOURNAL_NOTE
from checkers.suites import SUITES
from history import Recorder, merge_histories
from history.logdump import CheckerInputError

CONNECTOR = "seq-source"
DATA = "connect-data"
OFFSETS = "connect-offsets"

# ------------------------------------------------------------------------------------------
# The model


@dataclass
class Entry:
    """One record of a data partition's log: a data record or a transaction marker."""

    pid: int
    key: str | None = None
    value: str | None = None
    marker: str | None = None  # COMMIT / ABORT for a marker
    in_read: bool = True  # a data record the read_committed read returns
    confirmed: bool = True  # Connect confirmed it to its task (its journal's committed op)


@dataclass
class Journal:
    """One task-journal entry, a ``"tasks"`` op once the history is written: ``task-start``
    (``start``: its first seqno), or ``polled`` / ``committed`` of the data entries
    ``first..last`` of ``partition``'s log (their seqnos are read from the entries then, so
    a mutation of the log shows in the journal as it would in a real one)."""

    f: str
    task: int
    writer: str
    ms: int
    start: int = 0
    partition: int = 0
    first: int = 0
    last: int = -1


@dataclass
class Sim:
    """A connector's committed output: data partitions' logs, the offsets topic's records."""

    tasks: int = 4
    partitions: int = 2
    offsets_partitions: int = 3
    logs: dict[int, list[Entry]] = field(default_factory=dict)
    offsets: dict[int, list[tuple[str | None, str | None]]] = field(default_factory=dict)
    next_seqno: dict[int, int] = field(default_factory=dict)
    writer: dict[int, str] = field(default_factory=dict)
    writers: dict[int, list[str]] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    #: Entry indexes of each batch: (partition, first, last, marker index, task)
    batches: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    #: The task journals' entries, in the order the harness found them.
    journal: list[Journal] = field(default_factory=list)
    #: Record the journals (False: a history from before them).
    journals: bool = True
    rng: random.Random = field(default_factory=random.Random)
    #: Final ops to record differently: partition -> completion type of its read_committed
    #: read (None: no completion); "offsets" -> the offsets read's (or "skip": none at all).
    finals: dict[Any, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.logs = {p: [] for p in range(self.partitions)}
        self.offsets = {p: [] for p in range(self.offsets_partitions)}
        for t in range(self.tasks):
            self.next_seqno[t] = 0
            self.writers[t] = []
            self.start(t)

    def part(self, task: int) -> int:
        return task % self.partitions

    def opart(self, task: int) -> int:
        return task % self.offsets_partitions

    def start(self, task: int) -> str:
        """A new task instance (it goes on at the committed offset + 1, as KIP-618 wants)."""
        w = f"127.0.0.1:{8083 + len(self.pids) % 3}#{self.rng.getrandbits(32):08x}"
        self.writer[task] = w
        self.writers[task].append(w)
        self.pids[w] = 1000 + len(self.pids)
        self.note("task-start", task, w, start=self.next_seqno[task])
        return w

    def note(self, f: str, task: int, writer: str, **where: int) -> Journal:
        """A journal entry, 10 ms of the tasks' clock after the one before."""
        j = Journal(f, task, writer, 1_767_225_600_000 + 10 * len(self.journal), **where)
        self.journal.append(j)
        return j

    def value(self, task: int, seqno: int, writer: str) -> str:
        return json.dumps({"task": task, "seqno": seqno, "writer": writer})

    def batch(self, task: int, n: int, writer: str | None = None, offsets: bool = True) -> None:
        """One transaction of task ``task``: n records, a COMMIT marker, its source offset."""
        w = writer or self.writer[task]
        log = self.logs[self.part(task)]
        first = len(log)
        for _ in range(n):
            s = self.next_seqno[task]
            self.next_seqno[task] = s + 1
            log.append(Entry(self.pids[w], str(task), self.value(task, s, w)))
        log.append(Entry(self.pids[w], marker="COMMIT"))
        self.batches.append((self.part(task), first, len(log) - 2, len(log) - 1, task))
        where = {"partition": self.part(task), "first": first, "last": len(log) - 2}
        self.note("polled", task, w, **where)
        self.note("committed", task, w, **where)
        if offsets:
            self.commit_offset(task, self.next_seqno[task] - 1)

    def commit_offset(self, task: int, seqno: int | None) -> None:
        key = json.dumps([CONNECTOR, {"task": task}])
        v = None if seqno is None else json.dumps({"seqno": seqno})
        self.offsets[self.opart(task)].append((key, v))

    def noise(self) -> None:
        """Offsets-topic records that are not this connector's tasks'."""
        p = self.rng.randrange(self.offsets_partitions)
        other = json.dumps(["other-conn", {"task": 0}])
        self.offsets[p].append((other, json.dumps({"seqno": 10_000})))
        self.offsets[p].append((other, None))
        self.offsets[p].append((json.dumps([CONNECTOR, {"task": 0, "x": 1}]), '{"seqno": 99}'))

    def max_seqno(self, task: int) -> int:
        return self.next_seqno[task] - 1

    def journal_value(self, j: Journal) -> dict[str, Any] | None:
        """A journal entry's op value (None: a committed op confirming nothing is none)."""
        v: dict[str, Any] = {"task": j.task, "writer": j.writer}
        if j.f == "task-start":
            return v | {"from": j.start, "ms": j.ms}
        entries = self.logs[j.partition][j.first : j.last + 1]
        seqnos = sorted(
            json.loads(e.value or "{}")["seqno"]
            for e in entries
            if e.marker is None and (j.f == "polled" or e.confirmed)
        )
        return v | {"seqnos": ranges(seqnos), "ms": j.ms} if seqnos else None

    # -- recording -----------------------------------------------------------------------

    def read(self, p: int, committed: bool) -> list[list[Any]]:
        return [
            [o, e.key, e.value, []]
            for o, e in enumerate(self.logs[p])
            if e.marker is None and (e.in_read or not committed)
        ]

    def write(self, run: Path, *, dump: bool = False, meta: dict[str, Any] | None = None) -> Path:
        run.mkdir(parents=True, exist_ok=True)
        procs = run / "processes"
        procs.mkdir()
        cmeta = {
            "connector": CONNECTOR,
            "data_topic": DATA,
            "offsets_topic": OFFSETS,
            "group_id": "connect-cluster",
            "exactly_once": "enabled",
            "boundary": "poll",
            "transactional_id_prefix": f"connect-cluster-{CONNECTOR}-",
        }
        with Recorder(procs / "connect.jsonl", "connect", meta=meta or cmeta) as rec:
            rec.invoke("create", {"connector": CONNECTOR, "config": {"tasks.max": self.tasks}})
            rec.ok("create", {"connector": CONNECTOR, "config": {"tasks.max": self.tasks}})
            rec.invoke("stop", {"connector": CONNECTOR})
            rec.ok("stop", {"connector": CONNECTOR, "seconds": 0.1})
        if self.journals:
            with Recorder(procs / "tasks.jsonl", "tasks") as rec:
                for j in self.journal:
                    if (v := self.journal_value(j)) is not None:
                        rec.invoke(j.f, v)
                        rec.ok(j.f, v)
        with Recorder(procs / "final.jsonl", "final") as rec:
            rec.invoke("settle", {"topic": DATA})
            rec.ok("settle", {"topic": DATA, "open": [], "seconds": 0.0})
            for iso in ("read_committed", "read_uncommitted"):
                for p in range(self.partitions):
                    ask = {"topic": DATA, "partition": p, "isolation": iso}
                    rec.invoke("read", ask)
                    got = {**ask, "records": self.read(p, iso == "read_committed")}
                    how = self.finals.get(p, "ok") if iso == "read_committed" else "ok"
                    if how == "ok":
                        rec.ok("read", got)
                    elif how == "info":
                        rec.info("read", got, {"code": "TIMED_OUT", "message": "end not reached"})
            how = self.finals.get("offsets", "ok")
            if how != "skip":
                rec.invoke("offsets", {"topic": OFFSETS})
                records = [
                    [p, o, k, v]
                    for p, recs in self.offsets.items()
                    for o, (k, v) in enumerate(recs)
                ]
                if how == "ok":
                    rec.ok("offsets", {"topic": OFFSETS, "records": records})
                elif how == "info":
                    value = {"topic": OFFSETS, "records": records}
                    rec.info("offsets", value, {"code": "TIMED_OUT", "message": "end not reached"})
        merge_histories(sorted(procs.glob("*.jsonl")), run / "history.jsonl")
        if dump:
            self.write_dump(run)
        return run

    def write_dump(self, run: Path) -> None:
        lines = [{"logdump_format": 1, "nodes": 1}]
        for p, log in self.logs.items():
            for o, e in enumerate(log):
                r: dict[str, Any] = {"node": 1, "kind": "data", "topic": DATA, "partition": p}
                r |= {"offset": o, "producerId": e.pid, "producerEpoch": 0}
                r |= {"isTransactional": True, "isControl": e.marker is not None}
                r |= {"partitionLeaderEpoch": 0, "create_time": 1_767_225_600_000 + o}
                if e.marker is not None:
                    r |= {"marker": e.marker, "coordinator_epoch": 0}
                else:
                    r |= {"key": e.key, "payload": e.value}
                lines.append(r)
        d = run / "evidence"
        d.mkdir()
        (d / "logdump.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def ranges(seqnos: list[int]) -> list[list[int]]:
    """Ascending seqnos as the journals give them: inclusive ``[first, last]`` runs."""
    out: list[list[int]] = []
    for n in seqnos:
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def simulate(seed: int, *, tasks: int = 4, partitions: int = 2, steps: int = 40) -> Sim:
    """A correct run: batches of random tasks, every task restarted at least once."""
    rng = random.Random(seed)
    s = Sim(tasks=tasks, partitions=partitions, rng=rng)
    for t in range(tasks):  # every task: a few records, a restart, a few more
        s.batch(t, 2)
        s.start(t)
        s.batch(t, 2)
    for _ in range(steps):
        t = rng.randrange(tasks)
        if rng.random() < 0.15:
            s.start(t)
        s.batch(t, rng.randint(1, 4))
        if rng.random() < 0.1:
            s.noise()
    t = rng.randrange(tasks)  # an old tombstone of a task's offset: the last non-null counts
    s.commit_offset(t, None)
    s.commit_offset(t, s.max_seqno(t))
    return s


# ------------------------------------------------------------------------------------------
# Mutations: each breaks one promise on the task it is given, and returns the exact count and
# the first example the checker must report.


def named(task: int, seqno: int) -> dict[str, str]:
    """An example's ``value``: the seqno it is about, as the report follows it."""
    return {"value": f"{task}:{seqno}"}


def rec(s: Sim, p: int, o: int) -> dict[str, Any]:
    e = s.logs[p][o]
    return {"topic": DATA, "partition": p, "offset": o, "key": e.key, "value": e.value}


def data_offsets(s: Sim, task: int) -> list[int]:
    """Offsets of task ``task``'s data records in its partition, in log order."""
    return [
        o
        for o, e in enumerate(s.logs[s.part(task)])
        if e.marker is None and e.key == str(task) and e.in_read
    ]


def seqno_of(s: Sim, p: int, o: int) -> int:
    return int(json.loads(s.logs[p][o].value or "{}")["seqno"])


def mut_duplicate(s: Sim, task: int) -> tuple[int, dict[str, Any]]:
    """A copy of one record of ``task`` committed in another partition."""
    p = s.part(task)
    o = s.rng.choice(data_offsets(s, task))
    q = (p + 1) % s.partitions
    e = s.logs[p][o]
    s.logs[q].append(Entry(e.pid, e.key, e.value))
    s.logs[q].append(Entry(e.pid, marker="COMMIT"))
    copies = sorted([rec(s, p, o), rec(s, q, len(s.logs[q]) - 2)], key=lambda r: r["partition"])
    seqno = seqno_of(s, p, o)
    return 1, named(task, seqno) | {"task": task, "seqno": seqno, "copies": 2, "records": copies}


def mut_lost(s: Sim, task: int) -> tuple[int, dict[str, Any]]:
    """One record below the task's highest seqno never committed (its transaction aborted,
    so Connect never confirmed it either)."""
    p = s.part(task)
    offs = data_offsets(s, task)
    i = s.rng.randrange(1, len(offs) - 1)
    before, gone, after = offs[i - 1], offs[i], offs[i + 1]
    seqno = seqno_of(s, p, gone)
    s.logs[p][gone].in_read = s.logs[p][gone].confirmed = False
    ex = named(task, seqno) | {"task": task, "first": seqno, "last": seqno, "missing": 1}
    ex |= {"max_seqno": s.max_seqno(task), "records": [rec(s, p, before), rec(s, p, after)]}
    return 1, ex


def mut_acknowledged_lost(s: Sim, task: int) -> tuple[int, dict[str, Any]]:
    """The task's last two transactions, which Connect confirmed to it, are not in the read
    (the brokers lost an acknowledged tail); their source offsets were never committed, so
    only the journal tells: the two committed ops' ranges touch and make one run."""
    top = s.max_seqno(task)
    s.batch(task, 2, offsets=False)
    j = s.journal[-1]
    s.batch(task, 3, offsets=False)
    p = s.part(task)
    for o in range(j.first, len(s.logs[p])):
        if s.logs[p][o].key == str(task):
            s.logs[p][o].in_read = False
    ex = named(task, top + 1) | {"task": task, "first": top + 1, "last": top + 5, "missing": 5}
    return 5, ex | {"writer": s.writer[task], "ms": j.ms, "max_seqno": top}


def mut_order(s: Sim, task: int) -> tuple[int, dict[str, Any]]:
    """Two consecutive records of one task instance committed the wrong way round."""
    p = s.part(task)
    offs = data_offsets(s, task)
    pairs = [
        (a, b) for a, b in itertools.pairwise(offs)
        if s.logs[p][a].pid == s.logs[p][b].pid
    ]  # fmt: skip
    a, b = s.rng.choice(pairs)
    s.logs[p][a].value, s.logs[p][b].value = s.logs[p][b].value, s.logs[p][a].value
    ex = named(task, seqno_of(s, p, b)) | {"task": task, "partition": p, "seqno": seqno_of(s, p, b)}
    ex |= {"prev_seqno": seqno_of(s, p, a), "records": [rec(s, p, a), rec(s, p, b)]}
    return 1, ex


def _offsets_record(s: Sim, task: int) -> dict[str, Any]:
    q = s.opart(task)
    k, v = s.offsets[q][-1]
    return {"topic": OFFSETS, "partition": q, "offset": len(s.offsets[q]) - 1, "key": k, "value": v}


def _top_record(s: Sim, task: int) -> dict[str, Any]:
    p = s.part(task)
    top = s.max_seqno(task)
    return rec(s, p, next(o for o in data_offsets(s, task) if seqno_of(s, p, o) == top))


def mut_offset_ahead(s: Sim, task: int) -> tuple[int, dict[str, Any]]:
    """The task's source offset committed three seqnos past its last committed record."""
    top = s.max_seqno(task)
    s.commit_offset(task, top + 3)
    ex = named(task, top + 3) | {"task": task, "source_offset": top + 3, "max_seqno": top, "gap": 3}
    return 1, ex | {"offsets_record": _offsets_record(s, task), "record": _top_record(s, task)}


def mut_offset_behind(s: Sim, task: int) -> tuple[int, dict[str, Any]]:
    """The task's source offset committed two seqnos short of its last committed record."""
    top = s.max_seqno(task)
    s.commit_offset(task, top - 2)
    ex = named(task, top) | {"task": task, "source_offset": top - 2, "max_seqno": top, "gap": 2}
    return 1, ex | {"offsets_record": _offsets_record(s, task), "record": _top_record(s, task)}


def mut_zombie(s: Sim, task: int) -> tuple[int, dict[str, Any]]:
    """A replaced task instance commits a record after its successor's first one."""
    old = s.writer[task]
    new = s.start(task)
    p = s.part(task)
    s.batch(task, 1)
    newer = len(s.logs[p]) - 2
    s.batch(task, 1, writer=old)
    zombie = len(s.logs[p]) - 2
    ex = named(task, seqno_of(s, p, zombie)) | {"task": task, "partition": p}
    ex |= {"writer": old, "newer_writer": new}
    return 1, ex | {"records": [rec(s, p, newer), rec(s, p, zombie)]}


def mut_malformed(s: Sim, task: int) -> tuple[int, dict[str, Any]]:
    """A record in the data topic that is not the connector's."""
    p = s.part(task)
    s.logs[p].append(Entry(1999, "x", "not json"))
    s.logs[p].append(Entry(1999, marker="COMMIT"))
    return 1, {"reason": "value is not JSON", "records": [rec(s, p, len(s.logs[p]) - 2)]}


def mut_aborted(s: Sim, task: int) -> tuple[int, dict[str, Any]]:
    """A batch the read_committed read returned, which the broker log shows aborted (only
    the dump changes). The example's ``log`` is checked apart."""
    p, first, last, marker, _t = next(b for b in s.batches if b[4] == task)
    s.logs[p][marker].marker = "ABORT"
    r = rec(s, p, first)
    seqno = seqno_of(s, p, first)
    return last - first + 1, {"task": task, "seqno": seqno, "records": [r]} | named(task, seqno)


MUTATIONS = {
    "duplicate": mut_duplicate,
    "lost": mut_lost,
    "acknowledged-lost": mut_acknowledged_lost,
    "order": mut_order,
    "offset-ahead": mut_offset_ahead,
    "offset-behind": mut_offset_behind,
    "zombie-task-write": mut_zombie,
    "malformed-record": mut_malformed,
    "aborted-read": mut_aborted,
}


# ------------------------------------------------------------------------------------------
# Fixtures and helpers


def both(spark: Any, run: Path, max_examples: int = 3) -> dict[str, Any]:
    """Spark and the reference; their whole results must be equal, examples included."""
    from checkers.connect.run import check_connect

    ref = check_connect_pyref(run, max_examples=max_examples)
    got = check_connect(run, spark=spark, max_examples=max_examples)
    assert got == ref
    assert got["checker"] == "connect"
    if got["valid"] != "unknown":
        assert "error" not in got, got.get("error")  # two engines failing alike is no agreement
    for name, exs in got["examples"].items():
        t = A.lookup("connect", name)
        assert t is not None
        assert len(exs) <= max_examples
        for ex in exs:
            assert list(ex) == list(t.example_of(ex))  # the defined shape, in order
    return got


def planted(seed: int, kinds: list[str], *, tasks: int = 9, partitions: int = 2) -> tuple[
    Sim, dict[str, int], dict[str, dict[str, Any]]
]:  # fmt: skip
    """A correct run, then each kind planted on a task of its own (tasks 0, 1, ...)."""
    s = simulate(seed, tasks=tasks, partitions=partitions)
    counts, firsts = {}, {}
    for t, kind in enumerate(kinds):
        counts[kind], firsts[kind] = MUTATIONS[kind](s, t)
    return s, counts, firsts


# ------------------------------------------------------------------------------------------
# Parsing


def test_the_connector_record_and_why_another_is_malformed() -> None:
    w = "127.0.0.1:8083#0a1b2c3d"
    assert parse_data("3", json.dumps({"task": 3, "seqno": 7, "writer": w})) == (3, 7, w, None)
    extra = json.dumps({"writer": w, "seqno": 0, "task": 1, "more": [1]})
    assert parse_data("1", extra) == (1, 0, w, None)  # key order and extra keys do not matter
    bad = {
        None: "value is null",
        "{": "value is not JSON",
        "[1, 2]": "value is not a JSON object",
        '{"task": "3", "seqno": 1, "writer": "w"}': "task is not an integer >= 0",
        '{"task": 3, "seqno": true, "writer": "w"}': "seqno is not an integer >= 0",
        '{"task": 3, "seqno": -1, "writer": "w"}': "seqno is not an integer >= 0",
        '{"task": 3, "seqno": 1.0, "writer": "w"}': "seqno is not an integer >= 0",
        '{"task": 3, "seqno": 1}': "writer is not a string",
    }
    for value, why in bad.items():
        assert parse_data("3", value) == (None, None, None, why), value
    good = json.dumps({"task": 3, "seqno": 1, "writer": w})
    why = "key is not the task id as decimal text"
    assert parse_data("03", good)[3] == why and parse_data(None, good)[3] == why


def test_an_offsets_key_names_this_connector_and_one_task() -> None:
    assert parse_offset_key('["seq-source", {"task": 4}]', CONNECTOR) == 4
    for key in (
        '["other", {"task": 4}]',
        '["seq-source", {"task": 4, "x": 1}]',
        '["seq-source", {"task": -1}]',
        '["seq-source"]',
        "nope",
        None,
    ):
        assert parse_offset_key(key, CONNECTOR) is None, key
    assert parse_offset_value('{"seqno": 12}') == (12, False)
    assert parse_offset_value(None) == (None, False)  # a tombstone
    assert parse_offset_value('{"seqno": "12"}') == (None, True)


def test_a_committed_journal_op_is_its_task_writer_ranges_and_clock() -> None:
    w = "127.0.0.1:8083#0a1b2c3d"
    v = {"task": 2, "writer": w, "seqnos": [[0, 4], [6, 6]], "ms": 1767225600000, "x": 1}
    assert parse_confirmed(json.dumps(v).encode()) == Confirmed(2, w, [(0, 4), (6, 6)], v["ms"])
    for bad in (
        {**v, "seqnos": [[4, 0]]},
        {**v, "seqnos": [[0]]},
        {**v, "seqnos": [[-1, 2]]},
        {**v, "task": "2"},
        {k: x for k, x in v.items() if k != "ms"},
        [v],
    ):
        assert isinstance(parse_confirmed(json.dumps(bad).encode()), str), bad


def test_a_committed_journal_op_outside_the_format_is_unusable_input(tmp_path: Path) -> None:
    """The harness wrote it from journal lines it parsed: a bad one is a harness bug, and
    skipping it could hide a lost record."""
    s = simulate(1, tasks=2)
    s.journals = False  # the journals are this one op
    s.write(tmp_path / "p")
    procs = tmp_path / "p" / "processes"
    with Recorder(procs / "zz.jsonl", "tasks") as r:
        value = {"task": 0, "writer": "w", "seqnos": [[3, 1]], "ms": 0}
        r.invoke("committed", value)
        r.ok("committed", value)
    merge_histories(sorted(procs.glob("*.jsonl")), tmp_path / "history.jsonl")
    with pytest.raises(CheckerInputError, match=r"committed journal op: .*\[3, 1\] runs back"):
        check_connect_pyref(tmp_path)


def test_every_connect_type_is_defined_once_and_documented() -> None:
    assert ANOMALY_TYPES == (
        "duplicate",
        "lost",
        "acknowledged-lost",
        "order",
        "offset-ahead",
        "offset-behind",
        "zombie-task-write",
        "aborted-read",
        "malformed-record",
        "stalled-task",
    )
    text = (Path(__file__).resolve().parents[1] / "docs" / "anomalies.md").read_text()
    section = text[text.index("## connect workload") :]
    for t in A.CONNECT:
        assert t.checker == "connect" and t.summary and t.counts and not t.allowed
        assert A.lookup("connect", t.name) is t
        assert f"`{t.name}`" in section and "`CONNECT`" in section
    assert A.describe("duplicate", "connect") != A.describe("duplicate", "duplicate")
    assert A.found({"checkers": {"connect": {"anomalies": {"lost": 2}}}}) == [
        ("connect", "lost", 2)
    ]


def test_every_example_names_its_seqno_but_a_malformed_record() -> None:
    """The report follows an example's ``value``; a record that is not the connector's has no
    seqno to follow, so its examples name none (rather than a made-up one)."""
    from checkers.connect import results as X

    r = X.record(DATA, 0, 5, "x", "not json")
    assert X.aborted_read(2, 7, r, None)["value"] == "2:7"
    assert "value" not in X.aborted_read(None, None, r, None)
    assert "value" not in X.malformed("value is not JSON", r)
    ahead = X.offset_case("offset-ahead", 3, 9, None, None, None)
    behind = X.offset_case("offset-behind", 3, None, 4, None, None)
    assert (ahead["value"], behind["value"]) == ("3:9", "3:4")
    named_types = [t for t in A.CONNECT if "value" in t.example]
    assert [t.example[0] for t in named_types] == ["value"] * len(named_types)
    rest = {t.name: "value" in t.optional for t in A.CONNECT if t not in named_types}
    assert rest == {"aborted-read": True, "malformed-record": False, "stalled-task": False}


def test_the_connect_suite_runs_the_spark_engine() -> None:
    suite = SUITES["connect"]
    assert suite.name == "connect" and suite.spark and suite.prepare is not None


# ------------------------------------------------------------------------------------------
# Unknown verdicts (no Spark is started for them)


@pytest.mark.parametrize(
    ("finals", "reason"),
    [
        ({1: "info"}, f"the read_committed read of {DATA} partition 1 ended info (TIMED_OUT)"),
        ({0: None}, f"the read_committed read of {DATA} partition 0 has no completion"),
        ({"offsets": "info"}, f"the offsets read of {OFFSETS} ended info (TIMED_OUT)"),
        ({"offsets": "skip"}, f"no final offsets read of {OFFSETS}"),
    ],
)
def test_an_incomplete_final_read_makes_the_verdict_unknown(
    tmp_path: Path, finals: dict[Any, str | None], reason: str
) -> None:
    from checkers.connect.run import check_connect

    # anomalies, acknowledged-lost among them (as lost, it needs every read), yet unknown
    s, _c, _f = planted(3, ["duplicate", "acknowledged-lost"], tasks=3)
    s.finals = finals
    run = s.write(tmp_path / "run")
    ref = check_connect_pyref(run)
    got = check_connect(run, spark=None)  # needs no session: none is started
    assert got == ref
    assert ref["valid"] == "unknown" and reason in ref["error"]
    assert ref["error"].startswith("incomplete final reads: ")
    assert ref["anomalies"] == {} and ref["examples"] == {}
    assert ref["notes"] == [NO_DUMP_NOTE]


def test_an_engine_failure_is_unknown_never_valid(tmp_path: Path) -> None:
    from checkers.connect.run import check_connect

    run = simulate(4, tasks=2).write(tmp_path / "run")
    got = check_connect(run, spark=object())  # not a session: every query fails
    assert got["valid"] == "unknown" and got["error"].startswith("Spark failed: ")
    assert got["anomalies"] == {} and got["stats"]["partitions"] == 2


def test_no_connect_header_is_unknown_and_a_bad_history_unusable(tmp_path: Path) -> None:
    s = simulate(1, tasks=2)
    run = s.write(tmp_path / "a", meta={"connector": CONNECTOR})
    r = check_connect_pyref(run)
    assert r["valid"] == "unknown"
    assert r["error"] == "the connect process's header meta lacks data_topic, offsets_topic"
    with pytest.raises(CheckerInputError, match="no such history"):
        check_connect_pyref(tmp_path / "nowhere")
    bad = tmp_path / "b"
    bad.mkdir()
    (bad / "history.jsonl").write_text('{"history_format": 1, "kind": "merged"}\n{"index": 0}\n1\n')
    with pytest.raises(CheckerInputError):
        check_connect_pyref(bad)


def test_a_read_record_outside_the_format_is_unusable_input(tmp_path: Path) -> None:
    procs = tmp_path / "p"
    procs.mkdir()
    meta = {"connector": CONNECTOR, "data_topic": DATA, "offsets_topic": OFFSETS}
    with Recorder(procs / "c.jsonl", "connect", meta=meta) as r:
        r.invoke("create", {"connector": CONNECTOR})
    with Recorder(procs / "f.jsonl", "final") as r:
        ask = {"topic": DATA, "partition": 0, "isolation": "read_committed"}
        r.invoke("read", ask)
        r.ok("read", {**ask, "records": [["zero", "0", "v", []]]})
    merge_histories(sorted(procs.glob("*.jsonl")), tmp_path / "history.jsonl")
    with pytest.raises(CheckerInputError, match="is not \\[offset, key, value, headers\\]"):
        check_connect_pyref(tmp_path)


def test_a_history_scanned_in_parallel_chunks_gives_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan's workers (forced here with tiny chunks) hand back the same rows, in memory
    and as Parquet, as one pass in this process does."""
    import pyarrow.parquet as pq

    from checkers.connect.views import scan_connect
    from history import scan

    s, _c, _f = planted(4, ["lost", "malformed-record"], tasks=4, partitions=3)
    for _ in range(30):
        s.batch(s.rng.randrange(4), 5)
    run = s.write(tmp_path / "run")
    whole = scan_connect(run)
    monkeypatch.setattr(scan, "INLINE_BYTES", 0)
    monkeypatch.setattr(scan, "CHUNK_BYTES", 512)
    parts = scan_connect(run)
    assert parts.facts == whole.facts and parts.data == whole.data
    assert parts.offsets == whole.offsets and len(whole.data) > 100
    assert parts.confirmed == whole.confirmed and len(whole.confirmed) > 30
    assert parts.journal_ops == whole.journal_ops > 2 * len(whole.confirmed)
    out = scan_connect(run, out=tmp_path / "rows")
    for table, mine in (("data", whole.data), ("confirmed", whole.confirmed)):
        got = pq.read_table(tmp_path / "rows" / table).to_pylist()
        rows = sorted(tuple(r.values()) for r in got)
        assert rows == sorted(mine, key=lambda r: tuple("" if x is None else x for x in r))
    assert out.facts == whole.facts and out.journal_ops == whole.journal_ops
    assert check_connect_pyref(run) == check_connect_pyref(run)


# ------------------------------------------------------------------------------------------
# Both engines


def test_a_correct_run_is_valid_with_and_without_a_dump(spark: Any, tmp_path: Path) -> None:
    s = simulate(7, tasks=4, partitions=3)
    run = s.write(tmp_path / "plain")
    got = both(spark, run)
    assert got["valid"] is True and got["anomalies"] == {} and got["examples"] == {}
    assert got["notes"] == [NO_DUMP_NOTE]
    st_ = got["stats"]
    assert st_["tasks"] == 4 and st_["partitions"] == 3 and st_["settle"] == "ok"
    assert st_["committed_records"] == sum(s.next_seqno.values())
    assert st_["connect"]["connector"] == CONNECTOR and st_["log_dump"] is False
    assert st_["journal_ops"] == 2 * len(s.journal)  # journals judged, every claim kept
    again = both(spark, run)  # the Parquet cache is reused
    assert again == got and (run / ".parquet" / "connect.json").is_file()
    with_dump = both(spark, s.write(tmp_path / "dumped", dump=True))
    assert with_dump["valid"] is True and "notes" not in with_dump
    assert with_dump["stats"]["log_dump"] is True


@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_each_planted_anomaly_is_found_by_both_engines(
    spark: Any, tmp_path: Path, kind: str
) -> None:
    s, counts, firsts = planted(11, [kind], tasks=3)
    got = both(spark, s.write(tmp_path / kind, dump=kind == "aborted-read"))
    assert got["valid"] is False
    assert got["anomalies"] == counts == {kind: counts[kind]}
    assert got["bad_anomaly_types"] == [kind]
    from harness.report.data import flagged_values

    ex = dict(got["examples"][kind][0])
    if kind != "malformed-record":  # the report follows the seqno the example names
        assert ex["value"] in flagged_values({"checkers": {"connect": got}}, 100)
    if kind == "aborted-read":
        log = ex.pop("log")
        assert log["outcome"] == "aborted" and log["end_marker"]["outcome"] == "ABORT"
        assert [r["offset"] for r in log["records"]][-1] == log["end_marker"]["offset"]
        assert len(got["examples"][kind]) == min(3, counts[kind])
    assert ex == firsts[kind]


def test_an_at_least_once_restart_is_duplicate_order_and_offset_behind(
    spark: Any, tmp_path: Path
) -> None:
    """A task that committed records but not their offset, restarted: it writes them again."""
    s = Sim(tasks=1, partitions=1, rng=random.Random(5))
    s.batch(0, 3)  # seqnos 0..2, offset 2
    s.batch(0, 2, offsets=False)  # seqnos 3, 4: the offset commit is lost
    s.next_seqno[0] = 3
    s.start(0)
    s.batch(0, 3)  # seqnos 3..5 again (3, 4 duplicated), offset 5
    s.batch(0, 1, offsets=False)  # seqno 6 with no offset
    got = both(spark, s.write(tmp_path / "alo"))
    assert got["anomalies"] == {"duplicate": 2, "order": 1, "offset-behind": 1}
    dup = got["examples"]["duplicate"]
    assert [(d["task"], d["seqno"], d["copies"]) for d in dup] == [(0, 3, 2), (0, 4, 2)]
    o = got["examples"]["order"][0]
    assert (o["seqno"], o["prev_seqno"]) == (3, 4)
    b = got["examples"]["offset-behind"][0]
    assert (b["source_offset"], b["max_seqno"], b["gap"]) == (5, 6, 1)


def test_a_task_with_an_offset_and_no_records_is_offset_ahead(spark: Any, tmp_path: Path) -> None:
    s = simulate(2, tasks=2)
    s.commit_offset(5, 4)  # task 5 never committed a record
    got = both(spark, s.write(tmp_path / "r"))
    assert got["anomalies"] == {"offset-ahead": 1}
    ex = got["examples"]["offset-ahead"][0]
    assert ex["task"] == 5 and ex["max_seqno"] is None and ex["gap"] == 5 and ex["record"] is None


def test_confirmed_records_missing_below_the_top_are_lost_too(spark: Any, tmp_path: Path) -> None:
    """Two confirmed records gone from the middle of a task's seqnos (a present one between
    them): each is ``lost`` and ``acknowledged-lost``, two runs of one each, naming the
    writer Connect told and when."""
    s = simulate(6, tasks=2, partitions=1)
    s.batch(0, 6)
    offs = data_offsets(s, 0)[-6:]
    for o in (offs[1], offs[3]):
        s.logs[0][o].in_read = False
    batch = s.journal[-1]  # the batch's committed op
    got = both(spark, s.write(tmp_path / "r"))
    assert got["anomalies"] == {"lost": 2, "acknowledged-lost": 2}
    top = s.max_seqno(0)
    runs = [(e["first"], e["last"], e["missing"]) for e in got["examples"]["acknowledged-lost"]]
    assert runs == [(top - 4, top - 4, 1), (top - 2, top - 2, 1)]
    ex = got["examples"]["acknowledged-lost"][0]
    assert ex["value"] == f"0:{top - 4}" and ex["max_seqno"] == top
    assert (ex["writer"], ex["ms"]) == (s.writer[0], batch.ms)
    lost = [(e["first"], e["value"]) for e in got["examples"]["lost"]]
    assert lost == [(top - 4, f"0:{top - 4}"), (top - 2, f"0:{top - 2}")]


def test_a_seqno_confirmed_twice_names_its_first_confirmation(spark: Any, tmp_path: Path) -> None:
    """At least once: an instance's seqnos 3, 4 confirmed, their offset never committed; its
    successor writes and confirms them again, and both copies are gone from the read: one
    run, named by the first writer Connect told. A task whose every confirmed record is
    gone has no highest committed seqno."""
    s = Sim(tasks=2, partitions=1, rng=random.Random(8))
    s.batch(0, 3)  # seqnos 0..2, offset 2
    first = s.writer[0]
    s.batch(0, 2, offsets=False)  # seqnos 3, 4, confirmed
    told = s.journal[-1]
    s.next_seqno[0] = 3
    s.start(0)
    s.batch(0, 2, offsets=False)  # 3, 4 again, confirmed again
    s.batch(1, 2, offsets=False)  # task 1: 0, 1, confirmed
    for e in s.logs[0]:
        if e.value is not None and json.loads(e.value)["seqno"] >= (3 if e.key == "0" else 0):
            e.in_read = False
    got = both(spark, s.write(tmp_path / "r"))
    assert got["anomalies"] == {"acknowledged-lost": 4}
    a, b = got["examples"]["acknowledged-lost"]
    assert (a["value"], a["first"], a["last"], a["max_seqno"]) == ("0:3", 3, 4, 2)
    assert (a["writer"], a["ms"]) == (first, told.ms) and first != s.writer[0]
    assert (b["value"], b["first"], b["last"], b["max_seqno"]) == ("1:0", 0, 1, None)


def test_a_history_without_journals_is_judged_as_before(spark: Any, tmp_path: Path) -> None:
    """Histories from before the task journals: the check is skipped (a note says so), so an
    acknowledged tail that is gone goes unseen, and every other rule is unchanged."""
    s, counts, firsts = planted(12, ["acknowledged-lost", "lost"], tasks=3)
    s.journals = False
    got = both(spark, s.write(tmp_path / "r"))
    assert got["anomalies"] == {"lost": counts["lost"]}
    assert got["examples"]["lost"][0] == firsts["lost"]
    assert got["notes"] == [NO_DUMP_NOTE, NO_JOURNAL_NOTE]
    assert got["stats"]["journal_ops"] == 0
    s.journals = True
    again = both(spark, s.write(tmp_path / "j"))
    assert again["anomalies"] == counts and again["notes"] == [NO_DUMP_NOTE]


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10_000),
    kinds=st.lists(st.sampled_from(list(MUTATIONS)), unique=True, max_size=len(MUTATIONS)),
    partitions=st.integers(2, 4),
    dump=st.booleans(),
    journals=st.booleans(),
)
def test_generated_runs_agree_and_every_planted_anomaly_is_found(
    spark: Any,
    tmp_path_factory: Any,
    seed: int,
    kinds: list[str],
    partitions: int,
    dump: bool,
    journals: bool,
) -> None:
    if not dump and "aborted-read" in kinds:
        kinds = [k for k in kinds if k != "aborted-read"]
    s, counts, firsts = planted(seed, kinds, tasks=len(MUTATIONS) + 2, partitions=partitions)
    s.journals = journals
    if not journals:  # an older history: the tail Connect confirmed is lost unseen
        counts.pop("acknowledged-lost", None)
        firsts.pop("acknowledged-lost", None)
    got = both(spark, s.write(tmp_path_factory.mktemp("gen"), dump=dump), max_examples=2)
    assert (NO_JOURNAL_NOTE in got.get("notes", [])) is not journals
    assert got["anomalies"] == counts
    assert got["valid"] is (not counts)
    for kind, first in firsts.items():
        ex = dict(got["examples"][kind][0])
        ex.pop("log", None)
        assert ex == first, kind


def test_a_value_only_the_reader_decodes_is_judged_alike(spark: Any, tmp_path: Path) -> None:
    """A lone surrogate escape (a string msgspec refuses and Arrow cannot hold) in a committed
    record: the reader's rules decode it, both engines hold it as its JSON text (as every
    checker does, checkers/json_text.py), call it malformed and show it alike."""
    s = simulate(9, tasks=2)
    s.logs[0].append(Entry(1999, "0", "\ud800"))
    s.logs[0].append(Entry(1999, marker="COMMIT"))
    got = both(spark, s.write(tmp_path / "r"))
    assert got["anomalies"] == {"malformed-record": 1}
    ex = got["examples"]["malformed-record"][0]
    assert ex["records"][0]["value"] == '"\\ud800"'  # its JSON text: a string, not an object
    assert ex["reason"] == "value is not a JSON object"


def test_the_suite_judges_a_run_directory(spark: Any, tmp_path: Path) -> None:
    """Through ``checkers.judge`` as ``python -m checkers RUN_DIR --engine spark`` runs it:
    the run's config names the suite; an invalid run and an unknown one."""
    from checkers.judge import judge_run_dir

    s, counts, _f = planted(21, ["zombie-task-write", "lost"], tasks=3)
    run = s.write(tmp_path / "bad")
    (run / "config.json").write_text(json.dumps({"checker_suites": ["connect"]}))
    r = judge_run_dir(run, max_examples=1, engine="spark")
    assert r["valid"] is False and r["anomalies"] == counts
    assert r["bad_anomaly_types"] == sorted(counts)
    assert json.loads((run / "results.json").read_text())["valid"] is False
    s.finals = {"offsets": "info"}
    run = s.write(tmp_path / "unknown")
    (run / "config.json").write_text(json.dumps({"checker_suites": ["connect"]}))
    r = judge_run_dir(run, engine="spark")
    assert r["valid"] == "unknown" and "offsets read" in r["errors"]["connect"]
