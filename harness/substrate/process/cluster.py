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
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from harness.kafka import brokerpatch
from harness.kafka.install import ensure_installed
from harness.substrate.api import ClusterConfig
from harness.substrate.base import (
    ClusterBase,
    check_base_port,
    port_free,
    scratch_root,
    slot_ports,
)
from harness.substrate.process.network import (
    BridgeNetwork,
    LoopbackNetwork,
    namespaces_available,
    subnet_in_use,
)
from harness.substrate.process.node import CONTROLLER_PORT, INTERNAL_PORT, KafkaNode
from harness.substrate.runstate import (
    acquire_slot,
    kill_run_processes,
    live_run_ids,
    reap_all,
    remove_network,
)
from harness.substrate.toxiproxy import Toxiproxy

log = logging.getLogger("harness.substrate.process.cluster")


class Cluster(ClusterBase[KafkaNode]):
    """Start with ``with Cluster(ClusterConfig(...)) as c:``; see the module docstring."""

    backend = "process"

    def __init__(self, config: ClusterConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.net: BridgeNetwork | LoopbackNetwork | None = None
        self.data_root: Path | None = None

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
        return slot_ports(self.config, slot)

    def start(self) -> None:
        t0 = time.monotonic()
        cfg = self.config
        reap_all()
        self.install = ensure_installed(cfg.kafka_version)
        self._check_transaction_version(self.install.version)
        mode = self._choose_network_mode()
        check_base_port(cfg)

        def usable(n: int) -> bool:
            if mode == "netns" and subnet_in_use(n):
                return False
            return all(port_free(p) for p in self._ports(n))

        self.slot = acquire_slot(self.run_id, cfg.slot, usable)
        self._install_signal_handlers()
        atexit.register(self.stop)
        slot = self.slot.number
        self.net = (BridgeNetwork if mode == "netns" else LoopbackNetwork)(slot, cfg.nodes)
        self._make_store()
        self._claim_store()
        self.data_root = scratch_root() / self.run_id
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
        assert self.install is not None and self.dir is not None
        toxiproxy = Toxiproxy(
            self.install.toxiproxy_bin, ports[0], self.dir / "toxiproxy.log", self.env
        )
        toxiproxy.start()
        self.toxiproxy = toxiproxy
        self._make_settings()
        self._secure(
            {n.node_id: [n.ip, "127.0.0.1"] for n in self.net.nodes},
            [f"127.0.0.1:{ports[n.node_id]}" for n in self.net.nodes],
            [f"{n.ip}:{INTERNAL_PORT}" for n in self.net.nodes],
        )
        voters = ",".join(f"{n.node_id}@{n.ip}:{9094}" for n in self.net.nodes)
        patch_opts = brokerpatch.jvm_options(self.install, cfg.broker_patch)
        for net in self.net.nodes:
            node_dir = self.dir / "nodes" / f"n{net.node_id}"
            proxy_port = ports[net.node_id]
            toxiproxy.create_proxy(
                self.proxy_name(net.node_id), f"127.0.0.1:{proxy_port}", f"{net.ip}:9092"
            )
            node = KafkaNode(
                net.node_id, net, self.install, node_dir, ("127.0.0.1", proxy_port), self.env
            )
            node.data_dir = self.data_root / f"n{net.node_id}"
            node.agent_opts = patch_opts
            if self.security is not None:
                node_dir.mkdir(parents=True, exist_ok=True)
                node.use_hosts_file(
                    {"127.0.0.1": "localhost", **{n.ip: f"n{n.node_id}" for n in self.net.nodes}}
                )
            node.write_config(voters, self.node_settings(net.node_id))
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
        extra = self.security.format_args() if self.security is not None else []
        procs = [
            (
                n,
                subprocess.Popen(
                    n.format_command(self.cluster_id, tv, extra),
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

    def _write_logdump(self, out_dir: Path) -> Path:
        segments = {n.node_id: [str(p) for p in n.data_dir.glob("*/*.log")] for n in self.nodes}
        return self._dump_here(out_dir, segments)

    def _release(self) -> None:
        """The toxiproxy server, every marked process, the network, the scratch data, the
        slot."""
        if self.toxiproxy is not None:
            with contextlib.suppress(Exception):
                self.toxiproxy.stop()
        if self.slot is not None:
            kill_run_processes({self.run_id})
            if self.net is not None:
                remove_network(
                    self.net.netns_names, self.net.link_names, self.slot.state.root_iptables
                )
            if self.data_root is not None:
                shutil.rmtree(self.data_root, ignore_errors=True)
            self.slot.release()

    # --- addresses ---------------------------------------------------------------------

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

    # --- network faults ----------------------------------------------------------------

    def _cut_links(self, groups: tuple[list[int], ...]) -> None:
        """iptables rules inside the namespaces of every cut pair."""
        assert self.net is not None
        for i, g in enumerate(groups):
            for h in groups[i + 1 :]:
                for a in g:
                    for b in h:
                        self.net.cut(a, b)

    def _cut_controller_link(self, node_id: int, followers: bool) -> None:
        """iptables rules on the controller port inside the node's namespace (and on its
        own inter-broker listener, for ``followers``)."""
        assert self.net is not None
        self.net.cut_port(node_id, CONTROLLER_PORT)
        if followers:
            self.net.close_listener(node_id, INTERNAL_PORT)

    def _heal_links(self) -> None:
        if self.net is not None:
            self.net.heal()

    def can_reach(self, src: int, dst: int) -> bool:
        """Probe: does a TCP connect from node ``src`` to ``dst``'s inter-broker port succeed?"""
        assert self.net is not None
        return self.net.can_connect(src, self.node(dst).net.ip, INTERNAL_PORT)
