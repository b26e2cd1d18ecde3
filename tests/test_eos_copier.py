"""Kafka's Java TransactionalMessageCopier as the eos client (transaction version 2)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from harness.run.runner import RunOptions, execute
from history import load_history
from workloads.eos.config import EosOptions
from workloads.eos.copier import parse_line

pytestmark = pytest.mark.cluster


def test_parse_copier_events() -> None:
    f, v = parse_line(
        '{"progress":"t1","totalProcessed":4,"consumed":4,"remaining":2,'
        '"stage":"ProcessLoop","time":"x"}'
    ) or ("", {})
    assert f == "progress" and v["total_processed"] == 4 and v["remaining"] == 2
    f, v = parse_line('{"shutdown_complete":"t1","totalProcessed":9,"remaining":0}') or ("", {})
    assert f == "exit" and v["total_processed"] == 9
    f, v = parse_line(
        '{"transactionalId":"t2","stage":"RebalanceComplete","totalProcessed":0,'
        '"consumed":0,"remaining":6}'
    ) or ("", {})
    assert f == "progress" and v["stage"] == "RebalanceComplete" and v["transactional_id"] == "t2"
    f, v = parse_line('{"transactionalId":"t2","stage":"ShutdownComplete","remaining":0}') or (
        "",
        {},
    )
    assert f == "exit"
    assert parse_line("WARN something") is None and parse_line("{broken") is None


def test_java_copier_is_exactly_once_with_transaction_version_2(
    kafka_cluster, harness_store: Path
) -> None:  # type: ignore[no-untyped-def]
    suffix = f"-copier-{uuid.uuid4().hex[:6]}"
    eos = EosOptions(
        name_suffix=suffix,
        client="copier",
        values=3000,
        partitions=3,
        processors=2,
        txn_size=100,
        find_hanging=False,
        drain_timeout_s=90,
    )
    result = execute(
        kafka_cluster,
        RunOptions(workload_options=eos, time_limit=5),
        harness_store / "eos" / suffix.lstrip("-"),
    )
    assert result.summary["duplicates"] == result.summary["missing"] == 0, result.summary
    assert result.summary["seeded"] == 3000
    ops = load_history(result.history)
    progress = [o for o in ops if o["f"] == "progress" and isinstance(o["process"], int)]
    assert progress and max(o["value"]["total_processed"] or 0 for o in progress) > 0
    features = kafka_cluster.nodes[0].dir / "format.log"
    assert "transaction.version', featureLevel=2" in features.read_text()
