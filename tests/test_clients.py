"""The client machinery both workloads' processes share (``workloads.clients``), without a
cluster: client settings, rebalance routing, retried and bounded calls, and that the eos
processor now has the hang guard the queue client had alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from workloads import clients
from workloads.clients import Calls, ClientError, make_clients, subscribe
from workloads.eos.config import EosOptions
from workloads.eos.processor import Processor


class _Cfg:
    bootstrap = "b:1"
    group_id = "g"
    transaction_timeout_ms = 5000
    session_timeout_ms = 6000
    security = None


def _captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    monkeypatch.setattr(confluent_kafka, "Producer", lambda conf: seen.setdefault("p", conf))
    monkeypatch.setattr(confluent_kafka, "Consumer", lambda conf: seen.setdefault("c", conf))
    return seen


def test_transactional_clients_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _captured(monkeypatch)
    make_clients(
        _Cfg(),
        "queue",
        4,
        "t-4",
        read_committed=False,
        producer={"linger.ms": 0, "message.timeout.ms": 9000},
    )
    p, c = seen["p"], seen["c"]
    assert p["client.id"] == "queue-p4" and c["client.id"] == "queue-c4"
    assert p["transactional.id"] == "t-4" and p["transaction.timeout.ms"] == 5000
    assert p["message.timeout.ms"] == 5000  # never above the transaction timeout
    assert p["enable.idempotence"] is True and p["acks"] == "all" and p["linger.ms"] == 0
    assert c["isolation.level"] == "read_uncommitted" and c["enable.auto.commit"] is False
    assert c["session.timeout.ms"] == 6000 and c["heartbeat.interval.ms"] == 2000
    assert c["max.poll.interval.ms"] == 60000 and c["group.protocol"] == "classic"


def test_plain_clients_with_the_consumer_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _captured(monkeypatch)
    make_clients(_Cfg(), "eos", 2, None, group_protocol="consumer")
    p, c = seen["p"], seen["c"]
    assert "transactional.id" not in p and "message.timeout.ms" not in p
    assert c["isolation.level"] == "read_committed" and c["group.protocol"] == "consumer"
    assert "session.timeout.ms" not in c and "heartbeat.interval.ms" not in c


def test_subscribe_routes_every_rebalance_event() -> None:
    events: list[tuple[str, list[int]]] = []

    class FakeConsumer:
        def subscribe(self, topics: list[str], **callbacks: Any) -> None:
            assert topics == ["in"]
            for name in ("on_assign", "on_revoke", "on_lost"):
                callbacks[name](self, [int(name == "on_lost")])

    subscribe(FakeConsumer(), ["in"], lambda event, parts: events.append((event, parts)))
    assert events == [("assign", [0]), ("revoke", [0]), ("lost", [1])]
    assert tuple(e for e, _ in events) == clients.REBALANCE_EVENTS


def test_calls_retry_retriable_errors_within_the_budget() -> None:
    from confluent_kafka import KafkaError, KafkaException

    attempts: list[float] = []

    def flaky(x: int, timeout: float) -> int:
        attempts.append(timeout)
        if len(attempts) < 3:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True))
        return x * 2

    calls = Calls("test", budget_s=10.0, floor_s=0.5)
    assert calls.call("commit", flaky, 21) == 42 and len(attempts) == 3
    assert all(0.5 <= t <= 10.0 for t in attempts)

    def fatal(timeout: float) -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    with pytest.raises(ClientError) as caught:
        calls.call("commit", fatal)
    assert caught.value.info["code"] == "_FENCED" and caught.value.info["stage"] == "commit"
    assert calls.hung is None


def test_the_eos_processor_bounds_a_hung_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hang guard is the processor's too: a commit that ignores its timeout is reported
    as a fatal client error, and the processor will not touch its producer again."""
    monkeypatch.setattr(clients, "HANG_SLACK_S", 0.2)
    cfg = EosOptions().processor_config(1, 0, "b:1", str(tmp_path / "1.jsonl"))
    cfg.call_timeout_s = 0.1
    processor = Processor(cfg)
    release = threading.Event()
    flushed: list[float] = []

    class StuckProducer:
        def commit_transaction(self, timeout: float) -> None:
            release.wait(60)

        def flush(self, timeout: float) -> int:
            flushed.append(timeout)
            return 0

    try:
        t0 = time.monotonic()
        with pytest.raises(ClientError) as caught:
            processor.calls.call("commit", StuckProducer().commit_transaction)
        assert time.monotonic() - t0 < 5
        assert caught.value.info["code"] == "CLIENT_HUNG" and caught.value.info["fatal"]
        assert processor.calls.hung == "commit"
        processor.calls.close(None, StuckProducer())
        assert flushed == []
    finally:
        release.set()
        processor.rec.close()
