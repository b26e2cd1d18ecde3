"""The broker patch ``kafka-20734`` (``harness.kafka.brokerpatch``) on Kafka's own classes.

A probe (``tests/java/LeaderEndpointProbe.java``) builds a metadata image with a partition
whose leader is -1 and asks a real ``KRaftMetadataCache`` for its leader's endpoint: Kafka
answers empty (what the transaction marker channel takes for a deleted partition, F9); with
the patch's agent it answers ``Node.noNode()`` (retry), and a partition the image does not
hold still answers empty.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from common.errors import HarnessError
from harness.kafka import brokerpatch
from harness.kafka.install import ensure_installed
from harness.kafka.javaclients import find_javac
from harness.kafka.versions import KafkaVersion

PROBE = Path(__file__).parent / "java" / "LeaderEndpointProbe.java"


def _probe(version: str, tmp_path: Path, patched: bool) -> list[str]:
    install = ensure_installed(version)
    out = tmp_path / version
    subprocess.run(
        [find_javac(install.java), "-d", str(out), "-cp", install.classpath, str(PROBE)],
        check=True,
        capture_output=True,
    )
    agent = brokerpatch.jvm_options(install, "kafka-20734") if patched else []
    cp = f"{out}:{install.classpath}"
    proc = subprocess.run(
        [install.java, *agent, "-cp", cp, "LeaderEndpointProbe"],
        check=True,
        capture_output=True,
        text=True,
    )
    return proc.stdout.splitlines()


@pytest.mark.parametrize("version", ["4.3.1", "4.4.0"])
def test_the_patch_answers_no_node_for_a_known_leaderless_partition(
    version: str, tmp_path: Path
) -> None:
    assert _probe(version, tmp_path, patched=False) == [
        "leaderless Optional.empty",
        "unknown Optional.empty",
    ]
    leaderless, unknown = _probe(version, tmp_path, patched=True)
    assert leaderless.startswith("leaderless Optional[:-1 (id: -1")  # Node.noNode()
    assert unknown == "unknown Optional.empty"


def test_a_patch_is_refused_by_name_and_by_version_with_one_line() -> None:
    with pytest.raises(
        HarnessError,
        match=r"unknown --broker-patch 'nope' \(known: kafka-20734, resignation-delay\)",
    ):
        brokerpatch.check("nope", KafkaVersion("4.4.0"))
    with pytest.raises(HarnessError, match=r"rewrites code of Kafka 4\.3\.0 on, not 4\.2\.2"):
        brokerpatch.check("kafka-20734", KafkaVersion("4.2.2"))
    assert brokerpatch.jvm_options(ensure_installed("4.4.0"), None) == []
