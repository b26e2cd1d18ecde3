"""A multi-node KRaft cluster on one machine: the substrate every test stands on.

``Cluster`` composes the pieces: an installation (jars + toxiproxy), a slot (names, subnet
and ports nobody else uses), a network (bridge + one namespace per node, or loopback), a
toxiproxy in front of every node's client listener, and N combined broker+controller nodes.
It is a context manager; leaving the block (normally, by exception, by Ctrl-C or SIGTERM)
heals every fault, collects the evidence and removes everything it created. A harness that
is SIGKILLed leaves its slot lock behind to be found and reaped by the next start.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from common.waits import wait_for
from harness.kafka import coordinators
from harness.kafka.install import Installation, ensure_installed
from harness.kafka.wire import PartitionView, fetch_metadata, fetch_partitions
from harness.substrate.api import (
    ClusterConfig,
    default_broker_settings,
    new_cluster_id,
)
from harness.substrate.base import ClusterBase, check_config
from harness.substrate.evidence import dump_log_segments
from harness.substrate.process.network import (
    BridgeNetwork,
    LoopbackNetwork,
    namespaces_available,
    subnet_in_use,
)
from harness.substrate.process.node import INTERNAL_PORT, KafkaNode
from harness.substrate.runstate import (
    Slot,
    acquire_slot,
    live_run_ids,
    new_run_id,
    reap_all,
)
from harness.substrate.toxiproxy import Toxiproxy

log = logging.getLogger("harness.substrate.process.cluster")

PORT_BASE = int(os.environ.get("KAFKA_HARNESS_PORT_BASE", "21000"))
PORTS_PER_SLOT = 20


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Cluster(ClusterBase[KafkaNode]):
    """Start with ``with Cluster(ClusterConfig(...)) as c:``; see the module docstring."""

    def __init__(self, config: ClusterConfig | None = None, **kwargs: Any) -> None:
        self.config = config or ClusterConfig(**kwargs)
        check_config(self.config)
        self.run_id = new_run_id()
        self.install: Installation | None = None
        self.slot: Slot | None = None
        self.net: BridgeNetwork | LoopbackNetwork | None = None
        self.toxiproxy: Toxiproxy | None = None
        self.nodes: list[KafkaNode] = []
        self.settings: dict[str, str] = {}
        self.dir: Path | None = None
        self.data_root: Path | None = None
        self.cluster_id = new_cluster_id()
        self._admin: Any = None
        self._cut: set[int] = set()  # nodes with partition rules: their views may be stale
        self._stopped = False
        self._old_sigterm: Any = None
        self.timings: dict[str, float] = {}

    # --- lifecycle --------------------------------------------------------------------

    @property
    def uses_netns(self) -> bool:
        return isinstance(self.net, BridgeNetwork)

    def _choose_network_mode(self) -> str:
        mode = self.config.network
        if mode == "auto":
            if namespaces_available():
                return "netns"
            log.warning(
                "network namespaces unavailable (needs root, ip and iptables): nodes share "
                "loopback, partitions between nodes are impossible; fault fidelity is reduced"
            )
            return "loopback"
        if mode == "netns" and not namespaces_available():
            raise HarnessError("--network netns needs root, iproute2 and iptables")
        if mode not in ("netns", "loopback"):
            raise HarnessError(f"unknown network mode {mode!r} (auto, netns or loopback)")
        return mode

    def _ports(self, slot: int) -> list[int]:
        base = self.config.base_port or PORT_BASE + slot * PORTS_PER_SLOT
        return list(range(base, base + self.config.nodes + 1))

    def start(self) -> None:
        t0 = time.monotonic()
        cfg = self.config
        reap_all()
        self.install = ensure_installed(cfg.kafka_version)
        if (
            cfg.transaction_version is not None
            and not self.install.version.supports_transaction_version
        ):
            raise HarnessError(
                f"Kafka {self.install.version} has no transaction.version feature (4.x only)"
            )
        mode = self._choose_network_mode()
        if cfg.base_port is not None:
            taken = [p for p in self._ports(0) if not _port_free(p)]
            if taken:
                raise HarnessError(
                    f"port {taken[0]} on 127.0.0.1 is in use; choose another --base-port"
                )

        def usable(n: int) -> bool:
            if mode == "netns" and subnet_in_use(n):
                return False
            return all(_port_free(p) for p in self._ports(n))

        self.slot = acquire_slot(self.run_id, cfg.slot, usable)
        self._install_signal_handlers()
        atexit.register(self.stop)
        slot = self.slot.number
        self.net = (BridgeNetwork if mode == "netns" else LoopbackNetwork)(slot, cfg.nodes)
        store = cfg.store or Path("store") / "clusters" / self.run_id
        self.dir = Path(store).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._claim_store()
        scratch = Path(os.environ.get("KAFKA_HARNESS_SCRATCH", "/tmp/kafka-harness-data"))
        self.data_root = scratch / self.run_id
        root_rules = self.net.forward_rules()
        # Record intent before acting, so a crash in the middle is still fully reapable.
        self.slot.state.netns = self.net.netns_names
        self.slot.state.links = self.net.link_names
        self.slot.state.root_iptables = root_rules
        self.slot.state.dirs = [str(self.data_root)]
        self.slot.save()
        self.net.create()
        self.net.add_root_rules(root_rules)
        self.timings["network"] = time.monotonic() - t0

        ports = self._ports(slot)
        assert self.install is not None
        self.toxiproxy = Toxiproxy(
            self.install.toxiproxy_bin, ports[0], self.dir / "toxiproxy.log", self.env
        )
        self.toxiproxy.start()
        self.settings = default_broker_settings(cfg.nodes)
        self.settings.update(cfg.broker_settings)
        voters = ",".join(f"{n.node_id}@{n.ip}:{9094}" for n in self.net.nodes)
        for net in self.net.nodes:
            node_dir = self.dir / "nodes" / f"n{net.node_id}"
            proxy_port = ports[net.node_id]
            self.toxiproxy.create_proxy(
                self.proxy_name(net.node_id), f"127.0.0.1:{proxy_port}", f"{net.ip}:9092"
            )
            node = KafkaNode(
                net.node_id, net, self.install, node_dir, ("127.0.0.1", proxy_port), self.env
            )
            node.data_dir = self.data_root / f"n{net.node_id}"
            node.write_config(voters, self.settings)
            self.nodes.append(node)
        self._format()
        self.timings["format"] = time.monotonic() - t0
        for node in self.nodes:
            node.start()
        self.wait_ready(cfg.ready_timeout)
        self.timings["ready"] = time.monotonic() - t0
        log.info("cluster %s ready in %.1fs", self.run_id, self.timings["ready"])

    def _claim_store(self) -> None:
        """Refuse a store directory that a live cluster is writing into (configs, logs)."""
        assert self.dir is not None
        marker = self.dir / "cluster.json"
        if marker.exists():
            try:
                other = json.loads(marker.read_text()).get("run_id")
            except ValueError:
                other = None
            if other and other != self.run_id and other in live_run_ids():
                raise HarnessError(f"store {self.dir} is in use by live run {other}")
        marker.write_text(json.dumps({"run_id": self.run_id, "cluster_id": self.cluster_id}))

    def _format(self) -> None:
        tv = self.config.transaction_version
        procs = [
            (
                n,
                subprocess.Popen(
                    n.format_command(self.cluster_id, tv),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    text=True,
                ),
            )
            for n in self.nodes
        ]
        # Wait for every format before judging any: a failed start must not delete the data
        # directories while another node's format is still writing into them.
        outputs = [
            (node, proc.communicate(timeout=120)[0], proc.returncode) for node, proc in procs
        ]
        for node, out, _code in outputs:
            (node.dir / "format.log").write_text(out)
        for node, out, code in outputs:
            if code != 0:
                lines = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("\t")]
                raise HarnessError(
                    f"formatting node {node.node_id} failed: {lines[-1] if lines else out}"
                )

    def stop(self) -> None:
        """Heal, collect evidence, stop everything, remove everything. Safe to call twice."""
        if not self._first_stop():
            return
        t0 = time.monotonic()
        try:
            self.heal_all()
        except Exception as exc:  # cleanup continues whatever failed
            log.warning("heal during stop failed: %s", exc)
        if self._admin is not None:
            self._admin = None
        # Teardown kills rather than stops: the evidence is on disk already, and a clean
        # shutdown of a whole KRaft quorum costs seconds per node for nothing.
        for node in self.nodes:
            try:
                node.kill()
            except Exception as exc:
                log.warning("killing node %s failed: %s", node.node_id, exc)
        self.timings["stop_nodes"] = time.monotonic() - t0
        if self.config.dump_logs and self.nodes and self.dir is not None:
            try:
                dump_log_segments(self)
            except Exception as exc:
                log.warning("log segment dump failed: %s", exc)
        self.timings["dump"] = time.monotonic() - t0
        if self.toxiproxy is not None:
            with contextlib.suppress(Exception):
                self.toxiproxy.stop()
        if self.slot is not None:
            from harness.substrate.runstate import kill_run_processes, remove_network

            kill_run_processes({self.run_id})
            if self.net is not None:
                remove_network(
                    self.net.netns_names, self.net.link_names, self.slot.state.root_iptables
                )
            if self.data_root is not None:
                shutil.rmtree(self.data_root, ignore_errors=True)
            self.slot.release()
        self._restore_signal_handlers()
        self.timings["teardown"] = time.monotonic() - t0

    # --- addresses and clients ---------------------------------------------------------

    def proxy_name(self, node_id: int) -> str:
        return f"n{node_id}"

    @property
    def bootstrap(self) -> str:
        """Client bootstrap through toxiproxy: what workloads use."""
        assert self.slot is not None
        ports = self._ports(self.slot.number)
        return ",".join(f"127.0.0.1:{ports[n.node_id]}" for n in self.nodes)

    @property
    def internal_bootstrap(self) -> str:
        """Direct inter-broker listeners: what the harness uses to observe, bypassing toxics."""
        return ",".join(n.internal_address for n in self.nodes)

    # --- readiness ---------------------------------------------------------------------

    def registered_brokers(self) -> set[int]:
        """Broker ids that every answering live broker lists in its metadata.

        In KRaft, metadata lists only registered, unfenced brokers. Each broker is asked
        directly (no client library in the harness process for this: it is called from the
        nemesis thread while brokers die and return). The intersection is conservative both
        ways: a just-restarted broker that has not caught up, or an isolated one whose view
        is stale, can only delay "registered", never fake it.
        """
        views = []
        askable = [n for n in self.nodes if n.node_id not in self._cut] or self.nodes
        for node in askable:
            if not node.alive() or node.state() == "T":
                continue
            try:
                views.append(fetch_metadata(node.net.ip, INTERNAL_PORT, [], node.node_id)[0])
            except (OSError, struct.error):
                continue
        if not views:
            raise HarnessError("no live broker answered a metadata request")
        return set.intersection(*views)

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        want = {n.node_id for n in self.nodes}

        def all_registered() -> bool:
            for node in self.nodes:
                if not node.alive():
                    raise HarnessError(
                        f"node {node.node_id} exited during start-up; see {node.log_path}"
                    )
            return self.registered_brokers() == want

        wait_for(all_registered, timeout=timeout, what=f"brokers {sorted(want)} unfenced")
        self.timings["registered"] = time.monotonic() - (deadline - timeout)
        from harness.kafka.readiness import transactional_round_trip

        transactional_round_trip(self, max(5.0, deadline - time.monotonic()))

    # --- look-ups that aim faults -----------------------------------------------------

    def partition_views(self, topic: str, partition: int) -> list[PartitionView]:
        """Every reachable live broker's own view of a partition, asked one by one."""
        views = []
        for node in self.nodes:
            if not node.alive() or node.state() == "T":
                continue
            try:
                got = fetch_partitions(node.net.ip, INTERNAL_PORT, [topic], node.node_id)
            except OSError:
                continue
            view = got.get((topic, partition))
            if view is not None and view.error == 0:
                views.append(view)
        return views

    def active_controller(self) -> int:
        return coordinators.active_controller(self)

    # --- node control ------------------------------------------------------------------

    def start_node(self, node_id: int, timeout: float = 60.0) -> None:
        node = self.node(node_id)
        node.start()
        wait_for(
            lambda: node_id in self.registered_brokers(),
            timeout=timeout,
            what=f"node {node_id} registered after restart",
        )

    # --- network faults ----------------------------------------------------------------

    def partition(self, *groups: list[int]) -> None:
        """Cut every node of each group from every node of every other group."""
        assert self.net is not None
        for i, g in enumerate(groups):
            for h in groups[i + 1 :]:
                for a in g:
                    for b in h:
                        self.net.cut(a, b)
        # Nodes outside the largest group are the ones whose metadata may go stale.
        largest = max(groups, key=len)
        for g in groups:
            if g is not largest:
                self._cut.update(g)

    def heal(self) -> None:
        assert self.net is not None
        self.net.heal()
        self._cut.clear()

    def can_reach(self, src: int, dst: int) -> bool:
        """Probe: does a TCP connect from node ``src`` to ``dst``'s inter-broker port succeed?"""
        assert self.net is not None
        return self.net.can_connect(src, self.node(dst).net.ip, INTERNAL_PORT)

    def add_toxic(
        self, node_id: int, kind: str, attributes: dict[str, Any] | None = None, **kw: Any
    ) -> str:
        assert self.toxiproxy is not None
        return self.toxiproxy.add_toxic(self.proxy_name(node_id), kind, attributes, **kw)

    def remove_toxic(self, node_id: int, name: str) -> None:
        assert self.toxiproxy is not None
        self.toxiproxy.remove_toxic(self.proxy_name(node_id), name)

    def proxy_down(self, node_id: int) -> None:
        assert self.toxiproxy is not None
        self.toxiproxy.set_enabled(self.proxy_name(node_id), False)

    def proxy_up(self, node_id: int) -> None:
        assert self.toxiproxy is not None
        self.toxiproxy.set_enabled(self.proxy_name(node_id), True)

    def heal_all(self) -> None:
        """Undo every fault: resume paused nodes, heal partitions, drop toxics."""
        self._resume_paused()
        if self.net is not None:
            self.net.heal()
            self._cut.clear()
        if self.toxiproxy is not None and self.toxiproxy.proc is not None:
            self.toxiproxy.reset()
