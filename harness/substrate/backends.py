"""Which substrate runs the cluster: processes on this machine, or Docker containers.

The process backend (``harness.substrate.process``) is the reference: it is what the
project's own tests run. The Docker backend (``harness.substrate.docker``) is for machines
with a Docker engine where the process backend cannot run (no Java, macOS). ``auto`` prefers
the process backend whenever it can run, so a result never silently changes substrate on a
machine where both work.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
from typing import TYPE_CHECKING

from common.errors import HarnessError

if TYPE_CHECKING:
    from harness.substrate.api import Cluster, ClusterConfig
    from harness.substrate.docker.cluster import DockerCluster

BACKENDS = ("auto", "process", "docker")

# The address the loopback fallback gives node 1 of slot 0 (process.network.LoopbackNetwork):
# Linux routes all of 127/8 to lo, other systems (macOS) only 127.0.0.1.
_LOOPBACK_PROBE = "127.100.0.11"


def docker_engine_available(timeout: float = 2.0) -> bool:
    """True when a Docker engine answers a ping within ``timeout``; False on any error."""
    try:
        import docker

        client = docker.from_env(timeout=max(1, int(timeout)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _loopback_aliases_usable() -> bool:
    try:
        with socket.socket() as s:
            s.bind((_LOOPBACK_PROBE, 0))
    except OSError:
        return False
    return True


def process_backend_problem(kafka_version: str | None = None) -> str | None:
    """Why the process backend cannot run here, in one line; None when it can.

    Cheap checks only: Java 17+ on PATH (the install module's own check), a network (root
    for namespaces, else loopback aliases), and either the Kafka version already installed
    or Maven and Go present to install it.
    """
    from harness.kafka.install import find_java, is_installed
    from harness.kafka.versions import DEFAULT_KAFKA_VERSION
    from harness.substrate.process.network import namespaces_available

    try:
        find_java()
    except HarnessError as exc:
        return str(exc)
    if not namespaces_available() and not _loopback_aliases_usable():
        return "neither network namespaces (root, ip, iptables) nor loopback aliases (127.x)"
    version = kafka_version or DEFAULT_KAFKA_VERSION
    if not is_installed(version):
        # Same places harness.kafka.install looks (it also finds Go under /usr/local/go).
        missing = [t for t in ("mvn", "go") if shutil.which(t) is None]
        if "go" in missing and os.path.exists("/usr/local/go/bin/go"):
            missing.remove("go")
        if missing:
            return f"Kafka {version} is not installed and {' and '.join(missing)} is missing"
    return None


def choose_backend(requested: str, *, docker_available: bool, process_problem: str | None) -> str:
    """Pure decision: ``process`` or ``docker``, or a one-line HarnessError.

    An explicit ``process`` is honoured as is: the process backend reports its own precise
    error (Java missing, version unknown) when it starts.
    """
    if requested not in BACKENDS:
        raise HarnessError(f"unknown backend {requested!r}; choose one of {', '.join(BACKENDS)}")
    if requested == "process":
        return "process"
    if requested == "docker":
        if not docker_available:
            raise HarnessError(
                "--backend docker needs a Docker engine, and none answered "
                "(is dockerd running and DOCKER_HOST right?)"
            )
        return "docker"
    if process_problem is None:
        return "process"
    if docker_available:
        return "docker"
    raise HarnessError(
        f"no backend can run here: the process backend cannot ({process_problem}) "
        "and no Docker engine answered"
    )


def resolve_backend(requested: str, kafka_version: str | None = None) -> str:
    """``choose_backend`` with the real probes, running only those that can change the answer."""
    if requested == "process":
        return choose_backend(requested, docker_available=False, process_problem=None)
    problem = process_backend_problem(kafka_version) if requested == "auto" else None
    needs_docker = requested == "docker" or problem is not None
    return choose_backend(
        requested,
        docker_available=docker_engine_available() if needs_docker else False,
        process_problem=problem,
    )


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="where brokers run: processes here, Docker containers, or auto (process if it "
        "can run here, else docker)",
    )


def open_cluster(config: ClusterConfig, backend: str) -> Cluster | DockerCluster:
    """The (not yet started) cluster object for ``backend``; use it as a context manager."""
    chosen = resolve_backend(backend, config.kafka_version)
    if chosen == "docker":
        from harness.substrate.docker.cluster import DockerCluster

        return DockerCluster(config)
    from harness.substrate.process.cluster import Cluster

    return Cluster(config)
