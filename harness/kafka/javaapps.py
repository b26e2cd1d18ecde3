"""A workload's own Java application (``workloads.base.JavaApp``), built against one Kafka
version.

Kafka's release tarball carries jars the harness's installation does not resolve (only the
broker and tools jars are, ``harness.kafka.install``), such as ``kafka-streams`` and RocksDB.
An application names the Maven artifacts it needs beyond the installation's; they are
resolved at the installation's Kafka version from Maven Central on first use into
``<kafka home>/app-libs/<app name>``, and its sources are compiled against them and the
project's Java clients (whose history writer it shares) like those clients are: once per
source content, published whole (:func:`harness.kafka.javaclients.ensure_built`). Runs of
workloads without an application never pay for either.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Protocol

from common.cache import cache_root
from common.errors import HarnessError
from harness.kafka import javaclients
from harness.kafka.install import Installation, _file_lock, _find_tool, _run_maven


class JavaApp(Protocol):
    """What is built (``workloads.base.JavaApp`` has this shape; Kafka itself knows no
    workload)."""

    @property
    def name(self) -> str: ...
    @property
    def source_dir(self) -> Path: ...
    @property
    def main_class(self) -> str: ...
    @property
    def artifacts(self) -> tuple[str, ...]: ...


MARKER = "RESOLVED.json"


def _pom(app: JavaApp, version: str) -> str:
    deps = "".join(
        f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency>\n    "
        for group, artifact in (a.split(":", 1) for a in app.artifacts)
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-harness</groupId><artifactId>{app.name}-{version}</artifactId>
  <version>1</version>
  <dependencies>
    {deps}</dependencies>
</project>
"""


def app_libs(install: Installation, app: JavaApp) -> Path:
    """The directory of the jars ``app`` needs beyond ``install``'s, resolved if needed."""
    dest = install.libs_dir.parent / "app-libs" / app.name
    if (dest / MARKER).exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache_root() / "locks" / f"app-{app.name}-{install.version}.lock"):
        if (dest / MARKER).exists():
            return dest
        mvn = _find_tool("mvn", "install Apache Maven (e.g. apt-get install maven)")
        work = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{app.name}-"))
        try:
            _run_maven(mvn, work, _pom(app, str(install.version)), work / "jars")
            jars = sorted(p.name for p in (work / "jars").glob("*.jar"))
            for artifact in app.artifacts:
                want = f"{artifact.split(':', 1)[1]}-{install.version}.jar"
                if want not in jars:
                    raise HarnessError(f"Maven finished but {want} is missing")
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


def ensure_built(install: Installation, app: JavaApp) -> tuple[Path, Path, Path]:
    """The application's classes, the clients' classes and its extra jars' directory."""
    clients = javaclients.ensure_built(install)
    libs = app_libs(install, app)
    classes = javaclients.ensure_built(
        install,
        app.source_dir,
        name=f"{app.name}-app/{clients.parent.name}",
        extra_classpath=(str(clients), str(libs / "*")),
    )
    return classes, clients, libs


def java_command(
    install: Installation, app: JavaApp, jvm_opts: tuple[str, ...], log_option: str
) -> list[str]:
    """The command line that starts one instance of ``app`` (its arguments follow)."""
    classes, clients, libs = ensure_built(install, app)
    cp = os.pathsep.join([str(classes), str(clients), str(libs / "*"), install.classpath])
    return [install.java, *jvm_opts, log_option, "-cp", cp, app.main_class]
