"""The Docker backend's images, built here from Debian packages: no image registry needed.

Machines of this project's kind reach Debian's mirror, PyPI, Maven Central and the Go module
proxy, but no image registry, so ``FROM apache/kafka`` cannot work. Instead:

- ``kafka-harness/rootfs:<key>``: a minimal Debian root file system made by ``debootstrap``
  (from the machine's own Debian mirror) and turned into an image by ``docker import``;
- ``kafka-harness/runtime:<key>``: that plus Debian's Java 17 runtime, iptables (partitions),
  netcat (reachability probes) and the broker entrypoint (``docker/broker``), built with a
  ``Dockerfile`` whose ``RUN apt-get`` reaches the same mirror from inside the build.

- ``kafka-harness/reaper:<key>``: the root fs plus the harness's Ryuk-compatible reaper
  (``docker/reaper``, standard-library Go built on the host), the image testcontainers is
  told to start as its Ryuk.

Kafka itself is not in any image: the broker containers mount the jars that
``harness.kafka.install`` resolved with Maven (the process backend's own installation)
read-only at ``/opt/kafka/libs``, so every version the harness can install runs in
containers too, with one image for all. toxiproxy is the process backend's Go build,
mounted the same way into a container of the runtime image.

Tags carry a content hash of everything that goes into the image (suite, packages, the
build context's files), so a changed input builds a new image and an unchanged one is a
look-up. Builds hold a file lock under the harness cache, so concurrent runs (pytest-xdist
workers) build once; a failed build is one line naming the step.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from harness.substrate.docker import plan as dp

log = logging.getLogger("harness.substrate.docker.images")

#: Debian's release with a Java 17 runtime (Kafka 4 brokers need 17+).
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
ROOTFS_REPO = "kafka-harness/rootfs"
RUNTIME_REPO = "kafka-harness/runtime"
REAPER_REPO = "kafka-harness/reaper"
REAPER_SOURCE = dp.docker_dir() / "reaper"
LABEL_IMAGE = "kafka-harness.image"

#: Generous bounds: the first debootstrap downloads ~40 MB, the runtime layer ~100 MB.
DEBOOTSTRAP_TIMEOUT = 900.0
BUILD_TIMEOUT = 1200.0


def _cache_dir() -> Path:
    from harness.kafka.install import cache_root

    return cache_root() / "docker"


@contextmanager
def _build_lock(name: str) -> Iterator[None]:
    """One builder per image on this machine; the others wait, then find the image."""
    path = _cache_dir() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def debian_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The machine's own Debian mirror (``KAFKA_HARNESS_DEBIAN_MIRROR`` overrides): the first
    ``deb`` URI of the apt sources that serves the main archive, else deb.debian.org."""
    env = os.environ.get("KAFKA_HARNESS_DEBIAN_MIRROR")
    if env:
        return env.rstrip("/")
    files = [sources_dir / "sources.list", *sorted((sources_dir / "sources.list.d").glob("*"))]
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        uris = re.findall(r"^URIs:\s*(\S+)", text, re.M)
        uris += re.findall(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)", text, re.M)
        for uri in uris:
            if "security" not in uri and uri.startswith("http"):
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "big") + p)
    return h.hexdigest()[:12]


def rootfs_tag(mirror: str) -> str:
    return f"{ROOTFS_REPO}:{SUITE}-{_digest(SUITE.encode(), mirror.encode())}"


def runtime_context() -> Path:
    return dp.docker_dir() / "broker"


def runtime_tag(rootfs: str, context: Path | None = None) -> str:
    """Keyed by the root fs image and every file of the build context."""
    context = context or runtime_context()
    parts = [rootfs.encode()]
    for f in sorted(p for p in context.rglob("*") if p.is_file()):
        parts += [str(f.relative_to(context)).encode(), f.read_bytes()]
    return f"{RUNTIME_REPO}:{_digest(*parts)}"


def _has_image(client: Any, tag: str) -> bool:
    from harness.substrate.docker.engine import is_not_found

    try:
        client.images.get(tag)
    except Exception as exc:
        if is_not_found(exc):
            return False
        raise
    return True


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


def find_debootstrap() -> str | None:
    """debootstrap on PATH, or where Debian puts it (/usr/sbin, off a non-root PATH)."""
    found = shutil.which("debootstrap")
    if found:
        return found
    return "/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None


def _build_rootfs(tag: str, mirror: str) -> None:
    """debootstrap a minimal Debian into a temporary directory and ``docker import`` it."""
    debootstrap = find_debootstrap()
    if debootstrap is None:
        raise HarnessError(
            f"building {tag} needs debootstrap (apt-get install debootstrap, or ./bootstrap.sh)"
        )
    if os.geteuid() != 0:
        raise HarnessError(f"building {tag} with debootstrap needs root")
    docker = shutil.which("docker")
    if docker is None:
        raise HarnessError(f"building {tag} needs the docker command-line client")
    work = Path(tempfile.mkdtemp(prefix="kh-rootfs-", dir=_cache_dir()))
    try:
        root = work / "root"
        proc = subprocess.run(
            [debootstrap, "--variant=minbase", SUITE, str(root), mirror],
            capture_output=True,
            text=True,
            timeout=DEBOOTSTRAP_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0:
            raise HarnessError(
                f"debootstrap {SUITE} from {mirror} failed: {_last_line(proc.stdout + proc.stderr)}"
            )
        # apt inside the image uses the same mirror as the build did.
        (root / "etc/apt/sources.list").write_text(f"deb {mirror} {SUITE} main\n")
        tar = subprocess.Popen(
            ["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        proc = subprocess.run(
            [docker, "import", "--change", f"LABEL {LABEL_IMAGE}=rootfs", "-", tag],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            timeout=DEBOOTSTRAP_TIMEOUT,
            check=False,
        )
        tar.wait(timeout=60)
        if proc.returncode != 0:
            raise HarnessError(f"docker import of {tag} failed: {_last_line(proc.stderr)}")
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"building {tag} timed out after {exc.timeout:.0f} s") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build_runtime(client: Any, tag: str, rootfs: str) -> None:
    try:
        client.images.build(
            path=str(runtime_context()),
            tag=tag,
            buildargs={"ROOTFS": rootfs},
            rm=True,
            forcerm=True,
            timeout=int(BUILD_TIMEOUT),
        )
    except Exception as exc:
        detail = getattr(exc, "msg", None) or str(exc)
        raise HarnessError(f"building {tag} failed: {_last_line(str(detail))}") from None


def _ensure_rootfs(client: Any) -> str:
    """The root fs image's tag, debootstrapped if missing (under its own lock)."""
    mirror = debian_mirror()
    rootfs = rootfs_tag(mirror)
    if _has_image(client, rootfs):
        return rootfs
    with _build_lock("rootfs"):
        if not _has_image(client, rootfs):
            log.info("building %s (debootstrap %s from %s)", rootfs, SUITE, mirror)
            _build_rootfs(rootfs, mirror)
    return rootfs


def ensure_runtime_image(client: Any) -> str:
    """The runtime image's tag, built (root fs first) if this engine lacks it."""
    t0 = time.monotonic()
    tag = runtime_tag(rootfs_tag(debian_mirror()))
    if _has_image(client, tag):
        return tag
    with _build_lock("runtime"):
        if _has_image(client, tag):  # another process built it while we waited
            return tag
        rootfs = _ensure_rootfs(client)
        log.info("building %s", tag)
        _build_runtime(client, tag, rootfs)
    log.info("runtime image built in %.1fs", time.monotonic() - t0)
    return tag


def reaper_tag(rootfs: str) -> str:
    parts = [rootfs.encode()]
    for f in sorted(REAPER_SOURCE.glob("*")):
        parts += [f.name.encode(), f.read_bytes()]
    return f"{REAPER_REPO}:{_digest(*parts)}"


def ensure_reaper_image(client: Any) -> str:
    """The reaper image's tag: the Ryuk-compatible reaper built with the host's Go (standard
    library only: nothing to download) and copied onto the root fs."""
    from harness.kafka.install import go_build

    tag = reaper_tag(rootfs_tag(debian_mirror()))
    if _has_image(client, tag):
        return tag
    with _build_lock("reaper"):
        if _has_image(client, tag):
            return tag
        rootfs = _ensure_rootfs(client)
        work = Path(tempfile.mkdtemp(prefix="kh-reaper-", dir=_cache_dir()))
        try:
            go_build(
                ["build", "-o", str(work / "reaper"), "."],
                "the Docker backend's reaper",
                cwd=REAPER_SOURCE,
                env={"GOFLAGS": "-mod=mod"},
                timeout=BUILD_TIMEOUT,
            )
            (work / "Dockerfile").write_text(
                "ARG ROOTFS\nFROM ${ROOTFS}\nCOPY reaper /usr/local/bin/reaper\n"
                f"LABEL {LABEL_IMAGE}=reaper\nEXPOSE 8080\n"
                'ENTRYPOINT ["/usr/local/bin/reaper"]\n'
            )
            try:
                client.images.build(
                    path=str(work), tag=tag, buildargs={"ROOTFS": rootfs}, rm=True, forcerm=True
                )
            except Exception as exc:
                detail = getattr(exc, "msg", None) or str(exc)
                raise HarnessError(f"building {tag} failed: {_last_line(str(detail))}") from None
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return tag


def ensure_derived_image(client: Any, context: Path, repo: str) -> str:
    """An image built ``FROM`` the runtime image (build argument ``RUNTIME``) out of the
    ``docker/`` directory ``context``: the labs' machines. Keyed like the runtime image."""
    runtime = ensure_runtime_image(client)
    parts = [runtime.encode()]
    for f in sorted(p for p in context.rglob("*") if p.is_file()):
        parts += [str(f.relative_to(context)).encode(), f.read_bytes()]
    tag = f"{repo}:{_digest(*parts)}"
    if _has_image(client, tag):
        return tag
    with _build_lock(repo.rsplit("/", 1)[-1]):
        if not _has_image(client, tag):
            log.info("building %s", tag)
            try:
                client.images.build(
                    path=str(context),
                    tag=tag,
                    buildargs={"RUNTIME": runtime},
                    rm=True,
                    forcerm=True,
                    timeout=int(BUILD_TIMEOUT),
                )
            except Exception as exc:
                detail = getattr(exc, "msg", None) or str(exc)
                raise HarnessError(f"building {tag} failed: {_last_line(str(detail))}") from None
    return tag
