"""A KRaft cluster in Docker containers, with the same verbs as the process backend.

For machines that have a Docker engine but cannot run the process backend (no Java, no
loopback aliases, macOS). ``DockerCluster`` is a ``ClusterBase`` like the process backend's
``Cluster``: a context manager whose ``bootstrap`` crosses toxiproxy, with pause/resume
(``docker pause``, the cgroup freezer: the broker stops as under SIGSTOP), kill/start_node
(``docker kill`` = SIGKILL, then ``docker start`` on the same data volume), partitions
(iptables inside the broker containers, in a dedicated chain, as the process backend does
inside its namespaces), toxics through the toxiproxy container's API, look-ups over each
broker's published ``OBSERVE`` listener, and at teardown container logs plus a
``DumpLogSegments`` evidence dump. What is here is only what differs from the process
backend; the engine connection and reaping are in ``docker.engine``, the images in
``docker.images``, one broker container in ``docker.node``, the pure planning in
``docker.plan``.

The brokers run the same Kafka installation as the process backend (``harness.kafka.install``:
Maven-resolved jars, mounted read-only into the containers), so ``install`` is set here too
and Kafka's tools and the project's Java clients run on the host from those jars against the
published ports, exactly as they do against process clusters.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import socket
import time
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from common.waits import wait_for
from harness.kafka import tools
from harness.kafka.install import ensure_installed
from harness.kafka.versions import DEFAULT_KAFKA_VERSION
from harness.substrate.api import ClusterConfig
from harness.substrate.base import ClusterBase, port_free
from harness.substrate.docker import plan as dp
from harness.substrate.docker.engine import (
    connect_engine,
    is_not_found,
    owner_token,
    reap_docker,
    ryuk_labels,
)
from harness.substrate.docker.images import ensure_reaper_image, ensure_runtime_image
from harness.substrate.docker.node import DockerNode
from harness.substrate.evidence import dump_args, write_logdump
from harness.substrate.runstate import acquire_slot, kill_run_processes
from harness.substrate.toxiproxy import Toxiproxy

log = logging.getLogger("harness.substrate.docker.cluster")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DockerCluster(ClusterBase[DockerNode]):
    """``with DockerCluster(ClusterConfig(...)) as c:``; ``harness.substrate.api.Cluster``."""

    backend = "docker"

    def __init__(
        self,
        config: ClusterConfig | None = None,
        *,
        client: Any = None,
        use_ryuk: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, **kwargs)
        self.client = client
        self.use_ryuk = use_ryuk
        self.kafka_version = self.config.kafka_version or DEFAULT_KAFKA_VERSION
        self.host_ip = "127.0.0.1"
        self.plan: dp.ClusterPlan | None = None
        self.extra_labels: dict[str, str] = {}
        self._pairs: list[tuple[int, int]] = []
        self._created: list[tuple[str, str]] = []  # (kind, name), in creation order

    # --- lifecycle --------------------------------------------------------------------

    @property
    def uses_netns(self) -> bool:
        """Partitions between brokers are possible (iptables inside the containers)."""
        return True

    def plan_or_fail(self) -> dp.ClusterPlan:
        if self.plan is None:
            raise HarnessError("the Docker cluster is not started")
        return self.plan

    def make_plan(self, image: str = "") -> dp.ClusterPlan:
        """The cluster's plan: ports picked on the host, settings merged, names derived."""
        cfg = self.config
        ports = dp.allocate_ports(cfg.nodes, cfg.base_port, port_free, _free_port)
        install = self.install
        return dp.plan_cluster(
            self.run_id,
            owner_token(),
            self.cluster_id,
            self.kafka_version,
            ports,
            self._make_settings(),
            transaction_version=cfg.transaction_version,
            host_ip=self.host_ip,
            image=image,
            kafka_libs=str(install.libs_dir) if install else "",
            toxiproxy_bin=str(install.toxiproxy_bin) if install else "",
        )

    def _secured(self, plan: dp.ClusterPlan) -> dp.ClusterPlan:
        """``plan`` with a secured cluster's certificates, settings and SCRAM users
        (``--security``); as it is for plaintext. A broker's certificate names its container
        (its peers' address) and the host address its CLIENT and OBSERVE ports are on."""
        self._secure(
            {n.node_id: [n.container, plan.host_ip] for n in plan.nodes},
            [f"{plan.host_ip}:{n.proxy_port}" for n in plan.nodes],
            [f"{plan.host_ip}:{n.observe_port}" for n in plan.nodes],
        )
        if self.security is None:
            return plan
        return dataclasses.replace(
            plan,
            security_settings={
                n.node_id: self.security.broker_settings(
                    n.node_id, at=dp.SECURITY_DIR, observe=True
                )
                for n in plan.nodes
            },
            security_dir=str(self.security.root),
            security_format_args=tuple(self.security.format_args()),
        )

    def _labelled(self, spec: dict[str, Any]) -> dict[str, Any]:
        return {**spec, "labels": {**spec["labels"], **self.extra_labels}}

    def start(self) -> None:
        t0 = time.monotonic()
        cfg = self.config
        if self.client is None:
            self.client = connect_engine()
        self.install = ensure_installed(self.kafka_version)
        self._check_transaction_version(self.install.version)
        reap_docker(self.client)
        # A host slot, though names derive from the run id and ports come from the OS: its
        # number keys the client group ids and client-cut rules (``cut-processor`` cuts the
        # workload's processes on this host, whatever runs the brokers), and the slot's
        # reaper kills this run's marked client processes and drops its rules if we die.
        self.slot = acquire_slot(self.run_id, cfg.slot, lambda n: True)
        self._install_signal_handlers()
        atexit.register(self.stop)
        image = ensure_runtime_image(self.client)
        self.timings["images"] = time.monotonic() - t0
        plan = self.plan = self._secured(self.make_plan(image))
        if self.use_ryuk:
            self.extra_labels = ryuk_labels(lambda: ensure_reaper_image(self.client))
        store = self._make_store()
        (store / "cluster.json").write_text(
            json.dumps({"run_id": self.run_id, "cluster_id": self.cluster_id, "backend": "docker"})
        )
        for n in plan.nodes:
            node_dir = store / "nodes" / f"n{n.node_id}"
            node_dir.mkdir(parents=True, exist_ok=True)
            props = dp.node_properties(plan, n.node_id)
            (node_dir / "server.properties").write_text(dp.render_properties(props))

        self.client.networks.create(**self._labelled(dp.network_spec(plan)))
        self._created.append(("network", plan.network))
        for n in plan.nodes:
            self.client.volumes.create(**self._labelled(dp.volume_spec(plan, n.node_id)))
            self._created.append(("volume", n.volume))
        self._created.append(("container", plan.toxiproxy))
        self.client.containers.run(**self._labelled(dp.toxiproxy_container_spec(plan)))
        self.toxiproxy = Toxiproxy(Path("toxiproxy"), plan.api_port, store / "toxiproxy.log", {})
        wait_for(
            lambda: self.toxiproxy is not None and self.toxiproxy.proxies() is not None,
            timeout=30,
            what=f"toxiproxy API on {self.host_ip}:{plan.api_port}",
        )
        for proxy in dp.proxy_definitions(plan):
            self.toxiproxy.create_proxy(proxy["name"], proxy["listen"], proxy["upstream"])
        for n in plan.nodes:
            self._created.append(("container", n.container))
            self.client.containers.run(**self._labelled(dp.broker_container_spec(plan, n.node_id)))
            node = DockerNode(n, self.client, self.host_ip, plan.network)
            for cmd in dp.chain_setup_commands():
                node.must_exec(cmd)
            self.nodes.append(node)
        self.timings["containers"] = time.monotonic() - t0
        self.wait_ready(cfg.ready_timeout)
        self.timings["ready"] = time.monotonic() - t0
        log.info("docker cluster %s ready in %.1fs", self.run_id, self.timings["ready"])

    def _started(self) -> bool:
        return self.client is not None and self.plan is not None

    def _release(self) -> None:
        """Containers first (they hold the volumes and the network), then the rest; the
        run's marked client processes and its host slot last."""
        try:
            self._remove_resources()
        finally:
            if self.slot is not None:
                kill_run_processes({self.run_id})
                self.slot.release()

    def _remove_resources(self) -> None:
        if not self._started():
            return
        order = {"container": 0, "volume": 1, "network": 2}
        for kind, name in sorted(reversed(self._created), key=lambda kn: order[kn[0]]):
            try:
                if kind == "container":
                    # v=True also drops the anonymous volumes the apache/kafka image
                    # declares; the named data volumes are removed below.
                    self.client.containers.get(name).remove(force=True, v=True)
                elif kind == "volume":
                    self.client.volumes.get(name).remove(force=True)
                else:
                    self.client.networks.get(name).remove()
            except Exception as exc:
                if not is_not_found(exc):
                    log.warning("removing %s %s failed: %s", kind, name, exc)

    def _save_logs(self) -> None:
        """Broker and toxiproxy output (the containers log to stdout) into the store."""
        assert self.dir is not None and self.plan is not None
        targets = [
            (n.name, self.dir / "nodes" / f"n{n.node_id}" / "server.log") for n in self.nodes
        ]
        targets.append((self.plan.toxiproxy, self.dir / "toxiproxy.log"))
        for name, path in targets:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(self.client.containers.get(name).logs(stdout=True, stderr=True))
            except Exception as exc:
                log.warning("saving logs of %s failed: %s", name, exc)

    def _write_logdump(self, out_dir: Path) -> Path:
        """Dumped in a helper container that mounts every node's data volume (the brokers
        are dead by then)."""
        plan = self.plan_or_fail()
        spec = self._labelled(dp.dump_container_spec(plan))
        self._created.append(("container", spec["name"]))
        helper = self.client.containers.run(**spec)
        segments: dict[int, list[str]] = {}
        for n in plan.nodes:
            res = helper.exec_run(["find", f"/dump/n{n.node_id}", "-name", "*.log"])
            segments[n.node_id] = (res[1] or b"").decode(errors="replace").split()

        assert self.install is not None
        # The tool's class moved between Kafka versions: found in the mounted jars themselves.
        main = tools.tool_class(self.install, "DumpLogSegments")

        def dump(kind: str, files: list[str]) -> str | None:
            cmd = dp.tool_exec_command(plan.kafka_version, main, dump_args(kind, files))
            code, output = helper.exec_run(cmd, demux=True)[:2]
            out, err = output if isinstance(output, tuple) else (output, b"")
            text = out or b""
            if code != 0:
                last = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or ["?"]
                log.warning("dumping the %s segments failed (%s): %s", kind, code, last[0])
                return None
            return str(text.decode(errors="replace"))

        return write_logdump(out_dir, len(plan.nodes), segments, dump)

    # --- addresses --------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Client bootstrap through toxiproxy's published ports: what workloads use."""
        plan = self.plan_or_fail()
        return ",".join(f"{plan.host_ip}:{n.proxy_port}" for n in plan.nodes)

    @property
    def internal_bootstrap(self) -> str:
        """The published OBSERVE listeners: the harness's path around the toxics."""
        plan = self.plan_or_fail()
        return ",".join(f"{plan.host_ip}:{n.observe_port}" for n in plan.nodes)

    # --- network faults ---------------------------------------------------------------

    def _after_node_start(self, node_id: int) -> None:
        """A restarted container gets a fresh network namespace (its iptables rules are
        gone) and possibly a new address (its peers' rules are stale): every cut is
        re-applied."""
        if self._pairs:
            self._apply_cuts()

    def _apply_cuts(self) -> None:
        running = {n.node_id: n for n in self.nodes if n.running()}
        ips = {i: n.ip() for i, n in running.items()}
        for n in running.values():
            n.must_exec(dp.heal_command())
        for a, b in self._pairs:
            for src, dst in ((a, b), (b, a)):
                if src in running and dst in ips:
                    for cmd in dp.cut_commands(ips[dst]):
                        running[src].must_exec(cmd)

    def _cut_links(self, groups: tuple[list[int], ...]) -> None:
        """iptables DROP rules in both containers of every cut pair."""
        self._pairs.extend(p for p in dp.partition_pairs(groups) if p not in self._pairs)
        self._apply_cuts()

    def _heal_links(self) -> None:
        for n in self.nodes:
            if n.running():
                n.must_exec(dp.heal_command())
        self._pairs.clear()

    def can_reach(self, src: int, dst: int) -> bool:
        """A TCP connect from inside ``src``'s container to ``dst``'s inter-broker port."""
        code, _, _ = self.node(src).exec(dp.probe_command(self.node(dst).ip(), dp.INTERNAL_PORT))
        return code == 0
