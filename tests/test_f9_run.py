"""A real run where finding F9 struck, kept small: ``python -m checkers`` names it.

``tests/data/f9`` is the run ``--workload eos --nemesis leaderless-marker --kafka-version
4.4.0 --seed 1`` (confluent-kafka, 2026-11-28): its history, its config, and its log dump cut
to the output topic and ``__transaction_state`` (every replica's rows of those, untouched).
The coordinator rolled processor 0's held transaction back while the output partitions had
no leader and completed it without the abort markers of ``eos-output-0`` and
``eos-output-1``: their records stay open, everything behind them is unreadable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers.cli import EXIT_INVALID, check_run_dir
from checkers.judge import judge_run_dir
from tests.kept_runs import report_page, unpack

DATA = Path(__file__).parent / "data" / "f9"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return unpack(DATA, tmp_path / "run")


def test_the_checkers_name_f9_on_the_kept_run(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check_run_dir(run_dir, engine="python") == EXIT_INVALID
    assert "checkers: known finding F9: " in capsys.readouterr().err
    result = judge_run_dir(run_dir, engine="python")
    assert result["anomalies"]["marker-skipped"] == 2
    (f9,) = result["known_findings"]
    assert f9["id"] == "F9" and f9["kafka"] is True
    assert "find-hanging" in f9["remedy"] and "abort --topic TOPIC" in f9["remedy"]
    assert [e.split(": ")[0] for e in f9["evidence"]] == [
        "producer 1000's transaction at epoch 0 left 8 record(s) open on eos-output-0 "
        "(offsets 103..110)",
        "producer 1000's transaction at epoch 0 left 8 record(s) open on eos-output-1 "
        "(offsets 103..110)",
    ]
    assert {"marker-skipped", "hanging-transaction", "lost"} <= set(result["bad_anomaly_types"])


def test_the_report_says_kafka_broke_it_gives_the_remedy_and_names_a_broker_patch(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    result = judge_run_dir(unpack(DATA, tmp_path / "kept"), engine="python")
    config = {"workload": "eos", "test_name": "f9", "kafka_version": "4.4.0"}
    page = report_page(run, config, result)
    assert 'id="known-f9"' in page and "Kafka, not the harness, broke exactly-once" in page
    assert "Remedy: once each partition has its leader back" in page
    assert 'id="broker-patch"' not in page
    page = report_page(run, {**config, "broker_patch": "kafka-20734"}, result)
    assert 'brokers patched with <span id="broker-patch">kafka-20734</span>' in page
