"""What the two cluster backends share (``process.cluster.Cluster``, processes in network
namespaces, and ``docker.cluster.DockerCluster``, containers): the context-manager life cycle
and its teardown order, SIGTERM handling, the run marker in the environment and readiness;
the abilities (look-ups, signals, network cuts, toxics, client cuts, Kafka's tools and topics)
are mixins of :mod:`harness.substrate.abilities`. A backend supplies only what differs: how
nodes are started and cut apart, where the evidence is read from, and what is removed at the
end. Kept in one place so the backends cannot drift apart.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Self

from common.errors import HarnessError
from common.waits import wait_for
from harness.kafka import security
from harness.kafka.security import CLIENT_IDENTITIES, Material
from harness.substrate import readiness
from harness.substrate.abilities.clientcuts import GroupClientCuts
from harness.substrate.abilities.credentials import ClientCredentials
from harness.substrate.abilities.lookups import MetadataLookups
from harness.substrate.abilities.network import NetworkCuts
from harness.substrate.abilities.nodes import N
from harness.substrate.abilities.signals import ProcessSignals
from harness.substrate.abilities.tools import KafkaTools
from harness.substrate.abilities.toxics import ProxyToxics
from harness.substrate.api import ClusterConfig, new_cluster_id
from harness.substrate.evidence import dump_args, write_logdump
from harness.substrate.runstate import MARKER_ENV, new_run_id
from harness.substrate.toxiproxy import Toxiproxy

if TYPE_CHECKING:
    from harness.kafka.install import Installation
    from harness.kafka.versions import KafkaVersion
    from harness.substrate.runstate import Slot

log = logging.getLogger("harness.substrate.base")


PORT_BASE = int(os.environ.get("KAFKA_HARNESS_PORT_BASE", "21000"))
PORTS_PER_SLOT = 20


def slot_ports(config: ClusterConfig, slot: int) -> list[int]:
    """The ports on 127.0.0.1 of a cluster in ``slot`` (toxiproxy's API, then one proxy per
    node), for the backends whose proxies run on this machine (process, ssh)."""
    base = config.base_port or PORT_BASE + slot * PORTS_PER_SLOT
    return list(range(base, base + config.nodes + 1))


def check_base_port(config: ClusterConfig) -> None:
    """A ``--base-port`` whose ports are taken is one line before anything starts."""
    if config.base_port is not None:
        taken = [p for p in slot_ports(config, 0) if not port_free(p)]
        if taken:
            raise HarnessError(
                f"port {taken[0]} on 127.0.0.1 is in use; choose another --base-port"
            )


def scratch_root() -> Path:
    """Where brokers' data (process backend) and fetched copies of it (ssh) live."""
    return Path(os.environ.get("KAFKA_HARNESS_SCRATCH", "/tmp/kafka-harness-data"))


def port_free(port: int) -> bool:
    """Whether nothing listens on ``127.0.0.1:port`` (both backends publish ports there)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class ClusterBase(
    MetadataLookups[N],
    ProcessSignals[N],
    NetworkCuts[N],
    ProxyToxics,
    GroupClientCuts,
    KafkaTools,
    ClientCredentials,
):
    """The shared part of a backend.

    A subclass sets the attributes below and implements ``start``, ``bootstrap``,
    ``internal_bootstrap``, ``can_reach`` and the hooks
    ``_cut_links``/``_heal_links`` (the network faults), ``_write_logdump`` (the evidence) and
    ``_release`` (what teardown removes); ``_started``, ``_save_logs`` and ``_after_node_start``
    have defaults.
    """

    backend: str  #: process, docker or ssh

    config: ClusterConfig
    run_id: str
    nodes: list[N]
    settings: dict[str, str]
    install: Installation | None
    dir: Path | None
    toxiproxy: Toxiproxy | None
    timings: dict[str, float]

    def __init__(self, config: ClusterConfig | None = None, **kwargs: Any) -> None:
        self.config = config or ClusterConfig(**kwargs)
        self.config.validate()
        mode = security.check_mode(self.config.security)
        if mode != "plaintext" and self.backend == "ssh":
            raise HarnessError(f"--security {mode} runs on the process and Docker backends")
        self.run_id = new_run_id()
        self.cluster_id = new_cluster_id()
        self.install = None
        self.slot: Slot | None = None
        self.nodes = []
        self.settings = {}
        self.dir = None
        self.toxiproxy = None
        self.timings = {}
        self._admin: Any = None
        #: ``--security`` other than plaintext: the cluster's certificates and passwords.
        self.security: Material | None = None
        self._init_credentials()
        self._cut: set[int] = set()  # outside the majority of a partition: views may be stale
        self._stopped = False
        self._old_sigterm: Any = None

    def _check_transaction_version(self, version: KafkaVersion) -> None:
        if self.config.transaction_version is not None and not version.supports_transaction_version:
            raise HarnessError(f"Kafka {version} has no transaction.version feature (4.x only)")

    def _make_settings(self) -> dict[str, str]:
        """The defaults for this shape, overridden by the configuration's settings."""
        self.settings = self.config.settings()
        return self.settings

    def _secure(
        self, brokers: dict[int, list[str]], client: list[str], internal: list[str]
    ) -> None:
        """For ``--security`` other than plaintext: make the cluster's CA, certificates and
        passwords (``brokers``: each node's addresses; ``client`` and ``internal``: the
        addresses of the two paths) and point the harness's own clients at them."""
        mode = security.check_mode(self.config.security)
        if mode == "plaintext":
            return
        root = scratch_root() / self.run_id / "security"
        if self.slot is not None:  # a killed run's next start removes it (runstate's reaper)
            self.slot.state.dirs = [*self.slot.state.dirs, str(root.parent)]
            self.slot.save()
        self.security = security.make_material(mode, root, brokers, list(CLIENT_IDENTITIES))
        security.activate(self.security.write_harness_settings(client, internal))

    @property
    def client_security(self) -> dict[str, str] | None:
        """The clients under test's ``security`` object (the client contract's), or None."""
        if self.security is None:
            return None
        return self.security.contract(CLIENT_IDENTITIES[0])

    def node_settings(self, node_id: int) -> dict[str, str]:
        """Node ``node_id``'s settings: the cluster's, with its security over them."""
        if self.security is None:
            return self.settings
        return {**self.settings, **self.security.broker_settings(node_id)}

    def _make_store(self) -> Path:
        """The run's store directory (configs, logs, evidence), created."""
        store = self.config.store or Path("store") / "clusters" / self.run_id
        self.dir = Path(store).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir

    # --- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Heal, save the evidence, kill the brokers, remove everything. Safe to call twice.

        Teardown kills rather than stops: the evidence is on disk already, and a clean
        shutdown of a whole KRaft quorum costs seconds per node for nothing. The segment
        dump comes after the kills, so the files it reads are final.
        """
        if not self._first_stop():
            return
        t0 = time.monotonic()
        self._admin = None
        if self._started():
            try:
                self.heal_all()
            except Exception as exc:  # cleanup continues whatever failed
                log.warning("heal during stop failed: %s", exc)
            self._save_logs()
            for node in self.nodes:
                try:
                    node.kill()
                except Exception as exc:
                    log.warning("killing node %s failed: %s", node.node_id, exc)
            self.timings["stop_nodes"] = time.monotonic() - t0
            if self.config.dump_logs and self.nodes and self.dir is not None:
                try:
                    self._write_logdump(self.dir / "evidence")
                except Exception as exc:
                    log.warning("log segment dump failed: %s", exc)
            self.timings["dump"] = time.monotonic() - t0
        try:
            self._heal_clients()  # before the slot is released: the rules carry its number
        except Exception as exc:
            log.warning("removing client cuts failed: %s", exc)
        self._release()
        if self.security is not None:
            security.activate(None)
            shutil.rmtree(self.security.root.parent, ignore_errors=True)
        self._restore_signal_handlers()
        self.timings["teardown"] = time.monotonic() - t0

    def _started(self) -> bool:
        """Whether anything was started that teardown must heal, save and kill."""
        return True

    def _save_logs(self) -> None:
        """Copy node output into the store before the nodes go (a no-op where it is there)."""

    def _write_logdump(self, out_dir: Path) -> Path:
        """``out_dir/logdump.jsonl`` (``harness.substrate.evidence``) from the dead nodes."""
        raise NotImplementedError

    def _dump_here(self, out_dir: Path, segments: dict[int, list[str]]) -> Path:
        """The dump of segment files on this machine, with the installation's own tool (two
        kinds at a time)."""

        def dump(kind: str, files: list[str]) -> str:
            return self.run_tool("DumpLogSegments", *dump_args(kind, files), timeout=300)

        return write_logdump(out_dir, len(self.nodes), segments, dump, workers=2)

    def _release(self) -> None:
        """Remove everything the start created (processes, networks, containers...)."""
        raise NotImplementedError

    @property
    def env(self) -> dict[str, str]:
        """The environment of every process we spawn: carries the run marker."""
        return dict(os.environ, **{MARKER_ENV: self.run_id})

    def _install_signal_handlers(self) -> None:
        """SIGTERM raises SystemExit, so it unwinds through ``stop()`` as Ctrl-C does."""
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: FrameType | None) -> None:
            raise SystemExit(128 + signum)

        self._old_sigterm = signal.signal(signal.SIGTERM, on_term)

    def _restore_signal_handlers(self) -> None:
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._old_sigterm)

    def _first_stop(self) -> bool:
        """True the first time only (``stop`` is idempotent); drops the atexit hook."""
        if self._stopped:
            return False
        self._stopped = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        return True

    # --- readiness ---------------------------------------------------------------------

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Every broker registered and unfenced, then a transaction through toxiproxy."""
        deadline = time.monotonic() + timeout
        want = {n.node_id for n in self.nodes}

        def all_registered() -> bool:
            for node in self.nodes:
                if not node.alive():
                    raise HarnessError(
                        f"node {node.node_id} exited during start-up; see {node.logs}"
                    )
            return self.registered_brokers() == want

        wait_for(all_registered, timeout=timeout, what=f"brokers {sorted(want)} unfenced")
        self.timings["registered"] = time.monotonic() - (deadline - timeout)
        readiness.transactional_round_trip(self, max(5.0, deadline - time.monotonic()))

    # --- addresses and clients ---------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    @property
    def internal_bootstrap(self) -> str:
        raise NotImplementedError

    def heal_all(self) -> None:
        """Undo every fault: reconnect cut clients, resume paused nodes, heal partitions,
        drop toxics."""
        self._heal_clients()
        for node in self.nodes:
            if node.state() == "T":
                node.resume()
        self.heal()
        if self.toxiproxy is not None:
            self.toxiproxy.reset()
