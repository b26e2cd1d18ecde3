"""The moment names are defined once (``history.moments``); the processors that fire at them
spell the same strings. The Java processor cannot import Python, so this test reads its source."""

from __future__ import annotations

import re
from pathlib import Path

from history.moments import ABORT_MOMENTS, ARMED_ACTIONS, DURING_COMMIT, HOOK_POINTS, MOMENTS

ROOT = Path(__file__).resolve().parents[1]
JAVA = ROOT / "workloads" / "java" / "src" / "kafkaharness" / "EosProcessor.java"
PYTHON = ROOT / "workloads" / "eos" / "processor.py"


def test_moments_are_the_hook_points_and_during_commit_in_order() -> None:
    assert (*HOOK_POINTS[:4], DURING_COMMIT, HOOK_POINTS[4]) == MOMENTS
    assert set(ABORT_MOMENTS) < set(HOOK_POINTS) and "after-commit" not in ABORT_MOMENTS


def test_java_processor_fires_at_exactly_the_hook_points() -> None:
    src = JAVA.read_text()
    fired = set(re.findall(r'\bhook\("([a-z-]+)"\)', src))
    assert fired == set(HOOK_POINTS), f"EosProcessor.java hooks {sorted(fired)}"
    arm = (JAVA.parent / "ArmFile.java").read_text()  # where an armed moment fires
    during = set(re.findall(r'at\.equals\("([a-z-]+)"\)', src + arm))
    assert during == {DURING_COMMIT}, f"the Java processor compares the armed moment with {during}"
    actions = set(re.findall(r'action\.equals\("([a-z]+)"\)', src))
    assert actions <= {*ARMED_ACTIONS, "exit"} and {"kill", "abort"} <= actions


def test_python_processor_fires_at_exactly_the_hook_points() -> None:
    src = PYTHON.read_text()
    fired = set(re.findall(r'\b_hook\("([a-z-]+)"\)', src))
    assert fired == set(HOOK_POINTS), f"eos_processor.py hooks {sorted(fired)}"
    assert '"during-commit"' not in src, (
        "eos_processor.py spells during-commit instead of DURING_COMMIT"
    )


def test_both_share_members_fire_at_exactly_the_hook_points() -> None:
    """The share members (Python and Java) name the same moments, every hook point once or
    more, and no other."""
    for path in (ROOT / "workloads/share/member.py", JAVA.parent / "ShareMember.java"):
        calls = re.findall(r"\bhooks\(\s*(?:decided|kinds)\s*,([^)]*)\)", path.read_text())
        named = {n for call in calls for n in re.findall(r'"([a-z-]+)"', call)}
        assert named == set(HOOK_POINTS), f"{path.name} fires at {sorted(named)}"
