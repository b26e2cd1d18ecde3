"""The nightly workflow is valid GitHub Actions (actionlint, ``harness.nightly.actionlint``)
and calls the CLI as it exists."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from common.errors import HarnessError
from harness.nightly.actionlint import ensure_actionlint

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"


def _actionlint() -> str:
    try:
        return ensure_actionlint()
    except HarnessError as exc:
        if "go not found" in str(exc):
            pytest.skip(str(exc))
        raise


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
