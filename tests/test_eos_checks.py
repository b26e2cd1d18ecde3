"""Tests of the eos checks: Spark (checkers.eos.checks) against the Python reference.

No Kafka: histories are simulated here (a small consume-transform-produce model that is correct
by construction, then mutated to break one promise at a time) or copied from real stored runs
(``tests/data/eos/*.history.jsonl.gz``, decompressed into a temp dir so the Parquet cache the
loader writes never lands in the source tree). One SparkSession (``local[2]``) for the module.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.anomalies import lookup
from checkers.eos import pyref as eos_pyref
from checkers.eos import rules as eos_rules
from checkers.eos import run as eos_run
from checkers.eos.pyref import SAFETY_CHECKS, check_eos_py
from checkers.eos.run import check_eos
from checkers.judge import merge_verdicts
from checkers.load import CheckerInputError
from workloads.client_registry import findings

DATA = Path(__file__).parent / "data" / "eos"

# ------------------------------------------------------------------------------------------
# A simulated pipeline

# Applied in this order so that none undoes another: removals first, duplication last (a
# later removal could take one copy of a duplicate, or one record of a swapped pair).
MUTATIONS = (
    "lost",
    "torn-transaction",
    "order",
    "aborted-read",
    "committed-in-later-transaction",
    "zombie-write",
    "duplicate",
    "started-below-committed",
)


@dataclass
class Sim:
    """A consume-transform-produce pipeline, recorded as a merged history."""

    partitions: int = 3
    ops: list[dict[str, Any]] = field(default_factory=list)
    pindex: dict[Any, int] = field(default_factory=dict)
    log: dict[int, list[str | None]] = field(default_factory=dict)  # input log; None = aborted
    committed: dict[int, int] = field(default_factory=dict)
    out: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    next_seed: int = 0
    next_poison: int = 0
    gen: int = 1
    owner: dict[int, int] = field(default_factory=dict)
    seq: dict[int, int] = field(default_factory=dict)
    tids: dict[int, str] = field(default_factory=dict)
    #: Added to every later op's time (ns): a quiet spell before the final observations.
    skew: int = 0
    #: Output partition -> log end offset, when a broker log was laid out (see ``lay_out``).
    ends: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for p in range(self.partitions):
            self.log[p], self.committed[p], self.out[p] = [], 0, []

    def op(self, process: Any, type_: str, f: str, value: Any, error: Any = None) -> None:
        i = len(self.ops)
        pi = self.pindex.get(process, 0)
        self.pindex[process] = pi + 1
        o = {
            "index": i,
            "pindex": pi,
            "time": 1_000_000 + i * 1000 + self.skew,
            "wall": "2026-01-01T00:00:00.000000Z",
            "process": process,
            "type": type_,
            "f": f,
            "value": value,
        }
        if error is not None:
            o["error"] = error
        self.ops.append(o)

    # -- actors -------------------------------------------------------------------------

    def seed(self, n: int) -> None:
        vals = [
            [f"v{self.next_seed + k:06d}", (self.next_seed + k) % self.partitions] for k in range(n)
        ]
        self.next_seed += n
        self.op("seeder", "invoke", "send", {"values": vals})
        done = []
        for v, p in vals:
            self.log[p].append(v)
            done.append([v, p, len(self.log[p]) - 1])
        self.op("seeder", "ok", "send", {"values": done})

    def poison(self, n: int) -> None:
        vals = [[f"x{self.next_poison + k:06d}", k % self.partitions] for k in range(n)]
        self.next_poison += n
        self.op("seeder", "invoke", "send-aborted", {"values": vals})
        done = []
        for v, p in vals:
            self.log[p].append(None)
            done.append([v, p, len(self.log[p]) - 1])
        for p in {p for _v, p in vals}:
            self.log[p].append(None)  # the abort marker takes an offset too
        err = {"code": "DELIBERATE_ABORT", "message": "poison"}
        self.op("seeder", "fail", "send-aborted", {"values": done}, err)

    def start(self, inst: int, tid: str | None = None) -> None:
        tid = tid or f"t-p{inst}"
        self.tids[inst] = tid
        self.seq[inst] = 0
        v = {"instance": inst, "slot": inst, "pid": 100 + inst, "variant": "eos"}
        v |= {"transactional_id": tid, "group_id": "g", "input_topic": "in", "output_topic": "out"}
        self.op(
            "supervisor",
            "invoke",
            "spawn",
            {"slot": inst, "instance": inst, "transactional_id": tid, "replaces": None},
        )
        self.op(
            "supervisor",
            "ok",
            "spawn",
            {
                "slot": inst,
                "instance": inst,
                "transactional_id": tid,
                "replaces": None,
                "pid": 100 + inst,
            },
        )
        self.op(inst, "invoke", "start", v)
        self.op(inst, "ok", "start", v)

    def rebalance(self, instances: list[int]) -> None:
        self.gen += 1
        for i in instances:
            mine = [p for p, o in self.owner.items() if o == i]
            if mine:
                parts = [["in", p] for p in mine]
                self.op(i, "invoke", "rebalance", {"event": "revoke", "partitions": parts})
                self.op(
                    i,
                    "ok",
                    "rebalance",
                    {
                        "event": "revoke",
                        "partitions": parts,
                        "generation": self.gen - 1,
                        "member_id": f"m{i}",
                    },
                )
        self.owner = {p: instances[p % len(instances)] for p in range(self.partitions)}
        for i in instances:
            parts = [["in", p] for p, o in self.owner.items() if o == i]
            self.op(i, "invoke", "rebalance", {"event": "assign", "partitions": parts})
            self.op(
                i,
                "ok",
                "rebalance",
                {
                    "event": "assign",
                    "partitions": parts,
                    "generation": self.gen,
                    "member_id": f"m{i}",
                },
            )

    def txn(self, inst: int, max_n: int, ok: bool = True, hijack: bool = False) -> bool:
        parts = sorted(p for p, o in self.owner.items() if o == inst)
        inputs = []
        for p in parts:
            pos = self.committed[p]
            while pos < len(self.log[p]) and len([x for x in inputs if x[0] == p]) < max_n:
                if self.log[p][pos] is not None:
                    inputs.append([p, pos, self.log[p][pos]])
                pos += 1
        if not inputs:
            return False
        if hijack:
            self.op("nemesis", "invoke", "start", {"kind": "hijack", "params": {}})
            self.op(
                "nemesis",
                "ok",
                "start",
                {"kind": "hijack", "params": {}, "transactional_id": self.tids[inst]},
            )
        self.seq[inst] += 1
        s = self.seq[inst]
        tid = self.tids[inst]
        self.op(
            inst,
            "invoke",
            "txn",
            {
                "txn": s,
                "transactional_id": tid,
                "generation": self.gen,
                "member_id": f"m{inst}",
                "inputs": inputs,
            },
        )
        outputs = []
        new_off = {}
        for p, o, v in inputs:
            outputs.append([p % self.partitions, None, "out-" + v, p, o])
            new_off[p] = o + 1
        # positions past skipped aborted records at the end of what was read
        for p in new_off:
            while new_off[p] < len(self.log[p]) and self.log[p][new_off[p]] is None:
                new_off[p] += 1
        offsets = sorted([p, n] for p, n in new_off.items())
        if ok:
            for p, o, v in inputs:
                hdr = {
                    "src-topic": "in",
                    "src-partition": str(p),
                    "src-offset": str(o),
                    "instance": str(inst),
                    "transactional-id": tid,
                    "generation": str(self.gen),
                    "member-id": f"m{inst}",
                    "txn-seq": str(s),
                }
                self.out[p % self.partitions].append(
                    {"key": v, "value": "out-" + v, "headers": hdr}
                )
            for p, n in offsets:
                self.committed[p] = n
            self.op(inst, "ok", "txn", {"txn": s, "outputs": outputs, "offsets": offsets})
        else:
            err = {"stage": "deliberate-abort", "code": "DELIBERATE_ABORT", "message": "x"}
            err |= {"fatal": False, "abortable": True, "retriable": False}
            self.op(inst, "fail", "txn", {"txn": s, "outputs": outputs, "offsets": offsets}, err)
            rp = [["in", p] for p in parts]
            self.op(inst, "invoke", "rewind", {"partitions": rp})
            self.op(
                inst,
                "ok",
                "rewind",
                {"partitions": rp, "offsets": [[p, self.committed[p]] for p in parts]},
            )
        return True

    def drain_all(self, instances: list[int]) -> None:
        progress = True
        while progress:
            progress = False
            for i in instances:
                progress = self.txn(i, 4) or progress

    # -- the end --------------------------------------------------------------------------

    def finish(
        self,
        hanging: bool = False,
        *,
        quiet_s: float = 0.0,
        find_hanging: list[dict[str, str]] | None = None,
    ) -> None:
        """The final phase: drain, reads, offsets, watermarks (``hanging``: output partition 0
        has its LSO one below its HWM), after ``quiet_s`` without any client op, and, if
        given, a find-hanging op whose broker 1 lists these rows."""
        self.skew += int(quiet_s * 1e9)
        targets = [[p, len(self.log[p])] for p in range(self.partitions)]
        offs = [[p, self.committed[p]] for p in range(self.partitions)]
        self.op("final", "invoke", "drain", {"group": "g", "topic": "in", "targets": targets})
        self.op(
            "final",
            "ok",
            "drain",
            {"group": "g", "topic": "in", "targets": targets, "offsets": offs, "seconds": 0.1},
        )
        for p in range(self.partitions):
            recs = [
                [r.get("offset", k), r["key"], r["value"], r["headers"]]
                for k, r in enumerate(self.out[p])
            ]
            for iso in ("read_committed", "read_uncommitted"):
                v = {"topic": "out", "partition": p, "isolation": iso}
                self.op("final", "invoke", "read", v)
                self.op("final", "ok", "read", v | {"records": recs})
        self.op("final", "invoke", "group-offsets", {"group": "g"})
        self.op(
            "final",
            "ok",
            "group-offsets",
            {"group": "g", "offsets": [["in", p, o] for p, o in offs]},
        )
        for topic in ("in", "out"):
            parts = []
            for p in range(self.partitions):
                end = len(self.log[p]) if topic == "in" else self.ends.get(p, len(self.out[p]))
                lso = end - 1 if hanging and topic == "out" and p == 0 else end
                parts.append({"partition": p, "low": 0, "lso": lso, "hwm": end})
            self.op("final", "invoke", "watermarks", {"topic": topic})
            self.op("final", "ok", "watermarks", {"topic": topic, "partitions": parts})
        if find_hanging is not None:
            self.op("final", "invoke", "find-hanging", {"brokers": [1, 2]})
            res = [{"broker": 1, "rows": find_hanging}, {"broker": 2, "rows": []}]
            self.op("final", "ok", "find-hanging", {"brokers": [1, 2], "results": res})

    def write(self, run_dir: Path, *, timeout_ms: int | None = None) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"workload": "eos"}
        if timeout_ms is not None:
            meta["workload_options"] = {"transaction_timeout_ms": timeout_ms}
        header = {"history_format": 1, "kind": "merged", "meta": meta}
        with open(run_dir / "history.jsonl", "w") as fh:
            fh.write(json.dumps(header) + "\n")
            for o in self.ops:
                fh.write(json.dumps(o, separators=(",", ":")) + "\n")
        return run_dir


def simulate(seed: int, *, partitions: int = 3, hijack: bool = False) -> Sim:
    """A random but correct run: seeds, poison, rebalances, commits, aborts with rewinds."""
    rnd = random.Random(seed)
    s = Sim(partitions=partitions)
    insts = [0, 1]
    for i in insts:
        s.start(i)
    s.rebalance(insts)
    hijacked = False
    for _step in range(rnd.randint(4, 14)):
        r = rnd.random()
        if r < 0.3:
            s.seed(rnd.randint(1, 8))
        elif r < 0.38:
            s.poison(rnd.randint(1, 3))
        elif r < 0.48:
            s.rebalance(rnd.sample(insts, rnd.randint(1, 2)))
        else:
            i = rnd.choice(sorted(set(s.owner.values())))
            hj = hijack and not hijacked
            if s.txn(i, rnd.randint(1, 5), ok=rnd.random() < 0.8 or hj, hijack=hj):
                hijacked = hijacked or hj
    s.seed(3)
    if hijack and not hijacked:
        s.txn(s.owner[0], 3, hijack=True)
    s.drain_all(sorted(set(s.owner.values())))
    return s


def mutate(s: Sim, kind: str, rnd: random.Random) -> bool:
    """Break one exactly-once promise in the simulated drain; False if impossible here."""
    parts = [p for p in s.out if s.out[p]]
    if not parts:
        return False
    p = rnd.choice(parts)
    recs = s.out[p]
    if kind == "lost":
        recs.pop(rnd.randrange(len(recs)))
    elif kind == "duplicate":
        k = rnd.randrange(len(recs))
        recs.insert(k + 1, dict(recs[k]))
    elif kind == "order":
        if len(recs) < 2:
            return False
        k = rnd.randrange(len(recs) - 1)
        recs[k], recs[k + 1] = recs[k + 1], recs[k]
    elif kind == "aborted-read":
        v = f"x{s.next_poison:06d}"
        s.poison(1)
        hdr = dict(recs[-1]["headers"]) | {
            "src-partition": "0",
            "src-offset": str(len(s.log[0]) - 2),
        }
        recs.append({"key": v, "value": "out-" + v, "headers": hdr})
    elif kind == "zombie-write":
        newest = max(recs, key=lambda r: int(r["headers"]["generation"]))
        h = newest["headers"]
        other = "1" if h["instance"] == "0" else "0"
        old = dict(h) | {"instance": other, "generation": str(int(h["generation"]) - 1)}
        old["txn-seq"] = "999"
        recs.append({"key": newest["key"], "value": newest["value"], "headers": old})
    elif kind == "committed-in-later-transaction":
        # KIP-890: a produce request of a transaction that failed (and was aborted) lands
        # late and joins a later transaction, whose commit makes it visible.
        failed = [o for o in s.ops if o["f"] == "txn" and o["type"] == "fail"]
        if not failed:  # make one: a transaction that fails, then its redo commits
            i = s.owner[0]
            s.seed(s.partitions)
            s.txn(i, 1, ok=False)
            s.drain_all(sorted(set(s.owner.values())))
            failed = [o for o in s.ops if o["f"] == "txn" and o["type"] == "fail"]
        done = rnd.choice(failed)
        inst, seq = done["process"], done["value"]["txn"]
        inv = next(
            o
            for o in s.ops
            if o["f"] == "txn" and o["type"] == "invoke" and o["process"] == inst
            and o["value"]["txn"] == seq
        )  # fmt: skip
        src_p, src_o, v = inv["value"]["inputs"][0]
        s.out[src_p % s.partitions].append(
            {"key": v, "value": "out-" + v, "headers": _headers(s, inst, seq, inv, src_p, src_o)}
        )
    elif kind == "torn-transaction":
        sizes: dict[tuple[str, str], int] = {}
        for q in parts:
            for r in s.out[q]:
                k = (r["headers"]["instance"], r["headers"]["txn-seq"])
                sizes[k] = sizes.get(k, 0) + 1
        multi = sorted(k for k, n in sizes.items() if n > 1)
        if not multi:
            return False
        k = rnd.choice(multi)
        for q in parts:
            for i, r in enumerate(s.out[q]):
                if (r["headers"]["instance"], r["headers"]["txn-seq"]) == k:
                    s.out[q].pop(i)
                    return True
    elif kind == "started-below-committed":
        # A member given a partition starts it at 0, below the committed offset (what F5
        # does): every input it reads again gets a second output.
        started = [q for q in range(s.partitions) if s.committed.get(q, 0) > 0]
        if not started:
            return False
        q = rnd.choice(started)
        s.rebalance(sorted(set(s.owner.values())))
        before = dict(s.committed)
        s.committed[q] = 0
        if not s.txn(s.owner[q], 2):
            s.committed = before
            return False
        s.committed = {k: max(v, before.get(k, 0)) for k, v in s.committed.items()}
    else:
        raise ValueError(kind)
    return True


def _headers(s: Sim, inst: int, seq: int, inv: dict[str, Any], p: int, o: int) -> dict[str, str]:
    """The headers a processor puts on the output of input ``(p, o)`` in transaction ``inv``."""
    v = inv["value"]
    return {
        "src-topic": "in",
        "src-partition": str(p),
        "src-offset": str(o),
        "instance": str(inst),
        "transactional-id": s.tids[inst],
        "generation": str(v["generation"]),
        "member-id": v["member_id"],
        "txn-seq": str(seq),
    }


# ------------------------------------------------------------------------------------------
# A broker log for a simulated run


def _dump_line(partition: int, offset: int, pid: int, **kw: Any) -> dict[str, Any]:
    """One record of a replica of the output topic (node 1), as the dump writes it."""
    marker = kw.get("marker")
    rec = {"node": 1, "kind": "data", "topic": "out", "partition": partition, "offset": offset}
    rec |= {"producerId": pid, "producerEpoch": kw.get("epoch", 0), "isTransactional": True}
    rec |= {"isControl": marker is not None, "partitionLeaderEpoch": 0}
    rec |= {"create_time": kw.get("create_time", 1_767_225_600_000 + offset)}
    if marker:
        return rec | {"marker": marker, "coordinator_epoch": 0}
    return rec | {"key": kw.get("key", "k"), "payload": kw.get("payload", "v")}


def _pid(r: dict[str, Any]) -> int:
    return 1000 + int(r["headers"]["instance"])


Txn = tuple[str, str]  # (instance, txn-seq) as the headers carry them


def lay_out(
    s: Sim,
    *,
    late: dict[int, tuple[Txn, Txn, bool]] | None = None,
    open_tail: dict[int, str] | None = None,
) -> list[dict[str, Any]]:
    """Give every drained record its offset in a broker log laid out as Kafka writes one
    (TV0/1: a producer id per instance, epoch 0): each writer transaction's records, then
    its COMMIT marker. Returns the dump's records; ``s.ends`` gets each log end offset.

    ``late``: output partition -> (writer, joined, aborted): the records of transaction
    ``writer`` there have no marker of their own and belong to transaction ``joined`` (the
    next marker ends both); with ``aborted``, ``writer``'s ABORT marker precedes them (KIP-890:
    the marker was written, then the delayed produce request arrived). ``open_tail``: output
    partition -> the value of a record of producer 1999 that no marker ever ends (a hanging
    transaction, above the LSO, so no drain read it).
    """
    lines: list[dict[str, Any]] = []
    done = {
        (str(o["process"]), str(o["value"]["txn"])): o
        for o in s.ops
        if o["f"] == "txn" and o["type"] == "ok"
    }
    for p in range(s.partitions):
        off, prev, marked = 0, None, False
        writer, joined, aborted = (late or {}).get(p, (None, None, False))
        for r in s.out[p]:
            h = r["headers"]
            group = (h["instance"], h["txn-seq"])
            is_late = group == writer
            if is_late:
                group = joined
            if prev is not None and group != prev[0]:
                lines.append(_dump_line(p, off, prev[1], marker="COMMIT"))
                off += 1
            if is_late and aborted and not marked:
                lines.append(_dump_line(p, off, _pid(r), marker="ABORT"))
                off, marked = off + 1, True
            r["offset"] = off
            _delivered(done.get((h["instance"], h["txn-seq"])), h, p, off)
            lines.append(_dump_line(p, off, _pid(r), key=r["key"], payload=r["value"]))
            off += 1
            prev = (group, _pid(r))
        if prev is not None:
            lines.append(_dump_line(p, off, prev[1], marker="COMMIT"))
            off += 1
        if p in (open_tail or {}):
            lines.append(_dump_line(p, off, 1999, payload=(open_tail or {})[p]))
            off += 1
        s.ends[p] = off
    return lines


def _delivered(done: dict[str, Any] | None, h: dict[str, str], p: int, off: int) -> None:
    """Fill in the delivery report (output partition and offset) a committed transaction's
    completion records for the output of input ``h``'s source position."""
    for out in (done or {}).get("value", {}).get("outputs", []):
        if [str(out[3]), str(out[4])] == [h["src-partition"], h["src-offset"]]:
            out[0], out[1] = p, off


def write_dump(run: Path, lines: list[dict[str, Any]]) -> None:
    dump = run / "evidence" / "logdump.jsonl"
    dump.parent.mkdir(parents=True, exist_ok=True)
    text = [json.dumps({"logdump_format": 1, "nodes": 1})] + [json.dumps(r) for r in lines]
    dump.write_text("\n".join(text) + "\n")


# ------------------------------------------------------------------------------------------
# Fixtures and helpers


def counts(result: dict[str, Any]) -> dict[str, Any]:
    return {k: (r.get("valid"), r.get("count")) for k, r in result["checkers"].items()}


def both(spark: Any, run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run Spark and the reference; their whole results must be equal, examples included."""
    got = check_eos(run_dir, spark=spark, max_examples=3)
    ref = check_eos_py(run_dir, max_examples=3)
    assert counts(got) == counts(ref), (got["anomalies"], ref["anomalies"])
    for name in SAFETY_CHECKS:
        assert got["checkers"][name] == ref["checkers"][name], name
    assert got["liveness"] == ref["liveness"]
    assert got == ref
    errors = {k: r["error"] for k, r in got["checkers"].items() if r["valid"] == "unknown"}
    assert not errors, errors  # two engines failing alike is no agreement
    for name, r in got["checkers"].items():
        for ex in r["examples"]:
            assert isinstance(ex["values"], list)
            assert list(ex) == list(lookup(name, name).example_of(ex))  # the defined shape
    return got, ref


def built(tmp: Path, seed: int, *, mutations: tuple[str, ...] = (), **kw: Any) -> Path:
    fin = {"hanging": kw.pop("hanging", False)}
    s = simulate(seed, **kw)
    rnd = random.Random(seed)
    for m in mutations:
        assert mutate(s, m, rnd), m
    s.finish(**fin)
    return s.write(tmp)


def real(tmp: Path, name: str) -> Path:
    d = tmp / name
    d.mkdir()
    with (
        gzip.open(DATA / f"{name}.history.jsonl.gz", "rb") as src,
        open(d / "history.jsonl", "wb") as dst,
    ):
        shutil.copyfileobj(src, dst)
    return d


# ------------------------------------------------------------------------------------------
# Hand-built runs


def test_clean_run_passes_every_check(spark: Any, tmp_path: Path) -> None:
    got, _ref = both(spark, built(tmp_path, 7))
    assert got["valid"] is True and got["anomalies"] == {}
    assert set(got["checkers"]) == set(SAFETY_CHECKS) | {"invalid-state-commit"}
    assert all(r["valid"] is True and r["count"] == 0 for r in got["checkers"].values())
    assert got["liveness"]["valid"] is True


ANOMALY_RUNS: dict[str, dict[str, Any]] = {
    "lost": {"mutations": ("lost",)},
    "duplicate": {"mutations": ("duplicate",)},
    "order": {"mutations": ("order",)},
    "aborted-read": {"mutations": ("aborted-read",)},
    "zombie-write": {"mutations": ("zombie-write",)},
    "torn-transaction": {"mutations": ("torn-transaction",)},
    "hanging-transaction": {"hanging": True},
    "started-below-committed": {"mutations": ("started-below-committed",)},
}


@pytest.mark.parametrize("kind", sorted(ANOMALY_RUNS))
def test_each_anomaly_detected_by_both_engines(spark: Any, tmp_path: Path, kind: str) -> None:
    _got, ref = both(spark, built(tmp_path, 11, **ANOMALY_RUNS[kind]))
    assert ref["valid"] is False
    assert ref["anomalies"].get(kind, 0) >= 1, ref["anomalies"]
    assert "values" in ref["checkers"][kind]["examples"][0]


def test_every_anomaly_detected_by_spark_and_reference(spark: Any, tmp_path: Path) -> None:
    """One run with every anomaly planted (Spark runs are costly on 2 cores); both agree."""
    muts = tuple(m for m in MUTATIONS)
    got, _ref = both(spark, built(tmp_path, 11, mutations=muts, hanging=True, hijack=True))
    assert got["valid"] is False
    # premature-commit needs a broker log dump (marker times): its own test plants one.
    for kind in (k for k in SAFETY_CHECKS if k != "premature-commit"):
        assert got["anomalies"].get(kind, 0) >= 1, (kind, got["anomalies"])
        assert got["checkers"][kind]["examples"][0]["values"] is not None
    reasons = {e["reason"] for e in got["checkers"]["zombie-write"]["examples"]}
    assert "fenced" in reasons


def test_a_commit_refused_with_invalid_txn_state_is_named_f13_and_the_run_stays_valid(
    spark: Any, tmp_path: Path
) -> None:
    """KAFKA-20785: a processor's rolled-back transaction whose commit comes back
    INVALID_TXN_STATE (fatal) instead of fenced. Nothing was lost: both engines report it as
    ``invalid-state-commit`` beside a valid verdict, and the judge names finding F13 on it."""
    s = simulate(11)
    s.seed(2)
    assert s.txn(s.owner[0], 1, ok=False)
    refused = [o for o in s.ops if o["f"] == "txn" and o["type"] == "fail"][-1]
    refused["type"] = "info"
    refused["error"] = {"stage": "commit", "code": "INVALID_TXN_STATE", "message": "refused"}
    refused["error"] |= {"fatal": True, "abortable": False, "retriable": False}
    s.drain_all(sorted(set(s.owner.values())))
    s.finish()
    got, _ref = both(spark, s.write(tmp_path))
    assert got["valid"] is True
    assert got["anomalies"] == {"invalid-state-commit": 1}
    (ex,) = got["checkers"]["invalid-state-commit"]["examples"]
    assert (ex["instance"], ex["code"]) == (refused["process"], "INVALID_TXN_STATE")
    assert [op["index"] for op in ex["ops"]][-1] == refused["index"]
    merged = merge_verdicts({"eos": got})
    assert merged["valid"] is True and merged["bad_anomaly_types"] == []
    assert [f["id"] for f in merged["known_findings"]] == ["F13"]
    assert merged["known_findings"][0]["on_valid"] is True
    # A refusal the client had to take for fencing is not the bug.
    refused["error"]["code"] = "PRODUCER_FENCED"
    again = check_eos_py(s.write(tmp_path / "fenced"))
    assert again["anomalies"] == {} and "known_findings" not in merge_verdicts({"eos": again})


def test_header_less_outputs_are_mapped_by_value_beside_headed_ones(
    spark: Any, tmp_path: Path
) -> None:
    """The Java copier writes no source headers: its outputs are mapped back to their inputs
    by value. A run where one output partition has no headers at all, with a duplicate on it,
    gives the same whole result in both engines, the duplicate named by its source position."""
    s = simulate(13)
    out0 = s.out[0]
    assert out0, "the simulation wrote nothing to output partition 0"
    for r in out0:
        r["headers"] = {}
    out0.append(dict(out0[0]))
    s.finish()
    got, _ref = both(spark, s.write(tmp_path))
    assert got["anomalies"].get("duplicate", 0) >= 1, got["anomalies"]
    ident = got["checkers"]["duplicate"]["examples"][0]
    assert "v:" not in json.dumps(ident), ident  # found by value, named by position


def test_fenced_instance_output_is_zombie_write(spark: Any, tmp_path: Path) -> None:
    _got, ref = both(spark, built(tmp_path, 5, hijack=True))
    assert ref["anomalies"].get("zombie-write", 0) >= 1
    ex = ref["checkers"]["zombie-write"]["examples"][0]
    assert ex["reason"] == "fenced"
    assert any(o["process"] == "nemesis" for o in ex["ops"])  # the fencing op is among them


def test_poison_input_in_a_txn_is_aborted_read(spark: Any, tmp_path: Path) -> None:
    s = simulate(2)
    s.poison(1)
    inst = s.owner[0]
    s.seq[inst] += 1
    bad = [[0, len(s.log[0]) - 2, f"x{s.next_poison - 1:06d}"]]
    s.op(
        inst,
        "invoke",
        "txn",
        {
            "txn": s.seq[inst],
            "transactional_id": s.tids[inst],
            "generation": s.gen,
            "member_id": "m",
            "inputs": bad,
        },
    )
    s.finish()
    _got, ref = both(spark, s.write(tmp_path))
    ex = ref["checkers"]["aborted-read"]["examples"]
    assert [e["kind"] for e in ex] == ["poison-input"] and ex[0]["values"] == bad[0][2:]


def _dump_record(partition: int, offset: int, pid: int, marker: str | None = None) -> dict:
    rec = {"node": 1, "kind": "data", "topic": "out", "partition": partition, "offset": offset}
    rec |= {"producerId": pid, "producerEpoch": 0, "isTransactional": True}
    rec |= {"isControl": marker is not None, "partitionLeaderEpoch": 0}
    return rec | ({"marker": marker, "coordinator_epoch": 0} if marker else {"payload": "v"})


def test_outputs_the_log_shows_aborted_or_open_are_aborted_reads(
    spark: Any, tmp_path: Path
) -> None:
    """The broker log dump says which drained positions belong to an aborted or still open
    transaction: producer 2 wrote one record and aborted, producer 3 one and never ended;
    every other record is its own producer's committed transaction. Each example carries
    the position's log evidence."""
    s = simulate(3)
    s.finish()
    run = s.write(tmp_path)
    p = next(q for q in sorted(s.out) if len(s.out[q]) >= 3)
    n = len(s.out[p])
    pids = [{0: 2, 1: 3}.get(k, 100 + k) for k in range(n)]
    recs = [_dump_record(p, k, pid) for k, pid in enumerate(pids)]
    recs += [_dump_record(p, n + k, pid, "COMMIT") for k, pid in enumerate(pids[2:])]
    recs += [_dump_record(p, n + n - 2, 2, "ABORT")]
    dump = run / "evidence" / "logdump.jsonl"
    dump.parent.mkdir()
    lines = [json.dumps({"logdump_format": 1, "nodes": 1})] + [json.dumps(r) for r in recs]
    dump.write_text("\n".join(lines) + "\n")
    got, _ref = both(spark, run)
    ex = got["checkers"]["aborted-read"]["examples"]
    assert [(e["kind"], e["records"][0]["offset"]) for e in ex] == [
        ("aborted-in-log", 0),
        ("open-in-log", 1),
    ]
    assert got["anomalies"] == {"aborted-read": 2}
    aborted, opened = ex[0]["log"], ex[1]["log"]
    assert (aborted["producerId"], aborted["outcome"]) == (2, "aborted")
    assert aborted["end_marker"] == {"offset": 2 * n - 2, "outcome": "ABORT", "epoch": 0}
    assert [r["offset"] for r in aborted["records"]] == [0, 2 * n - 2]
    assert (opened["outcome"], opened["end_marker"], opened["prior_marker"]) == ("open", None, None)


# ------------------------------------------------------------------------------------------
# committed-in-later-transaction (KIP-890) and hanging partitions, with a broker log


def _late_write(s: Sim, *, fail: bool) -> tuple[int, int, int, int]:
    """Instance ``i`` runs transaction N then M, each on one new input of every partition it
    owns. ``fail``: N fails (and is aborted), M redoes its inputs (KIP-890's setting); else
    both commit and N is then recorded ``info`` (outcome unknown). Returns (i, N, M, q): q is
    an output partition both wrote to (N's first input's)."""
    i = s.owner[0]
    s.seed(s.partitions)
    n_seq = s.seq[i] + 1
    assert s.txn(i, 1, ok=not fail)
    if not fail:
        s.seed(s.partitions)
    assert s.txn(i, 1)
    m_seq = s.seq[i]
    s.drain_all(sorted(set(s.owner.values())))
    inv = next(
        o for o in s.ops
        if o["f"] == "txn" and o["type"] == "invoke" and o["process"] == i
        and o["value"]["txn"] == n_seq
    )  # fmt: skip
    src_p, src_o, v = inv["value"]["inputs"][0]
    q = src_p % s.partitions
    if fail:
        # The delayed produce request of N lands after N's ABORT marker, before M's records.
        first_m = next(
            k for k, r in enumerate(s.out[q]) if r["headers"]["txn-seq"] == str(m_seq)
            and r["headers"]["instance"] == str(i)
        )  # fmt: skip
        late = {"key": v, "value": "out-" + v, "headers": _headers(s, i, n_seq, inv, src_p, src_o)}
        s.out[q].insert(first_m, late)
    else:
        done = next(
            o for o in s.ops
            if o["f"] == "txn" and o["type"] == "ok" and o["process"] == i
            and o["value"]["txn"] == n_seq
        )  # fmt: skip
        done["type"] = "info"
        done["error"] = {"stage": "commit", "code": "_TIMED_OUT", "message": "commit unknown"}
    return i, n_seq, m_seq, q


def test_a_late_write_of_an_aborted_transaction_committed_by_the_next(
    spark: Any, tmp_path: Path
) -> None:
    """KIP-890's motivating case: N's late record joins M; both engines name it
    ``writer-aborted``, with the later transaction and the log's ABORT and COMMIT markers
    around it; the report's journey of its value shows the broker log's step."""
    s = simulate(4)
    i, n_seq, m_seq, q = _late_write(s, fail=True)
    t = (str(i), str(n_seq)), (str(i), str(m_seq))
    lines = lay_out(s, late={q: (t[0], t[1], True)})
    s.finish()
    run = s.write(tmp_path / "run")
    write_dump(run, lines)
    got, _ref = both(spark, run)
    # Its symptoms too: the input is also in M (duplicate), and N, which had inputs on other
    # partitions, is partly visible (torn). The new type names the cause.
    assert got["anomalies"] == {
        "committed-in-later-transaction": 1,
        "duplicate": 1,
        "torn-transaction": 1,
    }
    (ex,) = got["checkers"]["committed-in-later-transaction"]["examples"]
    assert (ex["kind"], ex["txn"], ex["outcome"]) == ("writer-aborted", [i, n_seq], "fail")
    assert ex["later"] == {"txn": [i, m_seq], "outcome": "ok"}
    log = ex["log"]
    assert log["producerId"] == 1000 + i and log["outcome"] == "committed"
    assert log["prior_marker"]["outcome"] == "ABORT" and log["end_marker"]["outcome"] == "COMMIT"
    assert log["prior_marker"]["offset"] < ex["records"][0]["offset"] < log["end_marker"]["offset"]
    assert [r.get("marker") for r in log["records"]] == ["ABORT", None, "COMMIT"]
    assert {(o["value"]["txn"], o["type"]) for o in ex["ops"]} == {
        (n_seq, "invoke"),
        (n_seq, "fail"),
        (m_seq, "invoke"),
        (m_seq, "ok"),
    }
    # The report: the value's journey has the broker log's step beside the history's ops.
    from harness.report.data import load_run

    (run / "results.json").write_text(json.dumps({"valid": False, "checkers": got["checkers"]}))
    data = load_run(run)
    steps = data.journeys[ex["values"][0]]
    logged = [st for st in steps if st["f"] == "log"]
    assert len(logged) == 1 and "ABORT marker" in logged[0]["what"]
    assert logged[0]["process"] == "broker 1"
    from harness.report.render import write_report

    page = write_report(run).read_text()
    assert "broker 1" in page and "committed-in-later-transaction" in page
    # Without the dump the history alone still names it, without the log's evidence.
    (run / "evidence" / "logdump.jsonl").unlink()
    shutil.rmtree(run / ".parquet", ignore_errors=True)
    ref = check_eos_py(run, max_examples=3)["checkers"]["committed-in-later-transaction"]
    (bare,) = ref["examples"]
    assert bare["kind"] == "writer-aborted" and "log" not in bare and "later" not in bare


def test_checks_run_before_the_dump_give_the_verdict_of_a_check_from_scratch(
    spark: Any, tmp_path: Path
) -> None:
    """While the cluster still dumps its logs the checks that need no dump run early; the
    ones that do (for their counts, or for an example's evidence) wait for it. The verdict
    is the one a check from scratch gives, evidence included."""
    s = simulate(4)
    i, n_seq, m_seq, q = _late_write(s, fail=True)
    lines = lay_out(s, late={q: ((str(i), str(n_seq)), (str(i), str(m_seq)), True)})
    s.finish()
    run = s.write(tmp_path / "run")
    eos_run.prepare_eos(spark, run, 3)
    (early,) = eos_run._EARLY.values()
    assert {"duplicate", "order", "zombie-write", ""} <= set(early)
    needs_dump = {"committed-in-later-transaction", "aborted-read", "premature-commit"}
    assert not needs_dump & set(early)
    assert early["duplicate"]["count"] == 1
    write_dump(run, lines)
    got = check_eos(run, spark=spark, max_examples=3)
    assert not eos_run._EARLY  # taken by the check
    assert got["anomalies"]["committed-in-later-transaction"] == 1
    assert got["checkers"]["committed-in-later-transaction"]["examples"][0]["log"]
    fresh = tmp_path / "fresh"
    shutil.copytree(run, fresh, ignore=shutil.ignore_patterns(".parquet"))
    assert got == check_eos(fresh, spark=spark, max_examples=3)
    assert got == check_eos_py(fresh, max_examples=3)


def test_a_commit_written_before_its_transaction_failed_is_a_premature_commit(
    spark: Any, tmp_path: Path
) -> None:
    """KAFKA-17754: a stale EndTxn commits transaction N while its client is still in it; the
    client then fails N and its successor redoes the inputs. The record N wrote before the
    stale commit is visible, under a COMMIT marker older than N's failure: both engines name
    it premature-commit (not committed-in-later-transaction), with both times."""
    s = simulate(4)
    i = s.owner[0]
    s.seed(s.partitions)
    n_seq = s.seq[i] + 1
    assert s.txn(i, 1, ok=False)
    s.drain_all(sorted(set(s.owner.values())))
    inv, fail = (
        next(
            o for o in s.ops
            if o["f"] == "txn" and o["type"] == t and o["process"] == i
            and o["value"]["txn"] == n_seq
        )
        for t in ("invoke", "fail")
    )  # fmt: skip
    fail["wall"] = "2026-01-01T00:00:05.000000Z"  # the client failed N 5 s after the marker
    src_p, src_o, v = inv["value"]["inputs"][0]
    q = src_p % s.partitions
    stale = {"key": v, "value": "out-" + v, "headers": _headers(s, i, n_seq, inv, src_p, src_o)}
    s.out[q].insert(0, stale)  # N's record, then the stale EndTxn's COMMIT marker
    lines = lay_out(s)
    s.finish()
    run = s.write(tmp_path / "run")
    write_dump(run, lines)
    got, _ref = both(spark, run)
    assert got["anomalies"]["premature-commit"] == 1
    assert "committed-in-later-transaction" not in got["anomalies"]
    (ex,) = got["checkers"]["premature-commit"]["examples"]
    assert (ex["kind"], ex["txn"], ex["outcome"]) == ("commit-before-failure", [i, n_seq], "fail")
    assert ex["values"] == [v] and ex["records"][0]["offset"] == 0
    assert ex["marker_ms"] == 1_767_225_600_001 and ex["failed_ms"] == 1_767_225_605_000
    assert ex["early_ms"] == 5000 - 1
    assert ex["log"]["end_marker"] == {"offset": 1, "outcome": "COMMIT", "epoch": 0}
    assert {(o["value"]["txn"], o["type"]) for o in ex["ops"]} == {
        (n_seq, "invoke"),
        (n_seq, "fail"),
    }
    # Without the dump there is no marker time: the history alone calls it writer-aborted.
    (run / "evidence" / "logdump.jsonl").unlink()
    shutil.rmtree(run / ".parquet", ignore_errors=True)
    bare = check_eos_py(run, max_examples=3)
    assert "premature-commit" not in bare["anomalies"]
    (ex,) = bare["checkers"]["committed-in-later-transaction"]["examples"]
    assert ex["kind"] == "writer-aborted"


def test_records_the_log_commits_with_a_later_transaction_are_merged_in_log(
    spark: Any, tmp_path: Path
) -> None:
    """N's outcome is unknown (``info``) and its records on one partition have no marker of
    their own: M's COMMIT marker ended them. Only the log can tell; both engines agree."""
    s = simulate(6)
    i, n_seq, m_seq, q = _late_write(s, fail=False)
    lines = lay_out(s, late={q: ((str(i), str(n_seq)), (str(i), str(m_seq)), False)})
    s.finish()
    run = s.write(tmp_path)
    write_dump(run, lines)
    got, _ref = both(spark, run)
    assert set(got["anomalies"]) == {"committed-in-later-transaction"}
    exs = got["checkers"]["committed-in-later-transaction"]["examples"]
    assert {(e["kind"], tuple(e["txn"]), e["outcome"]) for e in exs} == {
        ("merged-in-log", (i, n_seq), "info")
    }
    assert all(e["later"] == {"txn": [i, m_seq], "outcome": "ok"} for e in exs)
    assert all(
        e["log"]["prior_marker"]["outcome"] == "COMMIT" for e in exs if e["log"]["prior_marker"]
    )


def test_a_lost_write_shows_where_its_output_went_and_what_the_log_holds_there(
    spark: Any, tmp_path: Path
) -> None:
    """A committed transaction's delivery report put an output at offset X, and the group
    committed past its input; the log now holds another producer's record at X (as after a
    truncation). ``lost`` and, for a transaction with more inputs, ``torn-transaction`` say
    where the output went and what the reference replica holds there, in both engines."""
    s = simulate(9)
    lines = lay_out(s)
    q = next(p for p in sorted(s.out) if s.out[p])
    gone = s.out[q].pop(len(s.out[q]) // 2)
    x = gone["offset"]
    at = next(k for k, d in enumerate(lines) if (d["partition"], d["offset"]) == (q, x))
    lines[at] = _dump_line(q, x, -1, payload="someone-else") | {"isTransactional": False}
    s.finish()
    run = s.write(tmp_path)
    write_dump(run, lines)
    got, _ref = both(spark, run)
    assert got["anomalies"] == {"lost": 1, "torn-transaction": 1}
    (lost,) = got["checkers"]["lost"]["examples"]
    h = gone["headers"]
    assert lost["input"] == [int(h["src-partition"]), int(h["src-offset"])]
    assert lost["written"] == [
        {"txn": [int(h["instance"]), int(h["txn-seq"])], "outcome": "ok", "output": [q, x]}
    ]
    assert lost["log"]["producerId"] == -1
    assert lost["log"]["records"][0]["payload"] == "someone-else"
    assert "not transactional" in lost["log"]["reason"]
    ident = f"{h['src-partition']}/{h['src-offset']}"
    (torn,) = got["checkers"]["torn-transaction"]["examples"]
    assert torn["txn"] == [int(h["instance"]), int(h["txn-seq"])] and torn["missing"] == [ident]
    assert torn["written"] == [{"input": ident, "output": [q, x]}]
    assert torn["log"] == lost["log"]


def test_a_partition_stuck_past_the_transaction_timeout_is_a_hang_find_hanging_confirms(
    spark: Any, tmp_path: Path
) -> None:
    """Output partition 0 ends in a transaction of producer 1999 that no marker ends; the
    watermarks, read 25 s after the last client op (timeout 10 s plus the coordinator's 10 s
    sweep), show its LSO stuck; broker 1's find-hanging lists the same partition. Every other
    check passes on this clean, fully logged run."""
    s = simulate(8)
    lines = lay_out(s, open_tail={0: "out-v999999"})
    row = {"Topic": "out", "Partition": "0", "ProducerId": "1999", "ProducerEpoch": "0"}
    s.finish(hanging=True, quiet_s=25.0, find_hanging=[row])
    run = s.write(tmp_path, timeout_ms=10_000)
    write_dump(run, lines)
    got, _ref = both(spark, run)
    assert got["anomalies"] == {"hanging-transaction": 2}
    stuck, listed = got["checkers"]["hanging-transaction"]["examples"]
    assert stuck["kind"] == "lso-below-hwm" and stuck["lso"] == s.ends[0] - 1
    assert stuck["timeout_ms"] == 10_000 and stuck["quiet_ms"] >= 25_000
    assert stuck["past_timeout"] is True and stuck["find_hanging"] == [1]
    assert stuck["values"] == ["v999999"]  # the input of the record the LSO is stuck on
    assert stuck["log"]["producerId"] == 1999 and stuck["log"]["outcome"] == "open"
    assert (listed["kind"], listed["broker"], listed["lso_below_hwm"]) == ("find-hanging", 1, True)
    # Read right after the clients stopped: not (yet) past the timeout.
    s2 = simulate(8)
    lay_out(s2, open_tail={0: "out-v999999"})
    s2.finish(hanging=True)
    run2 = s2.write(tmp_path / "soon", timeout_ms=10_000)
    soon = check_eos_py(run2)["checkers"]["hanging-transaction"]["examples"][0]
    assert soon["past_timeout"] is False and "find_hanging" not in soon and "log" not in soon


# ------------------------------------------------------------------------------------------
# Property tests (reference implementation: fast; Spark cross-checked on a few)

_PROPS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_PROPS
@given(seed=st.integers(0, 10**6), partitions=st.integers(1, 4))
def test_random_valid_histories_pass(tmp_path_factory: Any, seed: int, partitions: int) -> None:
    d = tmp_path_factory.mktemp("valid")
    r = check_eos_py(built(d, seed, partitions=partitions))
    assert r["valid"] is True, r["anomalies"]
    assert r["liveness"]["valid"] is True


@_PROPS
@given(seed=st.integers(0, 10**6), kind=st.sampled_from(MUTATIONS))
def test_mutations_fail_with_the_right_type(tmp_path_factory: Any, seed: int, kind: str) -> None:
    s = simulate(seed)
    if not mutate(s, kind, random.Random(seed)):
        return
    s.finish()
    r = check_eos_py(s.write(tmp_path_factory.mktemp("mut")))
    assert r["valid"] is False
    assert r["anomalies"].get(kind, 0) >= 1, (kind, r["anomalies"])


@_PROPS
@given(seed=st.integers(0, 10**6), partitions=st.integers(1, 4), fail=st.booleans())
def test_logged_runs_pass_until_a_late_write_joins_a_later_transaction(
    tmp_path_factory: Any, seed: int, partitions: int, fail: bool
) -> None:
    """A correct run laid out in a broker log as Kafka writes one is valid; the same run
    with one late write (KIP-890) is invalid with committed-in-later-transaction."""
    s = simulate(seed, partitions=partitions)
    clean = tmp_path_factory.mktemp("logged")
    lines = lay_out(s)
    s.finish()
    write_dump(s.write(clean), lines)
    r = check_eos_py(clean)
    assert r["valid"] is True, r["anomalies"]
    s = simulate(seed, partitions=partitions)
    i, n_seq, m_seq, q = _late_write(s, fail=fail)
    lines = lay_out(s, late={q: ((str(i), str(n_seq)), (str(i), str(m_seq)), fail)})
    s.finish()
    late = tmp_path_factory.mktemp("late")
    write_dump(s.write(late), lines)
    r = check_eos_py(late)
    assert r["anomalies"].get("committed-in-later-transaction", 0) >= 1, r["anomalies"]
    kinds = {e["kind"] for e in r["checkers"]["committed-in-later-transaction"]["examples"]}
    assert kinds == {"writer-aborted" if fail else "merged-in-log"}


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 10**6),
    kinds=st.sets(st.sampled_from(MUTATIONS), max_size=3),
    partitions=st.integers(1, 4),
    hijack=st.booleans(),
)
def test_spark_agrees_on_random_histories(
    spark: Any, tmp_path_factory: Any, seed: int, kinds: set[str], partitions: int, hijack: bool
) -> None:
    """Whole results equal on generated histories, valid or broken in up to three ways."""
    s = simulate(seed, partitions=partitions, hijack=hijack)
    rnd = random.Random(seed)
    applied = [k for k in MUTATIONS if k in kinds and mutate(s, k, rnd)]
    s.finish()
    got, _ref = both(spark, s.write(tmp_path_factory.mktemp("agree")))
    for k in applied:
        assert got["anomalies"].get(k, 0) >= 1, (k, got["anomalies"])


def test_a_read_msgspec_refuses_still_counts(spark: Any, tmp_path: Path) -> None:
    """A lone surrogate escape is JSON a Recorder writes and msgspec refuses: the read holding
    it is decoded by Python instead, so its records are all judged: the duplicate planted in
    it is found."""
    s = simulate(3)
    s.out[0][0]["headers"]["note"] = "\ud800"
    s.out[0].insert(1, dict(s.out[0][0]))
    s.finish()
    run = s.write(tmp_path)
    assert b"\\ud800" in (run / "history.jsonl").read_bytes()
    got, _ref = both(spark, run)
    assert got["anomalies"] == {"duplicate": 1}, got["anomalies"]


# ------------------------------------------------------------------------------------------
# Real stored runs


@pytest.mark.parametrize("name", ["eos-zombie-31b409", "eos-java-050454"])
def test_real_exactly_once_runs_are_valid(spark: Any, tmp_path: Path, name: str) -> None:
    got, _ref = both(spark, real(tmp_path, name))
    assert got["valid"] is True, got["anomalies"]
    assert got["liveness"]["valid"] is True


def test_real_kafkajs_zombie_commits_the_inputs_its_successor_committed(
    spark: Any, tmp_path: Path
) -> None:
    """A correct KafkaJS processor made a zombie (docs/findings.md, F7): paused at its offset
    commit past its session timeout, it resumed after instance 2 had been assigned its
    partition and had committed the same 17 inputs, and its own transaction committed too
    (KafkaJS's sendOffsets carries no group metadata to fence it). Both engines: 17
    duplicates, every one written by instance 0's txn 7 and instance 2's txn 28."""
    got, _ref = both(spark, real(tmp_path, "eos-kafkajs-zombie-152534"))
    assert got["valid"] is False
    assert got["anomalies"] == {"duplicate": 17}
    writers = {
        tuple(sorted((r["headers"]["instance"], r["headers"]["txn-seq"]) for r in e["records"]))
        for e in got["checkers"]["duplicate"]["examples"]
    }
    assert writers == {(("0", "7"), ("2", "28"))}
    (f7,) = merge_verdicts({"eos": got}, findings=findings("kafkajs"))["known_findings"]
    assert merge_verdicts({"eos": got})["known_findings"] == [f7]  # client not recorded
    # Confluent's JavaScript client records generation -1 too, but its offset commit carries
    # the group metadata: the same shape in its run is not F7's mechanism.
    assert "known_findings" not in merge_verdicts({"eos": got}, findings=findings("confluent-js"))
    assert f7["id"] == "F7" and f7["link"] == "docs/findings.md#f7"
    assert f7["evidence"] == [
        "instance 0's transaction 7 and instance 2's transaction 28 both committed input 3/58, "
        "with no generation in the offset commit to fence the older member (3 duplicate "
        "example(s) have a copy from each)"
    ]


def test_real_at_least_once_run_has_duplicates(spark: Any, tmp_path: Path) -> None:
    got, _ref = both(spark, real(tmp_path, "eos-alo-607d3c"))
    assert got["valid"] is False
    assert got["anomalies"]["duplicate"] >= 1
    ex = got["checkers"]["duplicate"]["examples"][0]
    assert ex["copies"] >= 2 and len(ex["records"]) == ex["copies"] and ex["ops"]


def test_real_correct_run_that_lost_exactly_once_is_flagged(spark: Any, tmp_path: Path) -> None:
    """A correct-variant run of the scenario suite (kill of a transaction coordinator, then a
    processor kill) in which a replacement member read two input partitions from offset 0
    although the group had committed offsets for them (F5 in docs/findings.md, first
    recorded as F1): both engines name the duplicates, the overtaken writes and the two starts
    below the committed offset, with the same whole result, and the verdict names F5."""
    got, _ref = both(spark, real(tmp_path, "eos-kills-6e7d07"))
    assert got["valid"] is False
    assert got["anomalies"] == {
        "duplicate": 132,
        "zombie-write": 132,
        "started-below-committed": 2,
    }
    reasons = {e["reason"] for e in got["checkers"]["zombie-write"]["examples"]}
    assert reasons == {"overtaken"}
    ex = got["checkers"]["duplicate"]["examples"][0]
    assert ex["copies"] == 2 and {r["headers"]["instance"] for r in ex["records"]} == {"2", "3"}
    # Instance 3 was given all six partitions (generation 5), lost them, was given 3, 4 and 5
    # (generation 6) while instance 2's transaction 9 (offsets 66) was pending, and read 4
    # and 5 from 0 though 58 was committed. Its own commit of 33 for partition 5 moved the
    # group's offset back, so its start there at 33 in generation 7 is not another case.
    starts = got["checkers"]["started-below-committed"]["examples"]
    assert [
        (s["partition"], s["first_read"]["offset"], s["committed"]["offset"]) for s in starts
    ] == [
        (4, 0, 58),
        (5, 0, 58),
    ]
    assert all(s["instance"] == 3 and s["assigned"]["generation"] == 6 for s in starts)
    assert all(s["pending"]["txn"] == [2, 9] and s["pending"]["offset"] == 66 for s in starts)
    assert [(w["event"], w["generation"]) for w in starts[0]["waited"]] == [
        ("assign", 5),
        ("revoke", 5),
        ("assign", 6),
    ]
    assert [f["id"] for f in merge_verdicts({"eos": got})["known_findings"]] == ["F5"]
    not_librdkafka = merge_verdicts({"eos": got}, findings=findings("java"))
    assert "known_findings" not in not_librdkafka


def test_real_run_whose_timed_out_transaction_stayed_visible_is_flagged(
    spark: Any, tmp_path: Path
) -> None:
    """F6 (docs/findings.md, first filed as F1's second sighting): a correct processor's
    transaction that its coordinator rolled back on timeout after a controller kill, whose 25
    outputs the final
    read_committed read still returned, while a member of the next generation re-processed
    the same inputs from the offsets the rollback left. Both engines name the same 50
    duplicates and overtaken writes."""
    got, _ref = both(spark, real(tmp_path, "eos-kills-03c00d"))
    assert got["valid"] is False
    assert got["anomalies"] == {"duplicate": 50, "zombie-write": 50}
    ex = got["checkers"]["zombie-write"]["examples"][0]
    assert ex["reason"] == "overtaken" and ex["newer"]["generation"] == 4
    assert {r["headers"]["txn-seq"] for r in ex["records"]} == {"5"}


def test_real_run_of_the_default_fault_mix_that_met_f5_is_flagged(
    spark: Any, tmp_path: Path
) -> None:
    """F5 under the defaults (docs/findings.md): a 20 s campaign run of the correct processors,
    ``--nemesis all``, classic group protocol. Instance 4 was SIGKILLed inside its transaction
    over input partition 5 (its offsets left pending); instance 6, waiting on them, got a new
    assignment and read partition 5 from offset 0, though 141 was committed. Both engines
    name the same 141 duplicates and overtaken writes."""
    got, _ref = both(spark, real(tmp_path, "eos-all-1b90"))
    assert got["valid"] is False
    assert got["anomalies"] == {
        "duplicate": 141,
        "zombie-write": 141,
        "started-below-committed": 1,
    }
    ex = got["checkers"]["duplicate"]["examples"][0]
    assert ex["input"] == "5/0" and {r["headers"]["instance"] for r in ex["records"]} == {"2", "6"}
    # The mechanism: instance 6 was given partition 5 (generation 5), waited, lost it in a
    # rebalance and was given it again (generation 6), then read it from 0: 141 was committed
    # by instance 2's transaction 10 before; instance 4's transaction 1 never completed.
    (start,) = got["checkers"]["started-below-committed"]["examples"]
    assert (start["instance"], start["partition"]) == (6, 5)
    assert start["first_read"]["offset"] == 0 and start["first_read"]["txn"] == [6, 14]
    assert start["committed"]["offset"] == 141 and start["committed"]["txn"] == [2, 10]
    assert [(w["event"], w["generation"]) for w in start["waited"]] == [
        ("assign", 5),
        ("revoke", 5),
        ("assign", 6),
    ]
    assert start["pending"]["txn"] == [4, 1] and start["pending"]["completed"] is None
    # ... which is F5's signature: the merged verdict names it (and stays invalid).
    merged = merge_verdicts({"eos": got})
    assert merged["valid"] is False
    assert [f["id"] for f in merged["known_findings"]] == ["F5"]
    assert "instance 6 read partition 5 from offset 0" in merged["known_findings"][0]["evidence"][0]


def test_big_reads_stored_in_slices_give_the_same_verdict(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A final read with more records than READ_CHUNK is loaded as several rows; the checks,
    their counts and their examples must not notice."""
    import checkers.load as load

    run = real(tmp_path, "eos-alo-607d3c")
    whole = check_eos(run, spark=spark, max_examples=3)
    shutil.rmtree(run / ".parquet")
    monkeypatch.setattr(load, "READ_CHUNK", 7)
    sliced, _ref = both(spark, run)
    parts = load.load_history(spark, run).df.filter("part is not null").count()
    assert parts > 10  # the reads really were sliced
    assert counts(sliced) == counts(whole)
    assert sliced["checkers"]["duplicate"]["examples"] == whole["checkers"]["duplicate"]["examples"]
    assert sliced["liveness"] == whole["liveness"]


# ------------------------------------------------------------------------------------------
# Bad input and failures


def test_malformed_history_is_a_one_line_error(spark: Any, tmp_path: Path) -> None:
    d = built(tmp_path, 3)
    lines = (d / "history.jsonl").read_text().splitlines()
    lines[5] = lines[5][:20]
    (d / "history.jsonl").write_text("\n".join(lines) + "\n")
    for fn in (lambda: check_eos(d, spark=spark), lambda: check_eos_py(d)):
        with pytest.raises(CheckerInputError) as e:
            fn()
        assert "\n" not in str(e.value) and "history.jsonl" in str(e.value)


def test_a_failing_check_is_unknown_never_valid(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_a: Any) -> dict[str, Any]:
        raise RuntimeError("spark went away")

    monkeypatch.setitem(eos_run.CHECKS, "order", boom)
    got = check_eos(built(tmp_path, 4), spark=spark)
    assert got["checkers"]["order"]["valid"] == "unknown"
    assert "spark went away" in got["checkers"]["order"]["error"]
    assert got["valid"] == "unknown"


def test_a_failing_liveness_check_is_unknown_in_both_engines(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Liveness is guarded like every safety check, in both engines, with one shape."""

    def boom(*_a: Any) -> dict[str, Any]:
        raise RuntimeError("progress went away")

    run = built(tmp_path, 4)
    monkeypatch.setattr(eos_rules, "check_progress", boom)
    monkeypatch.setattr(eos_pyref, "check_progress", boom)
    got = check_eos(run, spark=spark)
    ref = check_eos_py(run)
    for r in (got, ref):
        assert r["liveness"]["valid"] == "unknown"
        assert set(r["liveness"]) == {"valid", "count", "examples", "error"}
        assert "progress went away" in r["liveness"]["error"]
        assert r["valid"] is True  # liveness is never part of the safety verdict


def test_a_failing_reference_check_has_the_same_unknown_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_a: Any) -> dict[str, Any]:
        raise RuntimeError("bug in order")

    monkeypatch.setitem(eos_pyref.CHECKS, "order", boom)
    ref = check_eos_py(built(tmp_path, 4))
    assert ref["checkers"]["order"] == {
        "valid": "unknown",
        "count": 0,
        "examples": [],
        "error": "RuntimeError: bug in order",
    }
    assert ref["valid"] == "unknown"


def test_a_torn_last_line_is_noted_alike_by_both_engines(spark: Any, tmp_path: Path) -> None:
    d = built(tmp_path, 6)
    with open(d / "history.jsonl", "a") as fh:
        fh.write('{"index": 99999, "proc')  # a writer that died mid-line
    _got, ref = both(spark, d)
    assert len(ref["input_notes"]) == 1 and "torn last line" in ref["input_notes"][0]


def test_an_empty_history_is_unusable_in_both_engines(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text("")
    for fn in (lambda: check_eos(tmp_path, spark=spark), lambda: check_eos_py(tmp_path)):
        with pytest.raises(CheckerInputError, match="empty history"):
            fn()


def test_unusable_run_dir(tmp_path: Path) -> None:
    with pytest.raises(CheckerInputError):
        check_eos_py(tmp_path)
