"""Bad input gets one clear line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _harness(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        timeout=300,
    )


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_unknown_version_lists_neighbours() -> None:
    line = _one_line_error(_harness("install", "--kafka-version", "3.9.42"))
    assert "3.9.42" in line and "nearest: 3.9." in line


def test_malformed_version() -> None:
    assert "not a Kafka version" in _one_line_error(_harness("install", "--kafka-version", "x.y"))


def test_java_missing_from_path(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    env = dict(os.environ, PATH=str(bindir))
    line = _one_line_error(_harness("install", env=env))
    assert "Java not found" in line


def test_no_network_is_named(tmp_path: Path) -> None:
    env = dict(
        os.environ,
        KAFKA_HARNESS_CACHE=str(tmp_path / "cache"),
        KAFKA_HARNESS_MAVEN_REPO="http://127.0.0.1:9/maven2",
    )
    line = _one_line_error(_harness("install", "--kafka-version", "3.9.1", env=env))
    assert "cannot reach Maven Central" in line and "no network" in line


def test_taken_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = _one_line_error(_harness("cluster", "--base-port", str(port)))
    assert f"port {port}" in line and "in use" in line


def test_bad_broker_config_syntax() -> None:
    line = _one_line_error(_harness("cluster", "--broker-config", "no-equals-sign"))
    assert "KEY=VALUE" in line


def test_a_flag_of_another_workload_is_one_line(tmp_path: Path) -> None:
    """``--sub-via`` belongs to the queue workload: an eos run refuses it rather than ignore
    it, so a command line never carries an option that does nothing."""
    store = str(tmp_path / "store")
    line = _one_line_error(
        _harness("run", "--workload", "eos", "--sub-via", "assign", "--store", store)
    )
    assert "--sub-via: not an option of --workload eos" in line
    line = _one_line_error(
        _harness("run", "--workload", "queue", "--processors", "0", "--store", store)
    )
    assert "at least one client" in line
    assert not (tmp_path / "store").exists(), "refused before any run directory exists"
