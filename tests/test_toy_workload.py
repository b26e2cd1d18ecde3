"""A new workload is its package plus one registry line.

``tests/toyworkload`` is a workload package (options, declaration, fault-facing client object,
driver) that no module of the project names. Registered with one call, it is parsed by the
command line, run on the worker's real cluster under a broker fault and judged by the
existing ``queue`` checker suite, whose verdict must be valid (the toy's single sender is a
correct client) and must have seen every value it sent.
"""

from __future__ import annotations

import ast
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cli import build_parser
from harness.run import workloads
from harness.run.arguments import options_from_args
from tests.toyworkload import driver as toy
from workloads.drive import Workload

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(toy.__file__).parent


@pytest.fixture
def registered() -> Iterator[Workload]:
    workloads.register(toy.WORKLOAD)  # the one registry line
    try:
        yield toy.WORKLOAD
    finally:
        workloads.unregister(toy.SPEC.name)


def test_the_toy_package_uses_only_the_shared_contract() -> None:
    """The package imports the workload contract (``workloads.drive``, ``workloads.spec``),
    ``common`` and ``history``, and nothing of the harness, another workload or the checkers;
    no module outside the tests names it."""
    imported: set[str] = set()
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    ours = {"workloads", "harness", "checkers", "nemeses", "history", "common"}
    project = {m for m in imported if m.split(".")[0] in ours}
    contract = {"workloads.drive", "workloads.spec", "history", "history.clientcontrol"}
    assert project == contract | {"common.errors"}
    named = subprocess.run(
        ["git", "grep", "-l", "toyworkload", "--", "*.py", ":!tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert named.stdout == "", f"modules outside the tests name the toy: {named.stdout}"


def test_a_registered_package_is_parsed_by_the_command_line(registered: Workload) -> None:
    args = build_parser().parse_args(["run", "--workload", "toy", "--toy-keys", "3", "--seed", "5"])
    options = options_from_args(args)
    assert options.workload_options == toy.ToyOptions(seed=5, keys=3)
    assert options.test_name == "toy-k3"


@pytest.mark.cluster
def test_a_registered_package_runs_to_a_verdict_on_a_real_cluster(
    registered: Workload, scenario: Any
) -> None:
    verdict, result, report = scenario("toy", "registry", nemesis="pause", time_limit=10)
    assert result.drained, "the final reads did not reach every partition's end"
    assert verdict["valid"] is True, verdict
    queue = verdict["checkers"]["queue"]
    sent = [
        op for op in map(json.loads, (result.run_dir / "processes" / "0.jsonl").open())
        if op.get("type") == "ok"
    ]  # fmt: skip
    # Every acknowledged value is in the final reads, each once: the queue checker counted
    # them all as sent and read, with no key left unseen.
    assert len(sent) > 10 and queue["stats"]["ok_sends"] == len(sent)
    assert queue["stats"]["ok_polled_records"] == len(sent)
    assert not any(queue["stats"]["unseen_by_key"].values())
    assert report.is_file()
