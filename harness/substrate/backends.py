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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from common.errors import HarnessError

if TYPE_CHECKING:
    from harness.substrate.api import Cluster, ClusterConfig

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


def _process_cluster(config: ClusterConfig) -> Cluster:
    from harness.substrate.process.cluster import Cluster

    return Cluster(config)


def _docker_cluster(config: ClusterConfig) -> Cluster:
    from harness.substrate.docker.cluster import DockerCluster

    return DockerCluster(config)


def _ssh_cluster(config: ClusterConfig) -> Cluster:
    from harness.substrate.ssh.cluster import SshCluster

    return SshCluster(config)


DOCKER_PROBLEM = (
    "needs a Docker engine, and none answered (is dockerd running and DOCKER_HOST right?)"
)


@dataclass(frozen=True)
class Backend:
    """One place brokers can live: how to build its cluster, and why it cannot run here."""

    name: str
    cluster: Callable[[ClusterConfig], Cluster]
    #: Why it cannot run here (one line), None when it can; given the Kafka version.
    problem: Callable[[str | None], str | None]
    #: Whether an explicit ``--backend NAME`` is refused up front when ``problem`` says so
    #: (the process backend instead reports its own precise error when it starts).
    checked: bool
    help: str
    #: Whether ``auto`` may choose it (not the SSH backend: it needs machines named to it).
    auto: bool = True


#: The backends, in the order ``auto`` prefers them.
REGISTRY: Mapping[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "process",
            _process_cluster,
            lambda version: process_backend_problem(version),
            checked=False,
            help="JVMs on this machine, each in a network namespace (loopback aliases without "
            "root)",
        ),
        Backend(
            "docker",
            _docker_cluster,
            lambda version: None if docker_engine_available() else DOCKER_PROBLEM,
            checked=True,
            help="containers on the local Docker engine",
        ),
        Backend(
            "ssh",
            _ssh_cluster,
            lambda version: None,
            checked=False,
            help="one broker on each machine of --hosts FILE, driven over SSH",
            auto=False,
        ),
    )
}
BACKENDS = ("auto", *REGISTRY)


def choose_backend(requested: str, problems: Mapping[str, str | None]) -> str:
    """Pure decision: a backend's name, or a one-line HarnessError.

    ``problems``: each probed backend's :attr:`Backend.problem` (a backend left out was not
    probed: it is taken to have none).
    """
    if requested not in BACKENDS:
        raise HarnessError(f"unknown backend {requested!r}; choose one of {', '.join(BACKENDS)}")
    if requested != "auto":
        problem = problems.get(requested)
        if REGISTRY[requested].checked and problem is not None:
            raise HarnessError(f"--backend {requested} {problem}")
        return requested
    automatic = [name for name, b in REGISTRY.items() if b.auto]
    for name in automatic:
        if problems.get(name) is None:
            return name
    why = "; ".join(f"{name}: {problems[name]}" for name in automatic)
    raise HarnessError(f"no backend can run here ({why})")


def resolve_backend(requested: str, kafka_version: str | None = None) -> str:
    """``choose_backend`` with the real probes, running only those that can change the answer:
    an explicit backend's own (when it is checked), or ``auto``'s in order until one can run."""
    problems: dict[str, str | None] = {}
    if requested == "auto":
        for name, backend in REGISTRY.items():
            if not backend.auto:
                continue
            problems[name] = backend.problem(kafka_version)
            if problems[name] is None:
                break
    elif requested in REGISTRY and REGISTRY[requested].checked:
        problems[requested] = REGISTRY[requested].problem(kafka_version)
    return choose_backend(requested, problems)


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    """``--backend``, and the SSH backend's ``--hosts`` and ``--accept-new-host-keys``."""
    from harness.substrate.ssh.hosts import add_host_key_argument

    described = "; ".join(f"{b.name}: {b.help}" for b in REGISTRY.values())
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help=f"where brokers run ({described}; auto: the first of these that can run here)",
    )
    parser.add_argument(
        "--hosts",
        default=None,
        metavar="FILE",
        help="the machines of --backend ssh: a TOML file, one [[node]] with host, port, user, "
        "key and host_key each (python -m harness ssh-lab up writes one)",
    )
    add_host_key_argument(parser.add_argument)


def open_cluster(config: ClusterConfig, backend: str) -> Cluster:
    """The (not yet started) cluster object for ``backend``; use it as a context manager."""
    chosen = resolve_backend(backend, config.kafka_version)
    if config.broker_patch is not None and chosen != "process":
        raise HarnessError(f"--broker-patch runs on the process backend only, not {chosen}")
    return REGISTRY[chosen].cluster(config)
