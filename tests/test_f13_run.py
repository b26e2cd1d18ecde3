"""A real run where finding F13 (KAFKA-20785) struck, kept small: the checkers name it and
the run stays valid.

``tests/data/f13`` is seed 1 of ``python -m harness campaign --workload eos --client java
--nemesis kafka-20785 --runs 10 --time-limit 40 --kafka-version 4.4.0`` (2026-11-28): its
history and config. Processor 0 was held before its EndTxn past its transaction timeout; the
coordinator rolled the transaction back, and under transaction version 2 the commit that then
went out was refused with INVALID_TXN_STATE instead of being fenced. Nothing was lost.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.cli import EXIT_VALID, check_run_dir
from checkers.judge import judge_run_dir
from tests.kept_runs import report_page, unpack

DATA = Path(__file__).parent / "data" / "f13"


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(DATA, tmp_path_factory.mktemp("f13") / "run")


def test_the_checkers_name_f13_on_the_kept_run_and_it_stays_valid(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check_run_dir(kept, engine="python") == EXIT_VALID
    assert "checkers: known finding F13: " in capsys.readouterr().err
    result = json.loads((kept / "results.json").read_text())  # what the check just wrote
    assert result["valid"] is True and result["bad_anomaly_types"] == []
    assert result["anomalies"] == {"invalid-state-commit": 1}
    (ex,) = result["checkers"]["invalid-state-commit"]["examples"]
    assert (ex["instance"], ex["txn_seq"], ex["code"]) == (0, 23, "INVALID_TXN_STATE")
    (f13,) = result["known_findings"]
    assert f13["id"] == "F13" and f13["kafka"] is True and f13["on_valid"] is True


def test_the_report_says_exactly_once_held_beside_f13(kept: Path, tmp_path: Path) -> None:
    result = judge_run_dir(kept, engine="python")
    config = {"workload": "eos", "test_name": "f13", "kafka_version": "4.4.0"}
    page = report_page(tmp_path / "page", config, result)
    assert 'id="known-f13"' in page and "Exactly-once held" in page
    assert "The verdict stays invalid" not in page
