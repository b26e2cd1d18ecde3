"""A staged build is published whole or not at all, and a second builder keeps the first's."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.staging import staged_dir


def test_a_build_is_published_by_one_rename(tmp_path: Path) -> None:
    target = tmp_path / "builds" / "abc"
    with staged_dir(target) as work:
        assert work.parent == target.parent and work != target
        (work / "out").write_text("built")
        assert not target.exists()  # nothing is seen half-made
    assert (target / "out").read_text() == "built"
    assert [p.name for p in target.parent.iterdir()] == ["abc"]  # no leftover


def test_a_failed_build_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "abc"
    with pytest.raises(RuntimeError), staged_dir(target) as work:
        (work / "half").write_text("x")
        raise RuntimeError("the compiler said no")
    assert list(tmp_path.iterdir()) == []


def test_the_loser_of_a_race_keeps_the_winner_s_build(tmp_path: Path) -> None:
    target = tmp_path / "abc"
    with staged_dir(target) as late:
        (late / "out").write_text("second")
        with staged_dir(target) as early:
            (early / "out").write_text("first")
    assert (target / "out").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["abc"]
