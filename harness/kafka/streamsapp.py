"""The streams workload's Kafka Streams application, built against one Kafka version.

Kafka's release tarball carries the ``kafka-streams`` jar beside the broker's, but the
harness's installation resolves only the broker and tools jars (``harness.kafka.install``),
so Kafka Streams of the same version (with RocksDB) is resolved from Maven Central on first
use into ``<kafka home>/streams-libs``, and ``workloads/java/streams`` is compiled against it
and the project's Java clients (whose history writer it shares) like those clients are:
once per source content, published whole (:func:`harness.kafka.javaclients.ensure_built`).
Runs of the other workloads never pay for either.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from common.cache import cache_root
from common.errors import HarnessError
from harness.kafka import javaclients
from harness.kafka.install import Installation, _file_lock, _find_tool, _run_maven

#: The application's sources (package ``kafkaharness``, beside the clients').
SOURCE_DIR = javaclients.SOURCE_DIR.parent / "streams"
MAIN_CLASS = "kafkaharness.StreamsApp"
MARKER = "RESOLVED.json"


def _pom(version: str) -> str:
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-harness</groupId><artifactId>kafka-streams-{version}</artifactId>
  <version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-streams</artifactId>
      <version>{version}</version></dependency>
  </dependencies>
</project>
"""


def streams_libs(install: Installation) -> Path:
    """The directory of Kafka Streams' jars for ``install``'s version, resolved if needed."""
    dest = install.libs_dir.parent / "streams-libs"
    if (dest / MARKER).exists():
        return dest
    with _file_lock(cache_root() / "locks" / f"streams-{install.version}.lock"):
        if (dest / MARKER).exists():
            return dest
        mvn = _find_tool("mvn", "install Apache Maven (e.g. apt-get install maven)")
        work = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".streams-"))
        try:
            _run_maven(mvn, work, _pom(str(install.version)), work / "jars")
            jars = sorted(p.name for p in (work / "jars").glob("*.jar"))
            if f"kafka-streams-{install.version}.jar" not in jars:
                raise HarnessError(f"Maven finished but kafka-streams-{install.version} is missing")
            # Only what the installation lacks: its own kafka-clients, compression and
            # logging jars stay the one copy on the classpath.
            have = {p.name for p in install.libs_dir.glob("*.jar")}
            for name in have & set(jars):
                (work / "jars" / name).unlink()
            (work / "jars" / MARKER).write_text(
                json.dumps({"version": str(install.version), "jars": jars, "at": time.time()})
            )
            os.rename(work / "jars", dest)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return dest


def ensure_built(install: Installation) -> tuple[Path, Path, Path]:
    """The application's classes, the clients' classes and Kafka Streams' jars directory."""
    clients = javaclients.ensure_built(install)
    libs = streams_libs(install)
    classes = javaclients.ensure_built(
        install,
        SOURCE_DIR,
        name=f"streams-app/{clients.parent.name}",
        extra_classpath=(str(clients), str(libs / "*")),
    )
    return classes, clients, libs


def java_command(install: Installation, jvm_opts: tuple[str, ...], log_option: str) -> list[str]:
    """The command line that starts one instance of the application (``--config`` follows)."""
    classes, clients, libs = ensure_built(install)
    cp = os.pathsep.join([str(classes), str(clients), str(libs / "*"), install.classpath])
    return [install.java, *jvm_opts, log_option, "-cp", cp, MAIN_CLASS]
