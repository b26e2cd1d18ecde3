"""Broker-log evidence checks: hand-built anomalies, generated logs, Spark vs the Python reference.

No Kafka here: dumps are written by hand or generated. One SparkSession (the worker's,
whatever started it) serves the whole module; the checks that need a JVM of their own
(stop leaves no JVM behind, a bad master URL) run in a subprocess.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.logdump import pyref as dump_pyref
from checkers.logs import pyref as log_pyref
from checkers.logs import rules as log_rules
from history.logdump import CheckerInputError, read_logdump

ROOT = Path(__file__).resolve().parent.parent
REAL_SMALL = ROOT / "tests" / "data" / "logdump" / "real_small.jsonl"

Log = dict[tuple[str, str, int], list[dict[str, Any]]]


# --------------------------------------------------------------------------------------------
# Building dumps


def data_rec(pid: int, epoch: int, *, txn: bool = True, payload: str = "v", ple: int = 0) -> dict:
    return {
        "count": 1,
        "baseSequence": 0,
        "lastSequence": 0,
        "producerId": pid,
        "producerEpoch": epoch,
        "partitionLeaderEpoch": ple,
        "isTransactional": txn,
        "isControl": False,
        "sequence": 0,
        "create_time": 1_700_000_000_000,
        "header_keys": [],
        "key": "k",
        "payload": payload,
        "segment": "00000000000000000000.log",
    }


def marker_rec(pid: int, epoch: int, outcome: str, *, ple: int = 0) -> dict:
    return {
        "count": 1,
        "baseSequence": -1,
        "lastSequence": -1,
        "producerId": pid,
        "producerEpoch": epoch,
        "partitionLeaderEpoch": ple,
        "isTransactional": True,
        "isControl": True,
        "sequence": -1,
        "create_time": 1_700_000_000_000,
        "header_keys": [],
        "marker": outcome,
        "coordinator_epoch": 0,
        "segment": "00000000000000000000.log",
    }


TXN_STATUS_CODE = {"Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3}
TXN_STATUS_CODE |= {"CompleteCommit": 4, "CompleteAbort": 5}


def txnlog_rec(txid: str, pid: int, epoch: int, status: str, parts: list[tuple[str, int]]) -> dict:
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    value = {
        "version": "1",
        "data": {
            "producerId": pid,
            "previousProducerId": pid,
            "producerEpoch": epoch,
            "transactionTimeoutMs": 60000,
            "transactionStatus": TXN_STATUS_CODE[status],
            "transactionPartitions": [
                {"topic": t, "partitionIds": ps} for t, ps in sorted(by_topic.items())
            ],
            "transactionLastUpdateTimestampMs": 1,
            "transactionStartTimestampMs": 1,
        },
    }
    return {
        "count": 1,
        "baseSequence": -1,
        "lastSequence": -1,
        "producerId": -1,
        "producerEpoch": -1,
        "partitionLeaderEpoch": 0,
        "isTransactional": False,
        "isControl": False,
        "sequence": -1,
        "create_time": 1,
        "header_keys": [],
        "key": json.dumps({"type": "0", "data": {"transactionalId": txid}}),
        "payload": json.dumps(value, separators=(",", ":")),
        "segment": "00000000000000000000.log",
    }


def materialize(
    log: Log, nodes: tuple[int, ...] = (1, 2, 3), overrides: dict | None = None
) -> list[dict]:
    """Replicate a log to every node; offsets are list positions. ``overrides[(node, key,
    index)]`` replaces fields of one replica's record (to make replicas disagree)."""
    out = []
    overrides = overrides or {}
    for node in nodes:
        for (kind, topic, part), recs in log.items():
            for i, r in enumerate(recs):
                rec = {"node": node, "topic": topic, "partition": part, "baseOffset": i}
                rec |= {"lastOffset": i} | r | {"offset": i, "kind": kind}
                rec |= overrides.get((node, (kind, topic, part), i), {})
                out.append(rec)
    return out


def write_dump(path: Path, records: list[dict], *, nodes: int = 3) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fh.write(json.dumps({"logdump_format": 1, "nodes": nodes}) + "\n")
        for r in records:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
    return path


def run_dir_with(tmp: Path, records: list[dict]) -> Path:
    write_dump(tmp / "evidence" / "logdump.jsonl", records)
    return tmp


# --------------------------------------------------------------------------------------------
# Generated valid logs and their mutations


def gen_log(plan: dict[str, Any]) -> Log:
    """A valid log: per producer, transactions in order with proper markers, interleaved.

    TV0: a transaction's markers carry its data epoch; a producer may re-initialise between
    transactions (epoch + 1). TV2: transaction k writes at e0 + k and its markers carry e0 + k
    + 1, which the next transaction then uses. The coordinator's transaction log follows.
    """
    tv, prefix, pid_base = plan["tv"], plan.get("prefix", ""), plan.get("pid_base", 0)
    log: Log = {}
    txn_part = plan.get("txnlog_partition", 0)
    txlog = log.setdefault(("txnlog", "__transaction_state", txn_part), [])
    steps: dict[int, list[tuple]] = {}
    for i, prod in enumerate(plan["producers"]):
        pid, epoch = pid_base + 1000 + i, prod["e0"]
        txid = f"{prefix}tx-{i}"
        s: list[tuple] = []
        for k, txn in enumerate(prod["txns"]):
            if tv == 2:
                epoch = prod["e0"] + k
            elif txn["reinit"]:
                epoch += 1
            parts = [(f"{prefix}t", p) for p, _ in txn["parts"]]
            s.append(("txnlog", txid, pid, epoch, "Ongoing", parts))
            for p, n in txn["parts"]:
                for j in range(n):
                    s.append(
                        ("data", (f"{prefix}t", p), data_rec(pid, epoch, payload=f"{pid}-{k}-{j}"))
                    )
            m_epoch = epoch + 1 if tv == 2 else epoch
            done = "Commit" if txn["commit"] else "Abort"
            s.append(("txnlog", txid, pid, m_epoch, "Prepare" + done, parts))
            for tp in parts:
                s.append(("data", tp, marker_rec(pid, m_epoch, done.upper())))
            s.append(("txnlog", txid, pid, m_epoch, "Complete" + done, []))
        steps[i] = s
    for j in range(plan.get("anonymous", 0)):
        steps[len(steps)] = [
            ("data", (f"{prefix}t", j % 3), data_rec(-1, -1, txn=False, payload=f"anon-{j}"))
        ]
    rng = random.Random(plan["seed"])
    pos = dict.fromkeys(steps, 0)
    while pos:
        i = rng.choice(sorted(pos))
        step = steps[i][pos[i]]
        pos[i] += 1
        if pos[i] == len(steps[i]):
            del pos[i]
        if step[0] == "txnlog":
            txlog.append(txnlog_rec(*step[1:]))
        else:
            log.setdefault(("data", *step[1]), []).append(step[2])
    return log


def plans(tv: int | None = None) -> st.SearchStrategy[dict[str, Any]]:
    txn = st.fixed_dictionaries(
        {
            "parts": st.lists(
                st.tuples(st.integers(0, 2), st.integers(1, 3)),
                min_size=1,
                max_size=3,
                unique_by=lambda t: t[0],
            ),
            "commit": st.booleans(),
            "reinit": st.booleans(),
        }
    )
    producer = st.fixed_dictionaries(
        {"e0": st.integers(1, 3), "txns": st.lists(txn, min_size=1, max_size=4)}
    )
    return st.fixed_dictionaries(
        {
            "tv": st.sampled_from([0, 2]) if tv is None else st.just(tv),
            "producers": st.lists(producer, min_size=1, max_size=3),
            "seed": st.integers(0, 2**32 - 1),
            "anonymous": st.integers(0, 2),
        }
    )


def _pid_records(log: Log) -> Iterator[tuple[tuple, int, dict]]:
    for key, recs in log.items():
        if key[0] == "data":
            for i, r in enumerate(recs):
                yield key, i, r


def mutate(log: Log, kind: str, rng: random.Random, tv: int) -> tuple[Log, dict] | None:
    """Apply one corruption; returns (log, overrides) or None if this log offers no target."""
    log = {k: [dict(r) for r in v] for k, v in log.items()}
    if kind == "lower-epoch":
        cands = []
        for key, i, r in _pid_records(log):
            if r["isControl"] or r["producerId"] < 0:
                continue
            prior = [x["producerEpoch"] for x in log[key][:i] if x["producerId"] == r["producerId"]]
            if prior and max(prior) >= 1:
                cands.append((key, i, max(prior) - 1))
        if not cands:
            return None
        key, i, e = rng.choice(cands)
        log[key][i]["producerEpoch"] = e
        return log, {}
    if kind == "drop-marker":
        cands = []
        for key, i, r in _pid_records(log):
            if not r["isControl"]:
                continue
            later = [x for x in log[key][i + 1 :] if x["producerId"] == r["producerId"]]
            if tv == 2 or not any(x["isControl"] for x in later):
                cands.append((key, i))
        if not cands:
            return None
        key, i = rng.choice(cands)
        del log[key][i]
        return log, {}
    if kind == "conflicting-marker":
        # TV2 rules judge producers seen committing the TV2 way (a COMMIT at data epoch + 1).
        tv2 = {
            r["producerId"]
            for key, i, r in _pid_records(log)
            if r["isControl"]
            and r["marker"] == "COMMIT"
            and any(
                x["producerId"] == r["producerId"]
                and not x["isControl"]
                and x["producerEpoch"] + 1 == r["producerEpoch"]
                for x in log[key][:i]
            )
        }
        cands = [
            (key, i) for key, i, r in _pid_records(log) if r["isControl"] and r["producerId"] in tv2
        ]
        if not cands or tv != 2:
            return None
        key, i = rng.choice(cands)
        copy = dict(log[key][i])
        copy["marker"] = "ABORT" if copy["marker"] == "COMMIT" else "COMMIT"
        log[key].insert(i + 1, copy)
        return log, {}
    if kind == "flip-payload":
        cands = [(key, i) for key, i, r in _pid_records(log) if not r["isControl"]]
        if not cands:
            return None
        key, i = rng.choice(cands)
        node = rng.choice([1, 2, 3])
        return log, {(node, key, i): {"payload": log[key][i]["payload"] + "-flipped"}}
    raise ValueError(kind)


MUTATIONS = ("lower-epoch", "drop-marker", "conflicting-marker", "flip-payload")


def combined(plan: dict[str, Any], rng: random.Random) -> tuple[list[dict], list[str]]:
    """The valid log and each applicable mutation as independent namespaces of one dump."""
    records: list[dict] = []
    names = ["valid"]
    base = dict(plan, prefix="c0-", pid_base=0, txnlog_partition=0)
    records += materialize(gen_log(base))
    for n, kind in enumerate(MUTATIONS, start=1):
        p = dict(plan, prefix=f"c{n}-", pid_base=n * 100, txnlog_partition=n)
        m = mutate(gen_log(p), kind, rng, plan["tv"])
        if m is not None:
            records += materialize(m[0], overrides=m[1])
            names.append(kind)
    return records, names


# --------------------------------------------------------------------------------------------
# Fixtures and helpers


def py_check(path: Path, tv: int | None = None, n: int = 50) -> dict[str, Any]:
    return log_pyref.check_logdump(path, transaction_version=tv, max_examples=n)


def spark_check(spark: Any, path: Path, tv: int | None = None, n: int = 50) -> dict[str, Any]:
    from checkers.logs.run import evidence_checks

    return evidence_checks(spark, path, transaction_version=tv, max_examples=n)


def assert_agree(s: dict[str, Any], p: dict[str, Any]) -> None:
    for name in log_rules.CHECKERS:
        assert s["checkers"][name] == p["checkers"][name], name
    assert s["valid"] == p["valid"]
    assert s["stats"]["outcomes"] == p["stats"]["outcomes"]
    assert s["stats"]["records"] == p["stats"]["records"]


def types_by_topic_prefix(result: dict[str, Any]) -> dict[str, set[str]]:
    """Anomaly types found in each case namespace (c0-, c1-, ...) of a combined dump."""
    out: dict[str, set[str]] = {}
    for res in result["checkers"].values():
        for t, exs in res["examples"].items():
            for ex in exs:
                out.setdefault(ex["topic"].split("-")[0], set()).add(t)
    return out


# --------------------------------------------------------------------------------------------
# Hand-built anomalies: one case per namespace, all in one dump


def hand_built() -> tuple[Log, dict[str, tuple[str, str]], dict]:
    """(log, {case topic: (expected type, checker)}, overrides)."""
    d, m = data_rec, marker_rec
    log: Log = {}
    exp: dict[str, tuple[str, str]] = {}

    def case(topic: str, recs: list[dict], typ: str, checker: str = "epoch_violation") -> None:
        log[("data", topic, 0)] = recs
        exp[topic] = (typ, checker)

    case(
        "reg", [d(10, 5), m(10, 6, "COMMIT"), d(10, 5), m(10, 6, "ABORT")], "data-epoch-regression"
    )
    case("below", [d(11, 3), m(11, 2, "COMMIT")], "marker-below-data")
    case("mreg", [d(12, 4), m(12, 5, "COMMIT"), m(12, 4, "ABORT")], "marker-epoch-regression")
    case("bump", [d(13, 1), d(13, 2), m(13, 3, "COMMIT")], "epoch-bump-in-open-transaction")
    # producer 14 commits the TV2 way once, then ends a transaction without the bump
    case(
        "notbumped",
        [d(14, 1), m(14, 2, "COMMIT"), d(14, 2), m(14, 2, "COMMIT")],
        "marker-not-bumped",
    )
    # producer 18 never commits the TV2 way: a TV0/1 client on a TV2 broker, not an anomaly
    log[("data", "tv1client", 0)] = [d(18, 0), m(18, 0, "COMMIT"), d(18, 0), m(18, 0, "COMMIT")]
    case(
        "reuse",
        [d(15, 1), m(15, 1, "COMMIT"), d(15, 1), m(15, 2, "COMMIT")],
        "txn-epoch-reuse",
    )
    case("conflict", [d(16, 1), m(16, 2, "COMMIT"), m(16, 2, "ABORT")], "conflicting-markers")
    case("dup", [d(17, 1), m(17, 2, "COMMIT"), m(17, 2, "COMMIT")], "duplicate-marker")
    # replicas: node 2 disagrees at offset 0 (same leader epoch)
    case(
        "div",
        [d(30, 1, payload="a"), m(30, 2, "COMMIT")],
        "replica-divergence",
        "replica_divergence",
    )
    # node 3 kept offset 1 from leader epoch 0; the others have leader epoch 1 there
    case(
        "stale",
        [d(31, 1, payload="x"), d(31, 1, payload="y", ple=1), m(31, 2, "COMMIT", ple=1)],
        "unreconciled-replica",
        "replica_divergence",
    )
    # open: producer 20 moved on to a higher epoch elsewhere
    case("hang", [d(20, 1)], "hanging-transaction", "hanging_in_log")
    log[("data", "hang-later", 0)] = [d(20, 2), m(20, 3, "COMMIT")]
    # open and the coordinator still has it in flight: allowed
    case("inflight", [d(21, 1)], "open-transaction", "hanging_in_log")
    # open and the coordinator completed that epoch without this partition
    case("gone", [d(22, 1)], "hanging-transaction", "hanging_in_log")
    # finding F9: the coordinator prepared the abort on this partition, then completed it,
    # and no marker reached the partition (a TV0 producer: prepare at the data's epoch)
    case("skipped", [d(23, 1)], "marker-skipped", "hanging_in_log")
    # the same prepare and completion with the marker in place: nothing to say
    log[("data", "skipped-ok", 0)] = [d(24, 1), m(24, 1, "ABORT")]
    log[("txnlog", "__transaction_state", 0)] = [
        txnlog_rec("tx-21", 21, 1, "Ongoing", [("inflight", 0)]),
        txnlog_rec("tx-22", 22, 1, "Ongoing", [("other", 0)]),
        txnlog_rec("tx-22", 22, 2, "CompleteCommit", []),
        txnlog_rec("tx-23", 23, 1, "Ongoing", [("skipped", 0)]),
        txnlog_rec("tx-23", 23, 1, "PrepareAbort", [("skipped", 0)]),
        txnlog_rec("tx-23", 23, 1, "CompleteAbort", []),
        txnlog_rec("tx-24", 24, 1, "PrepareAbort", [("skipped-ok", 0)]),
        txnlog_rec("tx-24", 24, 1, "CompleteAbort", []),
    ]
    overrides = {
        (2, ("data", "div", 0), 0): {"payload": "b"},
        (3, ("data", "stale", 0), 1): {"payload": "z", "partitionLeaderEpoch": 0},
        (3, ("data", "stale", 0), 2): {"partitionLeaderEpoch": 0},
    }
    return log, exp, overrides


def test_hand_built_anomalies_python(tmp_path: Path) -> None:
    log, exp, overrides = hand_built()
    path = write_dump(tmp_path / "d.jsonl", materialize(log, overrides=overrides))
    res = py_check(path, tv=2)
    found = types_by_topic_prefix(res)
    for topic, (typ, checker) in exp.items():
        assert typ in found.get(topic, set()), (topic, typ, found.get(topic))
        assert typ in res["checkers"][checker]["anomalies"]
    assert not res["valid"]
    for allowed in ("duplicate-marker", "unreconciled-replica", "open-transaction"):
        assert allowed not in res["bad_anomaly_types"]
    assert "tv1client" not in found  # TV2 rules spare producers that never commit TV2-style
    assert "skipped-ok" not in found
    (skip,) = res["checkers"]["hanging_in_log"]["examples"]["marker-skipped"]
    assert skip["prepared"] == "PrepareAbort at epoch 1" and "finding F9" in skip["reason"]
    hanging = res["checkers"]["hanging_in_log"]["examples"]["hanging-transaction"]
    (gone,) = [e for e in hanging if e["topic"] == "gone"]
    assert gone["reason_code"] == "coordinator-moved-on"  # a completion without a prepare
    # every record of an example is a full record
    ex = res["checkers"]["epoch_violation"]["examples"]["data-epoch-regression"][0]
    assert [r["offset"] for r in ex["records"]] == [1, 2]
    assert ex["records"][1]["payload"] == "v" and ex["nodes"] == [1, 2, 3]


def test_a_skipped_marker_is_named_finding_f9_whatever_the_client(tmp_path: Path) -> None:
    """F9 is Kafka's: the verdict names it for a client whose manifest lists no finding of
    it, and the summary's line links to its write-up."""
    from checkers.findings import finding_lines
    from checkers.judge import merge_verdicts
    from workloads.client_registry import findings

    log, _exp, overrides = hand_built()
    res = py_check(write_dump(tmp_path / "d.jsonl", materialize(log, overrides=overrides)))
    assert "F9" not in findings("java")
    merged = merge_verdicts({"log_evidence": res}, findings=findings("java"))
    (f9,) = [f for f in merged["known_findings"] if f["id"] == "F9"]
    assert f9["evidence"] == [
        "producer 23's transaction at epoch 1 left 1 record(s) open on skipped-0 (offsets 0..0): "
        "the coordinator's PrepareAbort at epoch 1 listed the partition, and it "
        "completed the transaction without a marker there"
    ]
    assert any(ln.startswith("known finding F9: ") for ln in finding_lines(merged))
    # without the prepare, the same open records are a hanging transaction and no F9
    log[("txnlog", "__transaction_state", 0)] = [
        txnlog_rec("tx-23", 23, 1, "Ongoing", [("skipped", 0)]),
        txnlog_rec("tx-23", 23, 1, "CompleteAbort", []),
    ]
    res = py_check(write_dump(tmp_path / "e.jsonl", materialize(log, overrides=overrides)))
    assert "marker-skipped" not in res["anomalies"]
    merged = merge_verdicts({"log_evidence": res}, findings=findings("java"))
    assert "F9" not in [f["id"] for f in merged.get("known_findings", [])]


def test_hand_built_anomalies_spark_agrees(spark: Any, tmp_path: Path) -> None:
    log, _exp, overrides = hand_built()
    path = write_dump(tmp_path / "d.jsonl", materialize(log, overrides=overrides))
    assert_agree(spark_check(spark, path, tv=2), py_check(path, tv=2))
    # and under TV0 rules the TV2-only anomalies disappear, on both sides
    s0, p0 = spark_check(spark, path, tv=0), py_check(path, tv=0)
    assert_agree(s0, p0)
    assert not set(p0["anomalies"]) & log_rules.TV2_TYPES


def clean_log(tv: int) -> Log:
    """Two producers, committed and aborted transactions, an anonymous write, three replicas."""
    d, m = data_rec, marker_rec
    if tv == 0:
        p0 = [d(1, 0), d(2, 4), m(1, 0, "COMMIT"), d(1, 0), d(-1, -1, txn=False)]
        p0 += [m(2, 4, "ABORT"), m(1, 0, "ABORT"), d(2, 5), m(2, 5, "COMMIT")]
        p1 = [d(1, 0), m(1, 0, "COMMIT"), d(2, 4), m(2, 4, "ABORT")]
    else:
        p0 = [d(1, 0), d(2, 4), m(1, 1, "COMMIT"), d(1, 1), d(-1, -1, txn=False)]
        p0 += [m(2, 5, "ABORT"), m(1, 2, "ABORT"), d(2, 5), m(2, 6, "COMMIT")]
        p1 = [d(1, 0), m(1, 1, "COMMIT"), d(2, 4), m(2, 5, "ABORT")]
    return {("data", "t", 0): p0, ("data", "t", 1): p1}


@pytest.mark.parametrize("tv", [0, 2])
def test_clean_dump_passes(spark: Any, tmp_path: Path, tv: int) -> None:
    path = write_dump(tmp_path / "d.jsonl", materialize(clean_log(tv)))
    p = py_check(path)
    assert p["valid"] is True, p["anomalies"]
    assert p["anomalies"] == {}
    assert p["checkers"]["epoch_violation"]["stats"]["transaction_version"]["used"] == tv
    assert p["stats"]["outcomes"] == {"committed": 4, "aborted": 3, "open": 0}
    assert_agree(spark_check(spark, path), p)


def test_log_positions_agree_and_place_records_between_markers(spark: Any, tmp_path: Path) -> None:
    """Both engines place each data record among its producer's transactions alike (the
    eos checks' join with the history), on a hand-made log and a real one."""
    from checkers.load import load_logdump
    from checkers.logdump.evidence import log_positions, pos_of, prepare

    log = clean_log(0)
    log[("data", "t", 2)] = [data_rec(1, 3)]  # open
    hand = write_dump(tmp_path / "d.jsonl", materialize(log))
    for path, topic in ((hand, "t"), (REAL_SMALL, "t1"), (REAL_SMALL, "__harness_ready")):
        ev = prepare(load_logdump(spark, path, cache=False).df)
        try:
            rows = log_positions(ev, topic).collect()
            got = {(r["partition"], r["offset"]): pos_of(r) for r in rows}
        finally:
            ev.release()
        ref = dump_pyref.log_positions(read_logdump(path), topic)
        assert got == ref and len(rows) == len(ref) and ref, (path, topic)
    pos = dump_pyref.log_positions(read_logdump(hand), "t")
    # Partition 0 (TV0): producer 1 commits offset 0, then offset 3 is aborted by offset 6.
    assert pos[(0, 0)].end_marker == (2, "COMMIT", 0) and pos[(0, 0)].prior_marker is None
    assert pos[(0, 3)].prior_marker == (2, "COMMIT", 0) and pos[(0, 3)].outcome == "aborted"
    assert pos[(0, 3)].end_marker == (6, "ABORT", 0) and pos[(0, 3)].first_offset == 3
    assert pos[(0, 4)].outcome == "committed" and pos[(0, 4)].end_marker is None  # anonymous
    assert pos[(2, 0)].outcome == "open" and pos[(2, 0)].end_marker is None


def test_aborted_in_log_dataframe(spark: Any, tmp_path: Path) -> None:
    from checkers.load import load_logdump
    from checkers.logdump.evidence import prepare
    from checkers.logs.checks import aborted_in_log

    log = clean_log(2)
    log[("data", "t", 2)] = [data_rec(1, 3)]  # open
    path = write_dump(tmp_path / "d.jsonl", materialize(log))
    ev = prepare(load_logdump(spark, path).df)
    try:
        for every in (False, True):
            got = sorted(
                (r.asDict() for r in aborted_in_log(ev, all_replicas=every).collect()),
                key=lambda d: (d["kind"], d["topic"], d["partition"], d["offset"], d["node"]),
            )
            assert got == log_pyref.aborted_in_log(read_logdump(path), all_replicas=every)
    finally:
        ev.release()
    outcomes = {(r["partition"], r["offset"]): r["outcome"] for r in got if r["node"] == 1}
    assert outcomes[(0, 0)] == "committed" and outcomes[(0, 3)] == "aborted"
    assert outcomes[(0, 4)] == "committed"  # non-transactional
    assert outcomes[(2, 0)] == "open"


# --------------------------------------------------------------------------------------------
# Properties


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_generated_valid_logs_pass(plan: dict[str, Any]) -> None:
    records = materialize(gen_log(plan))
    path = _tmp_dump(records)
    for tv in (None, plan["tv"]):
        res = py_check(path, tv=tv, n=2)
        assert res["valid"] is True, (tv, res["anomalies"])
        assert res["anomalies"] == {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), st.sampled_from(MUTATIONS), st.integers(0, 2**32 - 1))
def test_generated_mutations_fail(plan: dict[str, Any], kind: str, seed: int) -> None:
    m = mutate(gen_log(plan), kind, random.Random(seed), plan["tv"])
    if m is None:
        return
    res = py_check(_tmp_dump(materialize(m[0], overrides=m[1])), tv=plan["tv"], n=2)
    assert res["valid"] is False, (kind, res["anomalies"])


@settings(
    max_examples=2,
    deadline=None,
    # The worker's Spark session, shared by every example (the fixture only hands it over).
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(plans(tv=0), st.integers(0, 2**32 - 1))
def test_spark_agrees_on_generated_tv0(spark: Any, plan: dict[str, Any], seed: int) -> None:
    _agree_on_combined(spark, plan, seed)


@settings(
    max_examples=2,
    deadline=None,
    # The worker's Spark session, shared by every example (the fixture only hands it over).
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(plans(tv=2), st.integers(0, 2**32 - 1))
def test_spark_agrees_on_generated_tv2(spark: Any, plan: dict[str, Any], seed: int) -> None:
    _agree_on_combined(spark, plan, seed)


def _agree_on_combined(spark: Any, plan: dict[str, Any], seed: int) -> None:
    records, names = combined(plan, random.Random(seed))
    path = _tmp_dump(records)
    p = py_check(path, tv=plan["tv"], n=1000)
    assert_agree(spark_check(spark, path, tv=plan["tv"], n=1000), p)
    found = types_by_topic_prefix(p)
    bad = {
        t for t in log_rules.EPOCH_TYPES + log_rules.DIVERGENCE_TYPES + log_rules.HANGING_TYPES
    } - log_rules.ALLOWED_TYPES
    assert not found.get("c0", set()) & bad
    for n, name in enumerate(names[1:], start=1):
        case = f"c{MUTATIONS.index(name) + 1}"
        assert found.get(case, set()) & bad, (n, name, found)


_TMP: list[Path] = []


def _tmp_dump(records: list[dict]) -> Path:
    """A fresh dump file (hypothesis examples cannot use function-scoped tmp_path)."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="kh-logev-"))
    _TMP.append(d)
    return write_dump(d / "evidence" / "logdump.jsonl", records)


@pytest.fixture(scope="module", autouse=True)
def _cleanup_tmp() -> Iterator[None]:
    yield
    for d in _TMP:
        shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Real dump, input errors, cache, CLI, Spark failures


def test_real_dump_passes(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "evidence").mkdir(parents=True)
    shutil.copy(REAL_SMALL, run / "evidence" / "logdump.jsonl")
    p = py_check(run / "evidence" / "logdump.jsonl")
    assert p["valid"] is True and p["anomalies"] == {}
    s = spark_check(spark, run)
    assert_agree(s, p)
    assert s["stats"]["parquet_cache_reused"] is False
    assert (run / ".parquet" / "logdump.json").is_file()
    again = spark_check(spark, run)
    assert again["stats"]["parquet_cache_reused"] is True
    assert again["checkers"] == s["checkers"]
    # touching the source invalidates the cache
    src = run / "evidence" / "logdump.jsonl"
    with open(src, "a") as fh:
        fh.write("\n")
    assert spark_check(spark, run)["stats"]["parquet_cache_reused"] is False


def _bad(tmp: Path, body: str) -> Path:
    path = tmp / "evidence" / "logdump.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


GOOD = json.dumps(materialize(clean_log(0), nodes=(1,))[0], separators=(",", ":"))
HEADER = '{"logdump_format": 1, "nodes": 1}\n'


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("", "empty log dump"),
        ('{"history_format": 1}\n', "not a log dump"),
        ('{"logdump_format": 9}\n', "unsupported logdump format 9"),
        (HEADER + "{nope\n" + GOOD + "\n", ":2: not valid JSON"),
        (
            HEADER + GOOD.replace('"offset":0', '"offset":"x"') + "\n" + GOOD + "\n",
            ":2: bad record",
        ),
        (HEADER + GOOD.replace('"kind":"data"', '"kind":"weird"') + "\n", "kind must be one of"),
    ],
)
def test_malformed_dump_is_one_line_error(
    spark: Any, tmp_path: Path, body: str, needle: str
) -> None:
    from checkers.load import load_logdump

    path = _bad(tmp_path, body)
    with pytest.raises(CheckerInputError) as py_err:
        read_logdump(path)
    with pytest.raises(CheckerInputError) as sp_err:
        load_logdump(spark, tmp_path)
    for e in (py_err.value, sp_err.value):
        assert needle in str(e) and "\n" not in str(e)


def test_torn_last_line_is_skipped(spark: Any, tmp_path: Path) -> None:
    path = write_dump(tmp_path / "evidence" / "logdump.jsonl", materialize(clean_log(0)))
    with open(path, "a") as fh:
        fh.write('{"node":1,"kind":"data","top')
    p = py_check(path)
    assert p["valid"] is True and "torn last line" in p["input_notes"][0]
    s = spark_check(spark, tmp_path)
    assert_agree(s, p)
    assert s["input_notes"] == p["input_notes"]


def test_cli_run_dir(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from checkers.cli import main

    log, _, overrides = hand_built()
    bad = run_dir_with(tmp_path / "bad", materialize(log, overrides=overrides))
    good = run_dir_with(tmp_path / "good", materialize(clean_log(2)))
    assert main([str(good), "--engine", "spark"]) == 0  # the Python engines need no session
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is True and set(out["checkers"]) == set(log_rules.CHECKERS)
    assert json.loads((good / "results.json").read_text()) == out
    spark_opts = ["--engine", "spark"]
    assert main([str(bad), "--transaction-version", "2", "--max-examples", "1", *spark_opts]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is False and out["anomalies"]["data-epoch-regression"] == 1
    assert all(len(v) <= 1 for c in out["checkers"].values() for v in c["examples"].values())
    _bad(tmp_path / "broken", HEADER + "{nope\n" + GOOD + "\n")
    assert main([str(tmp_path / "broken"), *spark_opts]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not valid JSON" in err[0]
    # the shared session survives a CLI run that reused it
    assert spark.range(3).count() == 3


def test_spark_failure_in_process_is_unknown(spark: Any, tmp_path: Path) -> None:
    from checkers.logs.run import check_evidence

    run = run_dir_with(tmp_path, materialize(clean_log(0)))
    res = check_evidence(run, "local[1]")  # a session with another master is running
    assert res["valid"] == "unknown" and "already running" in res["error"]


def _py(code: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("KAFKA_HARNESS_SPARK_MASTER", None)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_bad_master_gives_unknown_not_valid(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    run = run_dir_with(tmp_path, materialize(clean_log(0)))
    r = _py(
        "import sys; from checkers.cli import main; sys.exit(main(sys.argv[1:]))",
        str(run),
        "--spark-master",
        "bogus://nowhere:1",
    )
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    res = json.loads((run / "results.json").read_text())
    assert res["valid"] == "unknown"
    assert "bogus://nowhere:1" in json.dumps(res["errors"])


@pytest.mark.spark
def test_stop_leaves_no_jvm() -> None:
    pytest.importorskip("pyspark")
    code = """
import os, time
from checkers.spark import start_spark, stop_spark, jvm_pid
s = start_spark("local[1]")
assert s.range(5).count() == 5
pid = jvm_pid()
stop_spark()
alive = os.path.exists(f"/proc/{pid}")
print(pid, alive)
"""
    r = _py(code)
    assert r.returncode == 0, r.stderr[-2000:]
    pid, alive = r.stdout.split()
    assert int(pid) > 0 and alive == "False"


def test_load_history_dataframe(spark: Any, tmp_path: Path) -> None:
    from checkers.load import load_history
    from history import Recorder, merge_histories

    procs = tmp_path / "processes"
    procs.mkdir()
    with Recorder(procs / "0.jsonl", 0) as rec:
        rec.invoke("send", [["send", "k", 1]])
        rec.ok("send", [["send", "k", [3, 1]]])
    with Recorder(procs / "n.jsonl", "1") as rec:
        rec.invoke("kill", "x")
        rec.info("kill", "x", error={"why": "timeout"})
    merge_histories(sorted(procs.glob("*.jsonl")), tmp_path / "history.jsonl")
    loaded = load_history(spark, tmp_path)
    assert not loaded.cached and loaded.rows == 4
    rows = [r.asDict() for r in loaded.df.orderBy("index").collect()]
    assert [r["index"] for r in rows] == [0, 1, 2, 3]
    by_proc = {(r["process"], r["process_is_int"]) for r in rows}
    assert by_proc == {("0", True), ("1", False)}  # 0 and "1" stay distinguishable
    send_ok = next(r for r in rows if r["f"] == "send" and r["type"] == "ok")
    assert json.loads(send_ok["value"]) == [["send", "k", [3, 1]]]
    kill_info = next(r for r in rows if r["type"] == "info")
    assert kill_info["value"] == '"x"' and json.loads(kill_info["error_json"]) == {"why": "timeout"}
    assert load_history(spark, tmp_path).cached  # unchanged source: Parquet reused
    with open(tmp_path / "history.jsonl", "a") as fh:
        fh.write('{"index":4,"ti')
    again = load_history(spark, tmp_path)
    assert not again.cached and again.rows == 4 and "torn last line" in again.notes[0]
    (tmp_path / "history.jsonl").write_text(
        '{"history_format": 1, "kind": "merged"}\n{"index": 0}\n1\n'
    )
    with pytest.raises(CheckerInputError) as e:
        load_history(spark, tmp_path)
    assert "\n" not in str(e.value)
