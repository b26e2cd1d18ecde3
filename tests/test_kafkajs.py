"""KafkaJS judged on a real cluster: its processors made zombies commit inputs their
successors already committed (docs/findings.md, F7), and the verdict says which finding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.contract import check_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.cluster
def test_a_kafkajs_zombie_commits_beside_its_successor_and_the_verdict_names_f7(
    tmp_path: Path,
) -> None:
    """The transaction timeout is a minute, so the coordinator cannot abort the zombie's
    transaction on its own while it is paused: what is left to fence it is the group
    metadata KafkaJS does not send."""
    proc = subprocess.run(
        [
            sys.executable, "-m", "harness", "run", "--workload", "eos", "--client", "kafkajs",
            "--nemesis", "zombie", "--time-limit", "20", "--seed", "1",
            "--session-timeout-ms", "6000", "--transaction-timeout-ms", "60000",
            "--store", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = (tmp_path / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    assert set(results["anomalies"]) == {"duplicate"}, results["anomalies"]
    (f7,) = results["known_findings"]
    assert f7["id"] == "F7" and "with no generation in the offset commit" in f7["evidence"][0]
    assert "known finding F7" in proc.stdout
    assert check_run(run) == []  # the processors kept the contract while breaking exactly-once
