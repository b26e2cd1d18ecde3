"""Version parsing, ordering and suggestions (pure logic), plus Maven Central's real list."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.errors import HarnessError
from harness.kafka.versions import (
    DEFAULT_KAFKA_VERSION,
    KafkaVersion,
    check_version,
    nearest_versions,
    released_versions,
    sort_versions,
)


def test_numeric_ordering() -> None:
    assert sort_versions(["4.9.0", "4.10.0", "3.9.1", "4.0.0"]) == [
        "4.10.0",
        "4.9.0",
        "4.0.0",
        "3.9.1",
    ]
    assert KafkaVersion("4.0.0-rc1") < KafkaVersion("4.0.0")


def test_rejects_garbage() -> None:
    with pytest.raises(HarnessError, match="not a Kafka version"):
        KafkaVersion("four")


def test_nearest_versions_brackets_the_request() -> None:
    avail = ["3.9.1", "3.9.2", "4.0.0", "4.3.0", "4.3.1"]
    assert nearest_versions("4.4.0", avail) == ["4.3.1", "4.3.0", "4.0.0"]
    assert nearest_versions("3.9.3", avail)[:2] == ["3.9.2", "4.0.0"]


def test_transaction_version_feature_only_on_4x() -> None:
    assert KafkaVersion("4.0.0").supports_transaction_version
    assert not KafkaVersion("3.9.1").supports_transaction_version


def test_maven_central_lists_real_versions() -> None:
    versions = released_versions()
    assert any(v.startswith("3.9.") for v in versions)
    assert any(v.startswith("4.0.") for v in versions)
    assert DEFAULT_KAFKA_VERSION in versions
    assert versions == sort_versions(versions)


def test_unknown_version_names_neighbours() -> None:
    with pytest.raises(HarnessError, match=r"nearest: 3\.9\.\d"):
        check_version("3.9.99")


def test_versions_report_marks_installed_and_new() -> None:
    from harness.kafka.versions import versions_report

    rows = versions_report(["4.9.0", "4.10.0", "3.9.1"], {"3.9.1"}, {"3.9.1", "4.9.0"})
    assert [r["version"] for r in rows] == ["4.10.0", "4.9.0", "3.9.1"]
    assert [r["new"] for r in rows] == [True, False, False]
    assert [r["installed"] for r in rows] == [False, False, True]
    assert not any(r["new"] for r in versions_report(["4.0.0"], set(), None))


def test_versions_command_lists_real_versions_newest_first() -> None:
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "harness", "versions", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    rows = json.loads(out.stdout)
    versions = [r["version"] for r in rows]
    assert versions == sort_versions(versions)
    assert any(v.startswith("3.9.") for v in versions)
    assert any(v.startswith("4.0.") for v in versions)
    assert any(r["installed"] for r in rows)


def test_versions_command_marks_versions_not_seen_by_a_matrix(tmp_path: Path) -> None:
    """``store/versions-seen.json`` (written by the matrix) decides what is NEW."""
    import json
    import subprocess
    import sys

    (tmp_path / "versions-seen.json").write_text(json.dumps(["3.9.2", "4.3.1"]))
    out = subprocess.run(
        [sys.executable, "-m", "harness", "versions", "--json", "--store", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    rows = {r["version"]: r for r in json.loads(out.stdout)}
    assert not rows["4.3.1"]["new"] and not rows["3.9.2"]["new"]
    assert rows["4.0.0"]["new"]
