"""The queue workload against a real cluster: Jepsen-shaped histories the checker accepts.

Each cluster test runs the whole workload (supervisor, client processes, final drain, merge)
on the session's cluster with its own topic, then checks three things independently: the
history's shape (format v1, op and micro-op shapes), that sends and polls agree on offsets,
and the queue checker's verdict. The first few tests need no cluster.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from checkers.queue.checks import check_queue, load_queue_history
from common.errors import HarnessError
from common.waits import wait_for
from history import Recorder, check_pairing, load_history, merge_histories, read_process_file
from workloads import clients
from workloads.clients import ClientError
from workloads.queue.client import QueueClient, main
from workloads.queue.config import EXIT_BAD_CONFIG, VALUE_STRIDE, BadConfig, ClientConfig
from workloads.queue.options import QueueOptions
from workloads.queue.supervisor import QueueWorkload, run_queue

QUEUE_FS = {"send", "poll", "txn", "assign", "subscribe", "crash"}


# --- no cluster needed ---------------------------------------------------------------------


def _config(tmp_path: Path, **kw: Any) -> ClientConfig:
    base: dict[str, Any] = {
        "process": 4,
        "bootstrap": "127.0.0.1:1",
        "topic": "t",
        "keys": 3,
        "history_path": str(tmp_path / "4.jsonl"),
        "group_id": "g",
        "transactional_id": "t-4",
    }
    base.update(kw)
    return ClientConfig(**base)


def test_generator_is_seeded_and_jepsen_shaped(tmp_path: Path) -> None:
    """Same seed and process, same ops; every op has the documented invoke shape."""

    def ops(sub: str) -> list[tuple[str, Any]]:
        client = QueueClient(_config(tmp_path / sub, crash_p=0.05, sub_p=0.1))
        out = [client.next_op(i == 0) for i in range(300)]
        client.rec.close()
        return out

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = ops("a"), ops("b")
    assert a == b
    assert a[0][0] == "assign"
    seen: set[int] = set()
    for f, value in a:
        assert f in QUEUE_FS
        if f in ("assign", "subscribe"):
            assert value and all(0 <= k < 3 for k in value)
        elif f == "crash":
            assert value is None
        else:
            kinds = {m[0] for m in value}
            assert kinds <= {"send", "poll"}
            assert f != "txn" or kinds == {"send", "poll"}
            assert f != "send" or kinds == {"send"}
            assert f != "poll" or value == [["poll"]]
            for m in value:
                if m[0] == "send":
                    _, k, v = m
                    assert 0 <= k < 3 and v // VALUE_STRIDE == 4 and v not in seen
                    seen.add(v)
    assert Counter(f for f, _ in a).keys() >= {"send", "poll", "txn", "assign", "crash"}


def test_bad_configs_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(BadConfig, match="txn ops need transactions"):
        _config(tmp_path, txn=False).validate()
    with pytest.raises(BadConfig, match="deliberate aborts"):
        _config(tmp_path, txn=False, weights={"send": 1, "poll": 1}, abort_p=0.1).validate()
    with pytest.raises(BadConfig, match="sub_via"):
        _config(tmp_path, sub_via="both").validate()
    with pytest.raises(HarnessError, match="bad queue options"):
        QueueOptions(abort_p=0.5, txn=False).validate()
    with pytest.raises(HarnessError, match="unknown queue option"):
        QueueOptions.from_dict({"topics": 3})
    assert main(["--config", json.dumps({"process": 1})]) == EXIT_BAD_CONFIG
    assert "bad configuration" in capsys.readouterr().err


def test_a_hung_client_call_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka's send_offsets_to_transaction can ignore its timeout; the client must not."""
    monkeypatch.setattr(clients, "HANG_SLACK_S", 0.2)
    client = QueueClient(_config(tmp_path))
    release = threading.Event()
    try:
        assert client.calls.bounded("x", lambda t: t * 2, 1.5) == 3.0
        with pytest.raises(ZeroDivisionError):
            client.calls.bounded("x", lambda t: 1 / 0, 1.0)
        assert client.calls.hung is None
        t0 = time.monotonic()
        with pytest.raises(ClientError) as caught:
            client.calls.bounded("send-offsets", lambda t: release.wait(60), 0.1)
        assert time.monotonic() - t0 < 5
        assert caught.value.info["code"] == "CLIENT_HUNG" and caught.value.info["fatal"]
        assert client.calls.hung == "send-offsets"
    finally:
        release.set()
        client.rec.close()


def test_rebalance_log_survives_the_format_and_reaches_the_checker(tmp_path: Path) -> None:
    """The extra completion key must pass format validation, merge, and the checker's parser
    (which exempts rebalanced keys from the internal poll checks)."""
    rec = Recorder(tmp_path / "0.jsonl", 0, meta={"workload": "queue"})
    rec.invoke("poll", [["poll"], ["poll"]])
    log = [{"type": "revoked", "keys": [0]}, {"type": "assigned", "keys": [0]}]
    rec.record(
        "ok",
        "poll",
        [["poll", {"0": [[5, 1]]}], ["poll", {"0": [[2, 2]]}]],
        extra={"rebalance_log": log},
    )
    with pytest.raises(ValueError, match="fixed keys"):
        rec.record("ok", "poll", [], extra={"index": 9})
    rec.close()
    merge_histories([tmp_path / "0.jsonl"], tmp_path / "h.jsonl")
    ops = load_history(tmp_path / "h.jsonl")
    assert ops[-1]["rebalance_log"] == log
    result = check_queue(load_queue_history(tmp_path / "h.jsonl"), sub_via="subscribe")
    assert "int-nonmonotonic-poll" not in result["anomalies"]


# --- helpers for cluster runs ------------------------------------------------------------


def _run(
    cluster: Any, store: Path, name: str, during: Any = None, time_limit: float = 30.0, **kw: Any
) -> tuple[Path, list[dict[str, Any]], dict[str, Any], QueueOptions]:
    topic = f"q-{name}-{uuid.uuid4().hex[:6]}"
    opts = QueueOptions(topic=topic, seed=7, **kw)
    t0 = time.monotonic()
    path = run_queue(cluster, store / "queue" / topic, opts, time_limit=time_limit, during=during)
    ops = load_history(path)  # validates format v1: header, indexes, times, pairing rules
    result = check_queue(load_queue_history(path), sub_via=opts.sub_via)
    print(
        f"\n{name}: {time.monotonic() - t0:.1f}s, {path}\n"
        f"  valid={result['valid']} anomalies={result['anomalies']}\n"
        f"  ops={result['stats']['ops_by_f_type']}"
    )
    return path, ops, result, opts


def _check_shape(ops: list[dict[str, Any]], opts: QueueOptions) -> None:
    """Every client op is one of the documented shapes (docs/history-format.md, queue)."""
    check_pairing(ops)
    sent: dict[int, set[Any]] = {}
    for op in ops:
        if not isinstance(op["process"], int):
            assert op["process"] == "supervisor"
            continue
        f, typ, value = op["f"], op["type"], op["value"]
        assert f in QUEUE_FS, op
        if f in ("assign", "subscribe"):
            assert all(isinstance(k, int) and 0 <= k < opts.keys for k in value), op
            continue
        if f == "crash":
            assert typ in ("invoke", "info") and value is None, op
            continue
        assert isinstance(value, list) and value, op
        for mop in value:
            if mop[0] == "send":
                assert len(mop) == 3 and isinstance(mop[1], int), op
                if typ == "invoke":
                    assert isinstance(mop[2], int), op
                    assert mop[2] not in sent.setdefault(mop[1], set()), "value reused"
                    sent[mop[1]].add(mop[2])
                elif typ == "ok":
                    off, v = mop[2]
                    assert isinstance(off, int) and off >= 0 and isinstance(v, int), op
            else:
                assert mop[0] == "poll", op
                if typ == "ok":
                    assert len(mop) == 2 and isinstance(mop[1], dict), op
                if len(mop) == 2:
                    for k, pairs in mop[1].items():
                        assert 0 <= int(k) < opts.keys, op
                        offsets = [p[0] for p in pairs]
                        assert offsets == sorted(set(offsets)), op
        if typ == "fail":
            assert op.get("error"), op


def _check_offsets_agree(ops: list[dict[str, Any]]) -> int:
    """Every [offset, v] a poll saw for key k is where the send of v said it landed, and no
    offset of a key holds two values. Returns how many polled records were compared."""
    sent_at: dict[tuple[str, Any], int] = {}
    for op in ops:
        if op["type"] == "invoke" or op["f"] not in ("send", "txn"):
            continue
        for mop in op["value"]:
            if mop[0] == "send" and isinstance(mop[2], list) and mop[2][0] is not None:
                sent_at[(str(mop[1]), mop[2][1])] = mop[2][0]
    at_offset: dict[tuple[str, int], Any] = {}
    compared = 0
    for op in ops:
        if op["type"] == "invoke" or op["f"] not in ("poll", "txn"):
            continue
        for mop in op["value"]:
            if mop[0] != "poll" or len(mop) != 2:
                continue
            for k, pairs in mop[1].items():
                for off, v in pairs:
                    assert at_offset.setdefault((k, off), v) == v, (k, off, v)
                    if (k, v) in sent_at:
                        assert sent_at[(k, v)] == off, (k, v, off, sent_at[(k, v)])
                        compared += 1
    return compared


def _common_checks(ops: list[dict[str, Any]], result: dict[str, Any], opts: QueueOptions) -> None:
    _check_shape(ops, opts)
    assert _check_offsets_agree(ops) > 0
    assert result["valid"], result["bad_anomaly_types"]
    counts = result["stats"]["ops_by_f_type"]
    assert counts.get("send:ok", 0) >= 10 and counts.get("txn:ok", 0) >= 10, counts
    assert result["stats"]["ok_sends"] > 0
    # The clients' own polls read something (not only the final drain).
    final = max(p for p in {op["process"] for op in ops} if isinstance(p, int))
    client_reads = sum(
        len(pairs)
        for op in ops
        if op["type"] == "ok" and op["process"] != final and op["f"] in ("poll", "txn")
        for mop in op["value"]
        if mop[0] == "poll"
        for pairs in mop[1].values()
    )
    assert client_reads > 0


# --- cluster runs --------------------------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.timeout(150)
def test_assign_with_transactions(healthy_cluster: Any, harness_store: Path) -> None:
    _, ops, result, opts = _run(
        healthy_cluster, harness_store, "assign", clients=3, time_limit=20, sub_via="assign"
    )
    _common_checks(ops, result, opts)
    # Jepsen's final drain: one extra process assigned to every key, only ok polls.
    final = max(p for p in {op["process"] for op in ops} if isinstance(p, int))
    final_ops = [op for op in ops if op["process"] == final]
    assert final_ops[0]["f"] == "assign" and final_ops[1]["value"] == list(range(opts.keys))
    assert {op["f"] for op in final_ops} == {"assign", "poll"}
    assert all(op["type"] in ("invoke", "ok") for op in final_ops)


@pytest.mark.cluster
@pytest.mark.timeout(150)
def test_subscribe_with_transactions(healthy_cluster: Any, harness_store: Path) -> None:
    _, ops, result, opts = _run(
        healthy_cluster, harness_store, "subscribe", clients=3, time_limit=15, sub_via="subscribe"
    )
    _common_checks(ops, result, opts)
    assert result["stats"]["subscribe_ops"] >= 3
    # Three consumers joining one group: the callbacks show up as rebalance logs.
    logs = [op["rebalance_log"] for op in ops if "rebalance_log" in op]
    assert logs and all(e["type"] in ("assigned", "revoked", "lost") for lg in logs for e in lg)


@pytest.mark.cluster
@pytest.mark.timeout(150)
def test_sigkilled_client_is_replaced(healthy_cluster: Any, harness_store: Path) -> None:
    killed: dict[str, Any] = {}

    def kill_one(w: QueueWorkload) -> None:
        victim = 1

        def mid_op() -> bool:
            _, vops, _ = read_process_file(w.history_path(victim))
            done = sum(1 for op in vops if op["type"] != "invoke")
            last = vops[-1] if vops else None
            return done >= 5 and last is not None and last["type"] == "invoke"

        wait_for(mid_op, timeout=15, interval=0.005, what="client 1 in the middle of an op")
        pid = w.processor_pids()[victim]
        w.kill_client(victim)
        killed.update(process=victim, pid=pid, at=time.monotonic_ns())

        def successor_works() -> bool:
            new = [p for p in w.processor_pids() if p >= w.options.clients]
            return any(
                op["type"] == "ok" for p in new for op in read_process_file(w.history_path(p))[1]
            )

        wait_for(successor_works, timeout=20, what="a new client process doing ok ops")

    _, ops, result, opts = _run(
        healthy_cluster, harness_store, "kill", during=kill_one, clients=3, time_limit=15
    )
    _common_checks(ops, result, opts)
    exits = [
        op["value"]
        for op in ops
        if op["process"] == "supervisor" and op["f"] == "exit" and op["type"] == "ok"
    ]
    assert {"process": 1, "returncode": -9}.items() <= next(
        e for e in exits if e["process"] == 1
    ).items()
    spawned = [
        op["value"]
        for op in ops
        if op["process"] == "supervisor" and op["f"] == "spawn" and op["type"] == "ok"
    ]
    successor = next(s for s in spawned if s["replaces"] == 1)
    assert successor["process"] >= opts.clients and successor["slot"] == 1
    later_ok = [
        op
        for op in ops
        if op["process"] == successor["process"]
        and op["type"] == "ok"
        and op["time"] > killed["at"]
    ]
    assert later_ok
    open_invokes = check_pairing(ops)
    print(f"  killed process 1 with open op: {open_invokes.get(1, {}).get('f')}")


@pytest.mark.cluster
@pytest.mark.timeout(150)
def test_aborted_transactions_are_failed_and_never_read(
    healthy_cluster: Any, harness_store: Path
) -> None:
    _, ops, result, opts = _run(
        healthy_cluster, harness_store, "abort", clients=3, time_limit=12, abort_p=0.3
    )
    _common_checks(ops, result, opts)
    failed = [op for op in ops if op["type"] == "fail" and isinstance(op["process"], int)]
    causes = Counter(op["error"].get("code") for op in failed)
    print(f"  fail causes: {dict(causes)}")
    assert causes["deliberate-abort"] > 0
    aborted = {
        (str(m[1]), m[2][1])
        for op in failed
        if op["f"] in ("send", "txn")
        for m in op["value"]
        if m[0] == "send"
    }
    assert aborted
    read = {
        (k, v)
        for op in ops
        if op["type"] != "invoke" and op["f"] in ("poll", "txn")
        for m in op["value"]
        if m[0] == "poll" and len(m) == 2
        for k, pairs in m[1].items()
        for _, v in pairs
    }
    assert not aborted & read
    assert "G1a" not in result["anomalies"]


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_read_uncommitted_aborted_reads_are_caught(
    healthy_cluster: Any, harness_store: Path
) -> None:
    """Negative control: the same workload with read_uncommitted consumers reads aborted
    sends, and the history says so (G1a). Without this, a valid verdict could also mean that
    the history cannot show the anomaly at all."""
    _, ops, result, opts = _run(
        healthy_cluster,
        harness_store,
        "uncommitted",
        clients=3,
        time_limit=8,
        abort_p=0.3,
        read_committed=False,
    )
    _check_shape(ops, opts)
    assert _check_offsets_agree(ops) > 0
    assert not result["valid"]
    assert "G1a" in result["bad_anomaly_types"]
