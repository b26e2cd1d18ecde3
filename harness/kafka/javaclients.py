"""The project's own Java clients, compiled against one Kafka version's client jars.

``workloads/java/src`` holds the Java twins of the eos processor and the queue client (they
write the same history as the Python ones). They are built with the JDK's ``javac`` against
the installation's jars, once per Kafka version and source content, into
``<kafka home>/java-clients/<digest>/``: the digest covers every source file, so an edited
source is rebuilt and an unchanged one never is. A build happens in a temporary sibling
directory that one ``rename`` makes visible complete, so concurrent builders (pytest-xdist
workers, a campaign beside a test run) never see half a build; the loser of a race discards
its own copy. A compile failure is one line: the first error javac printed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Protocol

from common.errors import HarnessError
from common.staging import staged_dir


class Installation(Protocol):
    """What a build needs of ``harness.kafka.install.Installation`` (which imports this module,
    so it is named structurally here)."""

    @property
    def libs_dir(self) -> Path: ...

    @property
    def java(self) -> str: ...

    @property
    def version(self) -> object: ...

    @property
    def classpath(self) -> str: ...


#: Where the sources live (a file path, not an import: the harness does not import workloads).
SOURCE_DIR = Path(__file__).resolve().parents[2] / "workloads/java/src"
#: The Java language level of the sources (Kafka 4.x brokers need Java 17 anyway).
RELEASE = "17"
MARKER = "BUILT.json"


def sources(source_dir: Path = SOURCE_DIR) -> list[Path]:
    found = sorted(source_dir.rglob("*.java"))
    if not found:
        raise HarnessError(f"no Java client sources under {source_dir}")
    return found


def digest(paths: list[Path], source_dir: Path = SOURCE_DIR) -> str:
    """A short hash of every source file's name and content."""
    h = hashlib.sha256()
    for p in paths:
        h.update(str(p.relative_to(source_dir)).encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(RELEASE.encode())
    return h.hexdigest()[:16]


def find_javac(java: str) -> str:
    """The ``javac`` of the JDK that ``java`` belongs to, else the one on PATH."""
    beside = Path(os.path.realpath(java)).parent / "javac"
    if beside.exists():
        return str(beside)
    found = shutil.which("javac")
    if not found:
        raise HarnessError(
            "javac not found: the project's Java clients need a JDK 17+ (not only a JRE), "
            "e.g. apt-get install openjdk-17-jdk-headless"
        )
    return found


def build_dir(
    install: Installation, source_dir: Path = SOURCE_DIR, name: str = "java-clients"
) -> Path:
    """Where the build of the current sources for ``install`` lives (built or not)."""
    return install.libs_dir.parent / name / digest(sources(source_dir), source_dir)


class BuildError(HarnessError):
    """The Java clients do not compile against a Kafka version; ``first_error`` is javac's."""

    def __init__(self, version: object, first_error: str) -> None:
        super().__init__(
            f"compiling the Java clients against Kafka {version} failed: {first_error}"
        )
        self.first_error = first_error


def _first_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in lines:
        if "error:" in ln:
            return ln
    return lines[0] if lines else "javac failed without output"


def ensure_built(
    install: Installation,
    source_dir: Path = SOURCE_DIR,
    name: str = "java-clients",
    extra_classpath: tuple[str, ...] = (),
) -> Path:
    """The classes directory of the Java clients for ``install``, compiling them if needed.

    Idempotent and safe to call from several processes at once; raises a one-line
    :class:`HarnessError` when the sources do not compile against this Kafka version.
    ``name`` and ``extra_classpath``: another source tree built the same way beside them
    (the Streams application, against the clients' classes and Kafka Streams' jars).
    """
    paths = sources(source_dir)
    out = build_dir(install, source_dir, name)
    if (out / MARKER).exists():
        return out / "classes"
    javac = find_javac(install.java)
    with staged_dir(out) as work:
        t0 = time.monotonic()
        proc = subprocess.run(
            [
                javac,
                "--release",
                RELEASE,
                "-encoding",
                "UTF-8",
                "-Xlint:-options",
                "-d",
                str(work / "classes"),
                "-cp",
                os.pathsep.join([*extra_classpath, install.classpath]),
                *map(str, paths),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise BuildError(install.version, _first_error(proc.stderr + proc.stdout))
        (work / MARKER).write_text(
            json.dumps(
                {
                    "kafka_version": str(install.version),
                    "digest": out.name,
                    "javac": javac,
                    "sources": [str(p.relative_to(source_dir)) for p in paths],
                    "seconds": round(time.monotonic() - t0, 2),
                    "built_at": time.time(),
                }
            )
        )
    if not (out / MARKER).exists():
        raise HarnessError(f"the Java clients' build directory {out} is incomplete")
    return out / "classes"


def java_command(
    install: Installation, main_class: str, jvm_opts: tuple[str, ...], log_option: str
) -> list[str]:
    """The command line that starts one of the Java clients (its arguments follow)."""
    classes = ensure_built(install)
    return [
        install.java,
        *jvm_opts,
        log_option,
        "-cp",
        f"{classes}{os.pathsep}{install.classpath}",
        main_class,
    ]
