"""F5's standalone reproducers (docs/repro/) against a real cluster: the Python one shows the
bug on librdkafka, the Java one is the control and waits as KIP-447 asks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.cluster

REPRO = Path(__file__).resolve().parents[1] / "docs" / "repro"


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("reset", ["earliest", "error"])
def test_the_python_reproducer_shows_f5_without_the_harness(
    healthy_cluster: Any, reset: str
) -> None:
    """librdkafka 2.16 starts the waiting member's partition while it is pending: at 0 with
    ``earliest``; with ``error``, the reset it attempts is the error "no previously committed
    offset available", though offset 3 is committed: the partition was started with its
    offset still unknown (INVALID). Up to three tries: the rebalance can land after the wait
    has ended (one try of a CI run, 2026-11-29, waited and started at 5)."""
    proc = _run(
        [
            sys.executable,
            str(REPRO / "f5_pending_offsets.py"),
            "--bootstrap",
            healthy_cluster.bootstrap,
            "--offset-reset",
            reset,
            "--tries",
            "3",
            "--until-reproduced",
        ]
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if "REPRODUCED" in ln]
    if reset == "earliest":
        assert "started partition 0 at 0 while offset 5 was pending" in line
    else:
        # librdkafka takes the partition for one with no committed offset, though 3 is.
        assert "at error: no previously committed offset available" in line, line


def test_the_java_control_waits_and_starts_at_the_committed_offset(healthy_cluster: Any) -> None:
    install = healthy_cluster.install
    proc = _run(
        [
            install.java,
            "-cp",
            install.classpath,
            str(REPRO / "F5PendingOffsets.java"),
            "--bootstrap",
            healthy_cluster.bootstrap,
        ]
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "waited: member" in proc.stdout and "started partition 0 at 5" in proc.stdout


def test_the_javascript_reproducer_shows_f5_through_confluent_s_client(
    healthy_cluster: Any,
) -> None:
    """Confluent's JavaScript client runs librdkafka (2.15.1 in the pinned 1.10.1): the same
    steps, through its own consumer and transactional producer, reach the same bug."""
    from workloads import client_registry

    built = client_registry.ensure_built(client_registry.get("confluent-js"))
    proc = subprocess.run(
        ["node", str(REPRO / "f5_pending_offsets.js"), "--bootstrap", healthy_cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NODE_PATH": str(built / "node_modules")},
    )
    assert "librdkafka 2.15.1" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if "REPRODUCED" in ln]
    assert "started partition 0 at 0 while offset 5 was pending" in line, line
