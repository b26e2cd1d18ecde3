"""What the install step builds, in two parts, so that no command and no test pays for a build
unseen.

* :func:`main_job`: what ``python -m harness run`` needs with its defaults: the default Kafka
  version's jars, toxiproxy's server and the project's Java clients. ``./bootstrap.sh`` builds
  only this before the main job, so a new user's first verdict does not wait for the rest.
* :func:`the_rest`: everything other commands and the test suite build on first use: the Go
  and Node clients, the Streams application, the other Kafka versions the tests run, the
  nightly workflow's linter, and the Docker images (the backend's runtime and reaper, the
  Spark lab, the SSH lab) when an engine answers. ``./bootstrap.sh`` builds it after the main
  job's verdict (``--setup-only``: at once), ``python -m harness install --all`` on demand,
  and the test suite before its first cluster test. Each step is one progress line; each is
  idempotent, so a second call costs seconds.

A step that cannot be built here (no Go toolchain, no Docker engine) is a warning line: only the
commands that need it fail, with the same line, when used.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from common.errors import HarnessError
from harness.kafka.install import Installation, ensure_installed
from harness.kafka.versions import DEFAULT_KAFKA_VERSION

#: The Kafka versions the test suite runs besides the default one (``tests/test_kafka_versions.py``
#: on 3.9.2; the tiny matrix of ``tests/test_matrix.py`` on 4.3.1).
TEST_KAFKA_VERSIONS = ("3.9.2", "4.3.1")

Say = Callable[[str], None]


def main_job(version: str = DEFAULT_KAFKA_VERSION) -> Installation:
    """Kafka ``version``, toxiproxy and the Java clients (a no-op when present)."""
    return ensure_installed(version)


def _clients() -> list[tuple[str, Callable[[], Any]]]:
    from workloads import client_registry

    return [
        (f"the {m.name} client", lambda m=m: client_registry.ensure_built(m))
        for m in client_registry.manifests().values()
        if not m.builtin
    ]


def _supported_ends() -> None:
    """The oldest and the newest release the harness accepts, as Maven Central lists them
    today: the Java clients are built against both in the tests."""
    from harness.kafka.versions import released_versions

    versions = released_versions()  # newest first
    for version in dict.fromkeys((versions[-1], versions[0])):
        ensure_installed(version)


def _actionlint() -> None:
    from harness.nightly.actionlint import ensure_actionlint

    ensure_actionlint()


def _streams_app() -> None:
    from harness.kafka.javaapps import ensure_built
    from workloads.streams.supervisor import STREAMS_APP

    ensure_built(ensure_installed(DEFAULT_KAFKA_VERSION), STREAMS_APP)


def _docker_images() -> list[tuple[str, Callable[[], Any]]]:
    """The images the Docker backend, the Spark lab and the SSH lab build on first use; none
    when no engine answers (those commands then say so themselves)."""
    from harness.substrate.docker.engine import connect_engine

    try:
        client = connect_engine()
    except HarnessError:
        return []
    from harness.substrate import sparklab
    from harness.substrate.docker import images
    from harness.substrate.ssh.lab import ensure_lab_image

    return [
        ("the Docker backend's runtime image", lambda: images.ensure_runtime_image(client)),
        ("the Docker backend's reaper image", lambda: images.ensure_reaper_image(client)),
        ("the Spark lab's image", lambda: sparklab.ensure_image(client)),
        ("the SSH lab's image", lambda: ensure_lab_image(client)),
    ]


def steps() -> list[tuple[str, Callable[[], Any]]]:
    """The rest, in the order it is built: cheap and widely used first."""
    out: list[tuple[str, Callable[[], Any]]] = [
        (f"Kafka {v}", lambda v=v: ensure_installed(v)) for v in TEST_KAFKA_VERSIONS
    ]
    out += [
        ("the oldest and the newest supported Kafka releases", _supported_ends),
        ("the Streams application", _streams_app),
        *_clients(),
        ("actionlint, the nightly workflow's linter", _actionlint),
    ]
    with contextlib.suppress(ImportError):  # no docker or ssh extra: those commands say so
        out += _docker_images()
    return out


def the_rest(say: Say = print) -> list[str]:
    """Build every step of :func:`steps`, one line each; returns the warnings (steps that
    could not be built here)."""
    warnings: list[str] = []
    for label, build in steps():
        t0 = time.monotonic()
        try:
            build()
        except HarnessError as exc:
            warnings.append(f"{label}: {exc}")
            say(f"   {label}: not built here ({exc}); commands that need it will say so")
            continue
        took = time.monotonic() - t0
        if took >= 1.0:  # a cache hit says nothing
            say(f"   {label}: built in {took:.0f} s")
    return warnings
