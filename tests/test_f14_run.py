"""A real run where finding F14 (KAFKA-20634) struck, kept small: the checkers find the lost
commit and name F14.

``tests/data/f14`` is ``python -m harness run --workload offsets --offsets-groups 24
--offsets-one-coordinator --broker-patch resignation-delay --broker-config
offsets.commit.timeout.ms=30000 --broker-config group.coordinator.append.linger.ms=0
--nemesis kafka-20634 --time-limit 45 --kafka-version 4.3.0 --seed 2`` (2026-11-29): its
config, and of its history the header, the nemesis's ops and two of the 24 committers
(process 16, one of the five whose commit was lost, and process 0), numbered again in order,
so the file stays small. Node 2 was cut from the controllers while committer 16's commit of
offset 682 was pending there; the commit was acknowledged 10 s later, after the cut healed,
and the group's committed offset read 681.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.cli import EXIT_INVALID, check_run_dir
from checkers.judge import judge_run_dir
from tests.kept_runs import report_page, unpack

DATA = Path(__file__).parent / "data" / "f14"


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(DATA, tmp_path_factory.mktemp("f14") / "run")


def test_the_checkers_find_the_lost_commit_and_name_f14(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check_run_dir(kept, engine="python") == EXIT_INVALID
    assert "checkers: known finding F14: " in capsys.readouterr().err
    result = json.loads((kept / "results.json").read_text())  # what the check just wrote
    assert result["valid"] is False and result["bad_anomaly_types"] == ["lost-commit"]
    (ex,) = result["checkers"]["offsets"]["examples"]["lost-commit"]
    assert (ex["group"], ex["acknowledged_offset"], ex["read_offset"]) == ("offsets-g163", 682, 681)
    (f14,) = result["known_findings"]
    assert f14["id"] == "F14" and f14["kafka"] is True
    assert "offsets-g163 was told its commit of offset 682" in f14["evidence"][0]


def test_the_report_names_f14_beside_the_lost_commit(kept: Path, tmp_path: Path) -> None:
    result = judge_run_dir(kept, engine="python")
    config = {"workload": "offsets", "test_name": "f14", "kafka_version": "4.3.0"}
    page = report_page(tmp_path / "page", config, result)
    assert 'id="known-f14"' in page and "lost-commit" in page
