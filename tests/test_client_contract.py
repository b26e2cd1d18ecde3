"""docs/client-contract.md is what both eos processors do: its tables of configuration
fields, hook points, signals and exit statuses against the Python processor's definitions
and the Java processor's source."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from history.moments import HOOK_POINTS
from workloads.eos import processor as eos_processor
from workloads.eos.config import ProcessorConfig

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "client-contract.md").read_text()
JAVA = (ROOT / "workloads" / "java" / "src" / "kafkaharness" / "EosProcessor.java").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end > 0 else None]


def _first_cells(section: str) -> list[str]:
    rows = [r for r in section.splitlines() if r.startswith("| ") and not r.startswith("| ---")]
    return [r.split("|")[1].strip() for r in rows[1:]]


def test_the_configuration_fields_are_the_processor_s() -> None:
    named = {
        name
        for cell in _first_cells(_section("Start"))
        for name in re.findall(r"`([a-z_]+)`", cell)
    }
    assert named == {f.name for f in dataclasses.fields(ProcessorConfig)}


def test_the_hook_points_are_the_moments_contract_s() -> None:
    assert [c.strip("`") for c in _first_cells(_section("Hook points and the arm file"))] == list(
        HOOK_POINTS
    )


def test_the_exit_statuses_are_both_processors() -> None:
    rows = re.findall(r"^\| (\d+) \| `(EXIT_[A-Z_]+)` \|", _section("Exit status"), re.M)
    documented = {name: int(code) for code, name in rows}
    python = {k: v for k, v in vars(eos_processor).items() if k.startswith("EXIT_")}
    java = {k: int(v) for k, v in re.findall(r"static final int (EXIT_[A-Z_]+) = (\d+);", JAVA)}
    assert documented == python == java
    assert len(documented) == 9


def test_the_signals_are_the_ones_both_processors_handle() -> None:
    section = _section("Signals")
    for sig in ("SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2"):
        assert sig in section
    handled_py = set(
        re.findall(
            r"signal\.signal\(signal\.(SIG[A-Z0-9]+)", Path(eos_processor.__file__).read_text()
        )
    )
    assert handled_py == {"SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2"}
    handled_java = {f"SIG{s}" for s in re.findall(r'Signals\.on\("([A-Z0-9]+)"', JAVA)}
    assert handled_java == {"SIGTERM", "SIGINT", "SIGUSR1"}  # never SIGUSR2: the JVM's own


def test_the_checker_s_rules_and_statuses_are_the_page_s() -> None:
    from checkers.contract import EXIT_CODES, RULES

    rules = [c.strip("`") for c in _first_cells(_section("Checking a client against the contract"))]
    assert rules == list(RULES)
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", _section("Exit status"), re.M)}
    assert set(EXIT_CODES) == documented
