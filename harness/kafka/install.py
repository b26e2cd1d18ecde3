"""Install Apache Kafka (from Maven Central, with Maven) and toxiproxy (from its Go module).

There is no Docker engine on our machines and no other download source, so the harness
assembles a Kafka installation itself: Maven resolves the broker and tools jars with their
runtime dependencies, plus the logging binding that the release tarball ships but the POMs
do not declare. Everything goes into a per-version cache directory, guarded by a file lock
so that several pytest-xdist workers can ask for the same version at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common.cache import cache_root
from common.errors import HarnessError
from harness.kafka import javaclients
from harness.kafka.versions import DEFAULT_KAFKA_VERSION, KafkaVersion, check_version

log = logging.getLogger("harness.kafka.install")

# Pinned in harness/substrate/toxiproxy_server/go.mod too.
TOXIPROXY_VERSION = "v2.5.0"

# Logging bindings the release tarballs ship but the POMs leave out.
_LOGGING_3X = [("ch.qos.reload4j", "reload4j", "1.2.25"), ("org.slf4j", "slf4j-reload4j", "1.7.36")]
_LOG4J2 = "2.24.3"
_LOGGING_4X_SLF4J1 = [
    ("org.apache.logging.log4j", "log4j-core", _LOG4J2),
    ("org.apache.logging.log4j", "log4j-slf4j-impl", _LOG4J2),
]
_LOGGING_4X_SLF4J2 = [
    ("org.apache.logging.log4j", "log4j-core", _LOG4J2),
    ("org.apache.logging.log4j", "log4j-slf4j2-impl", _LOG4J2),
]


@dataclass(frozen=True)
class Installation:
    """What a cluster needs to start: the jars of one Kafka version and a toxiproxy server."""

    version: KafkaVersion
    libs_dir: Path
    toxiproxy_bin: Path
    java: str

    @property
    def classpath(self) -> str:
        return str(self.libs_dir / "*")

    @property
    def log4j2(self) -> bool:
        """Kafka 4.x logs through log4j2; 3.x through reload4j (log4j 1 API)."""
        return self.version.major >= 4


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def find_java() -> str:
    """The java binary, which must be 17 or newer (Kafka 4 brokers need 17)."""
    java = shutil.which("java")
    if not java:
        raise HarnessError("Java not found on PATH: install a JDK 17 or newer (e.g. openjdk-17)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if m:
        major = int(m.group(1))
        if major == 1 and m.group(2):
            major = int(m.group(2))
        if major < 17:
            raise HarnessError(f"Java {major} found at {java}; Kafka needs Java 17 or newer")
    return java


def _find_tool(name: str, hint: str) -> str:
    found = shutil.which(name) or (
        f"/usr/local/go/bin/{name}"
        if name == "go" and Path("/usr/local/go/bin/go").exists()
        else None
    )
    if not found:
        raise HarnessError(f"{name} not found on PATH: {hint}")
    return found


def go_build(
    args: list[str],
    what: str,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> None:
    """``go ARGS`` with cgo off (``env`` over this process's environment): the one way the
    harness builds from Go sources (toxiproxy's server, the Docker reaper, actionlint). A
    missing Go, a failure or a timeout is a one-line :class:`HarnessError` naming ``what``."""
    go = _find_tool("go", f"install Go 1.21+ to build {what}")
    try:
        proc = subprocess.run(
            [go, *args],
            cwd=cwd,
            env={**os.environ, "CGO_ENABLED": "0", **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise HarnessError(f"building {what} with go took over {timeout:.0f} s") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
        hint = " (no network?)" if re.search(r"dial|lookup|timeout|proxy", last, re.I) else ""
        raise HarnessError(f"building {what} with go failed{hint}: {last[:300]}")


def _pom(version: str, extra: list[tuple[str, str, str]]) -> str:
    deps = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-tools", version),
    ]
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in deps + extra
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-harness</groupId><artifactId>kafka-{version}</artifactId><version>1</version>
  <dependencies>
{body}
  </dependencies>
</project>
"""


def _run_maven(mvn: str, workdir: Path, pom: str, out_dir: Path) -> None:
    (workdir / "pom.xml").write_text(pom)
    proc = subprocess.run(
        [
            mvn,
            "-B",
            "-q",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={out_dir}",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        text = proc.stdout + proc.stderr
        errors = [ln for ln in text.splitlines() if "[ERROR]" in ln and ln.strip() != "[ERROR]"]
        first = errors[0].replace("[ERROR]", "").strip() if errors else text.strip()[-300:]
        if re.search(r"transfer|Unknown host|connect|resolve", first, re.I):
            raise HarnessError(f"Maven could not download Kafka jars (no network?): {first[:300]}")
        raise HarnessError(f"Maven failed to resolve Kafka jars: {first[:300]}")


def _install_kafka(version: KafkaVersion, dest: Path) -> None:
    mvn = _find_tool("mvn", "install Apache Maven (e.g. apt-get install maven)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{version.text}-"))
    try:
        libs = work / "libs"
        if version.major >= 4:
            _run_maven(mvn, work, _pom(version.text, _LOGGING_4X_SLF4J1), libs)
            if any(p.name.startswith("slf4j-api-2.") for p in libs.iterdir()):
                # Newer lines moved to SLF4J 2, whose binding is a different artifact.
                for p in libs.glob("log4j-slf4j-impl-*.jar"):
                    p.unlink()
                _run_maven(mvn, work, _pom(version.text, _LOGGING_4X_SLF4J2), libs)
        else:
            _run_maven(mvn, work, _pom(version.text, _LOGGING_3X), libs)
        jars = sorted(p.name for p in libs.glob("*.jar"))
        if f"kafka_2.13-{version.text}.jar" not in jars:
            raise HarnessError(f"Maven finished but kafka_2.13-{version.text}.jar is missing")
        (work / "INSTALLED.json").write_text(
            json.dumps({"version": version.text, "jars": jars, "installed_at": time.time()})
        )
        if dest.exists():
            shutil.rmtree(dest)
        # One rename makes the installation appear complete or not at all.
        os.rename(work, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


TOXIPROXY_SOURCE = Path(__file__).resolve().parent.parent / "substrate" / "toxiproxy_server"


def _toxiproxy_tag() -> str:
    """The build's cache key: toxiproxy's version and the content of our server's sources."""
    digest = hashlib.sha256()
    for path in [*sorted(TOXIPROXY_SOURCE.glob("*.go")), TOXIPROXY_SOURCE / "go.mod"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{TOXIPROXY_VERSION}-{digest.hexdigest()[:12]}"


def _install_toxiproxy(dest_dir: Path) -> Path:
    """Build toxiproxy's server with the harness's ``kafka_hold`` toxic registered."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    partial = dest_dir / "toxiproxy-server.partial"
    go_build(
        ["build", "-o", str(partial), "."],
        f"toxiproxy {TOXIPROXY_VERSION}",
        cwd=TOXIPROXY_SOURCE,
        env={"GOFLAGS": os.environ.get("GOFLAGS", "-mod=mod")},
    )
    final = dest_dir / "toxiproxy-server"
    partial.rename(final)
    return final


def kafka_home(version: str) -> Path:
    return cache_root() / "kafka" / version


def toxiproxy_path() -> Path:
    return cache_root() / "toxiproxy" / _toxiproxy_tag() / "toxiproxy-server"


def is_installed(version: str) -> bool:
    return (kafka_home(version) / "INSTALLED.json").exists() and toxiproxy_path().exists()


def ensure_installed(version: str | None = None) -> Installation:
    """Install ``version`` (default: the pinned newest 4.x) if needed; a no-op when present.

    The project's Java clients are compiled against the version's jars here too (once per
    source content, see :mod:`harness.kafka.javaclients`). A failed compile is a warning, not
    an error: only runs with ``--client java`` need them, and those fail with the same line.
    """
    version = version or DEFAULT_KAFKA_VERSION
    java = find_java()
    home = kafka_home(version)
    root = cache_root()
    if not (home / "INSTALLED.json").exists():
        with _file_lock(root / "locks" / f"kafka-{version}.lock"):
            if not (home / "INSTALLED.json").exists():
                parsed = check_version(version)
                _install_kafka(parsed, home)
    tp = toxiproxy_path()
    if not tp.exists():
        with _file_lock(root / "locks" / "toxiproxy.lock"):
            if not tp.exists():
                _install_toxiproxy(tp.parent)
    installation = Installation(KafkaVersion(version), home / "libs", tp, java)
    try:
        javaclients.ensure_built(installation)
    except HarnessError as exc:
        log.warning("%s (runs with --client java will fail)", exc)
    return installation
