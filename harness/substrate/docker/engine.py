"""The Docker engine: connecting to it, and never leaking on it.

Every network, volume and container a run creates carries ``kafka-harness.run=<id>`` and an
owner label (host, pid, process start time). ``reap_docker()`` removes what dead owners left;
each start calls it. Where testcontainers' Ryuk can run, resources also carry its session
label, so the engine removes them soon after the harness dies, even by SIGKILL.

The ``docker`` and ``testcontainers`` libraries (extra ``[docker]``) are imported lazily: the
project imports and its unit tests run without them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

from common.errors import HarnessError
from common.procfs import process_start
from harness.substrate.docker import plan as dp

log = logging.getLogger("harness.substrate.docker.engine")

ENGINE_TIMEOUT = 5.0


def is_not_found(exc: BaseException) -> bool:
    """docker's NotFound/ImageNotFound, recognised without importing docker (fakes too)."""
    return any(c.__name__ in ("NotFound", "ImageNotFound") for c in type(exc).__mro__)


def connect_engine(timeout: float = ENGINE_TIMEOUT) -> Any:
    """A docker client whose engine answered a ping, or a one-line HarnessError."""
    try:
        import docker
    except ImportError:
        raise HarnessError(
            "the Docker backend needs the docker extra: pip install 'kafka-eos-harness[docker]'"
        ) from None
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HarnessError(f"no Docker engine answered: {first[:200]}") from None
    return client


# --- ownership: who may reap what -------------------------------------------------------


def owner_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{process_start(pid) or '?'}"


def owner_is_dead(token: str, hostname: str, process_start: Any = process_start) -> bool:
    """True only when the owner ran on this host and that process (same start) is gone.

    Resources owned by another host (a shared remote engine) are never judged dead here.
    """
    parts = token.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != hostname or not parts[1].isdigit():
        return False
    started = process_start(int(parts[1]))
    return started is None or (parts[2] != "?" and started != parts[2])


def reap_docker(client: Any = None, keep: set[str] | None = None) -> dict[str, int]:
    """Remove labelled containers, volumes and networks of dead harness runs.

    A no-op (all zeros) when no engine answers or the docker library is absent. Runs whose
    ids are in ``keep``, and runs whose owner is alive or on another host, are left alone.
    """
    counts = {"containers": 0, "volumes": 0, "networks": 0}
    if client is None:
        try:
            client = connect_engine(timeout=2.0)
        except HarnessError:
            return counts
    keep = keep or set()
    host = socket.gethostname()

    def dead(lbls: dict[str, str]) -> bool:
        run = lbls.get(dp.LABEL_RUN)
        return bool(run) and run not in keep and owner_is_dead(lbls.get(dp.LABEL_OWNER, ""), host)

    selector = {"label": dp.LABEL_RUN}
    for c in client.containers.list(all=True, filters=selector):
        if dead(c.labels):
            with contextlib.suppress(Exception):
                c.remove(force=True, v=True)
                counts["containers"] += 1
    for v in client.volumes.list(filters=selector):
        if dead(v.attrs.get("Labels") or {}):
            with contextlib.suppress(Exception):
                v.remove(force=True)
                counts["volumes"] += 1
    for n in client.networks.list(filters=selector):
        if dead(n.attrs.get("Labels") or {}):
            with contextlib.suppress(Exception):
                n.remove()
                counts["networks"] += 1
    return counts


def remove_labelled(client: Any, label: str) -> int:
    """Remove every container (with its anonymous volumes) and then every network carrying
    ``label`` (``key`` or ``key=value``): what the labs' ``down`` does. Containers removed."""
    selector = {"label": label}
    removed = 0
    for c in client.containers.list(all=True, filters=selector):
        try:
            c.remove(force=True, v=True)
            removed += 1
        except Exception as exc:
            if not is_not_found(exc):
                raise
    for n in client.networks.list(filters=selector):
        try:
            n.remove()
        except Exception as exc:
            if not is_not_found(exc):
                raise
    return removed


#: Where the user named a Ryuk image of their own (a registry reachable), it is used as is.
RYUK_IMAGE_ENVS = ("RYUK_CONTAINER_IMAGE", "TESTCONTAINERS_RYUK_CONTAINER_IMAGE")


def ryuk_labels(reaper_image: Callable[[], str]) -> dict[str, str]:
    """Start testcontainers' Ryuk (once per process) and return its session labels.

    The Ryuk image is the harness's own reaper (``docker/reaper``, speaking Ryuk's protocol,
    built locally by ``docker.images``, which ``reaper_image`` builds or finds only when Ryuk
    is on): testcontainers' default image lives on a registry
    this project's machines cannot reach, and Ryuk's Go module is not on their module
    proxy. Empty when Ryuk is disabled (``TESTCONTAINERS_RYUK_DISABLED``) or cannot start:
    the owner labels and ``reap_docker`` still clean up, only later (at the next start or
    ``python -m harness reap``).
    """
    try:
        from testcontainers.core.config import testcontainers_config
        from testcontainers.core.container import Reaper
        from testcontainers.core.labels import LABEL_SESSION_ID, SESSION_ID
    except ImportError:
        return {}
    if testcontainers_config.ryuk_disabled:
        return {}
    try:
        if not any(os.environ.get(k) for k in RYUK_IMAGE_ENVS):
            testcontainers_config.ryuk_image = reaper_image()
        Reaper.get_instance()
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        log.warning("testcontainers' Ryuk did not start (%s); relying on reap_docker", first[:200])
        return {}
    return {LABEL_SESSION_ID: SESSION_ID}
