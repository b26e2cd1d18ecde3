"""Patched brokers: a fix that Kafka has not released, or a delay that opens a race's window,
given to a broker as a Java agent.

A finding in Kafka itself is only half proven by the versions where it strikes: the other
half is a broker that differs by the fix alone and does not fail under the same faults. A
race inside one broker is hard to aim at from outside: a delay at one call (the broker slow
to give up a coordinator) opens its window every time, and what then happens is the
release's own code, so the versions with and without the fix can be told apart. The
harness runs the released jars unchanged and adds, with ``--broker-patch NAME``, a Java
agent of the project's own (``harness/kafka/patches/<name>``) that rewrites one method of
one Kafka class as the broker loads it (with ASM, resolved from Maven Central). The agent
prints one line to the broker's stdout when it patched the class, and the run's config
records the patch, so a run's evidence says which broker it ran.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from common.cache import cache_root
from common.errors import HarnessError
from harness.kafka.install import Installation, _file_lock, _find_tool, _run_maven
from harness.kafka.javaclients import RELEASE, find_javac
from harness.kafka.versions import KafkaVersion

PATCHES_DIR = Path(__file__).parent / "patches"
ASM = "org.ow2.asm:asm:9.7.1"


@dataclass(frozen=True)
class BrokerPatch:
    name: str
    #: What the patch changes, one sentence (shown by ``--help`` and in the docs).
    description: str
    #: The agent's class (its ``premain``), in ``patches/<dir>``.
    agent_class: str
    directory: str
    #: The first Kafka release whose code the patch rewrites (older ones lack the class).
    since: str

    @property
    def source_dir(self) -> Path:
        return PATCHES_DIR / self.directory


PATCHES: dict[str, BrokerPatch] = {
    p.name: p
    for p in (
        BrokerPatch(
            name="kafka-20734",
            description="a known partition without a leader endpoint answers Node.noNode() "
            "from KRaftMetadataCache.getPartitionLeaderEndpoint, so a coordinator retries its "
            "markers instead of skipping the partition (finding F9)",
            agent_class="kafkaharness.patches.NoNodeForLeaderlessPartitions",
            directory="kafka_20734",
            since="4.3.0",
        ),
        BrokerPatch(
            name="resignation-delay",
            description="the first GroupCoordinatorService.onResignation of a metadata update "
            "sleeps 1 s before it runs: a broker slow to unload the coordinators whose "
            "partitions moved away, as a busy CPU or a GC pause makes it (opens KAFKA-20634's "
            "window every time; no fix)",
            agent_class="kafkaharness.patches.DelayedResignation",
            directory="resignation_delay",
            since="4.0.0",
        ),
    )
}


def check(name: str, version: KafkaVersion) -> BrokerPatch:
    """The patch ``name`` for brokers of ``version``, or a one-line error."""
    patch = PATCHES.get(name)
    if patch is None:
        raise HarnessError(f"unknown --broker-patch {name!r} (known: {', '.join(PATCHES)})")
    if version < KafkaVersion(patch.since):
        raise HarnessError(
            f"--broker-patch {name} rewrites code of Kafka {patch.since} on, not {version}"
        )
    return patch


def _digest(patch: BrokerPatch) -> str:
    h = hashlib.sha256(f"{ASM}\0{RELEASE}\0".encode())
    for path in sorted(patch.source_dir.rglob("*.java")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def agent_jar(install: Installation, patch: BrokerPatch) -> Path:
    """The patch's agent jar (ASM beside it), built on first use; idempotent and safe to
    call from several processes at once."""
    out = cache_root() / "broker-patches" / f"{patch.name}-{_digest(patch)}"
    jar = out / "agent.jar"
    if jar.exists():
        return jar
    out.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache_root() / "locks" / f"broker-patch-{patch.name}.lock"):
        if jar.exists():
            return jar
        work = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{patch.name}-"))
        try:
            _build(install, patch, work)
            shutil.rmtree(out, ignore_errors=True)
            work.rename(out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return jar


def _build(install: Installation, patch: BrokerPatch, work: Path) -> None:
    group, artifact, version = ASM.split(":")
    pom = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-harness</groupId><artifactId>broker-patch</artifactId><version>1</version>
  <dependencies><dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>
    <version>{version}</version></dependency></dependencies>
</project>
"""
    mvn = _find_tool("mvn", "install Apache Maven (e.g. apt-get install maven)")
    _run_maven(mvn, work, pom, work)
    asm_jar = work / f"{artifact}-{version}.jar"
    if not asm_jar.exists():
        raise HarnessError(f"Maven finished but {asm_jar.name} is missing")
    classes = work / "classes"
    sources = [str(p) for p in sorted(patch.source_dir.rglob("*.java"))]
    proc = subprocess.run(
        [find_javac(install.java), "--release", RELEASE, "-d", str(classes),
         "-cp", str(asm_jar), *sources],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).strip().splitlines()
        raise HarnessError(
            f"building broker patch {patch.name} failed: {first[0] if first else '?'}"
        )
    manifest = (
        f"Manifest-Version: 1.0\nPremain-Class: {patch.agent_class}\nClass-Path: {asm_jar.name}\n"
    )
    with zipfile.ZipFile(work / "agent.jar.part", "w") as zf:
        zf.writestr("META-INF/MANIFEST.MF", manifest)
        for path in sorted(classes.rglob("*.class")):
            zf.write(path, str(path.relative_to(classes)))
    (work / "agent.jar.part").rename(work / "agent.jar")
    (work / "pom.xml").unlink()
    shutil.rmtree(classes)


def jvm_options(install: Installation, name: str | None) -> list[str]:
    """The broker JVM's options for patch ``name`` (none without one)."""
    if name is None:
        return []
    return [f"-javaagent:{agent_jar(install, check(name, install.version))}"]
