"""A KRaft cluster in Docker containers, with the same verbs as the process backend.

For machines that have a Docker engine but cannot run the process backend (no Java, no
loopback aliases, macOS). ``DockerCluster`` mirrors the process backend's ``Cluster``: a
context manager whose ``bootstrap`` crosses toxiproxy, with pause/resume (``docker pause``, the
cgroup freezer: the broker stops as under SIGSTOP), kill/start_node (``docker kill`` = SIGKILL, then
``docker start`` on the same data volume), partitions (iptables inside the broker containers,
in a dedicated chain, as the process backend does inside its namespaces), toxics through the
toxiproxy container's API, leader and coordinator look-ups over each broker's published
``OBSERVE`` listener, and at teardown container logs plus a ``DumpLogSegments`` evidence dump.

Never leaking: every network, volume and container carries ``kafka-harness.run=<id>`` and an
owner label (host, pid, process start time). ``reap_docker()`` removes what dead owners left;
each start calls it. Where testcontainers' Ryuk can run, resources also carry its session
label, so the engine removes them soon after the harness dies, even by SIGKILL.

The ``docker`` and ``testcontainers`` libraries (extra ``[docker]``) are imported lazily: the
project imports and its unit tests run without them. Everything here except the unit-tested
logic is unverified on the development machines, which have no Docker engine (see
``docker/README.md``).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from common.procfs import process_start
from common.waits import wait_for
from harness.kafka.versions import DEFAULT_KAFKA_VERSION, KafkaVersion
from harness.kafka.wire import PartitionView, fetch_metadata, fetch_partitions
from harness.substrate.api import ClusterConfig, default_broker_settings, new_cluster_id
from harness.substrate.base import ClusterBase, check_config
from harness.substrate.docker import plan as dp
from harness.substrate.runstate import new_run_id
from harness.substrate.toxiproxy import Toxiproxy

log = logging.getLogger("harness.substrate.docker.cluster")

KAFKA_BIN = "/opt/kafka/bin"
ENGINE_TIMEOUT = 5.0
# Image override for users who build docker/toxiproxy/Dockerfile instead of pulling.
TOXIPROXY_IMAGE_ENV = "KAFKA_HARNESS_TOXIPROXY_IMAGE"


def _is_not_found(exc: BaseException) -> bool:
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


def ryuk_labels(image: str) -> dict[str, str]:
    """Start testcontainers' Ryuk (once per process) and return its session labels.

    Empty when Ryuk is disabled (``TESTCONTAINERS_RYUK_DISABLED``) or cannot start: the
    owner labels and ``reap_docker`` still clean up, only later (at the next start).
    """
    try:
        from testcontainers.core.config import testcontainers_config
        from testcontainers.core.container import Reaper
        from testcontainers.core.labels import LABEL_SESSION_ID, create_labels
    except ImportError:
        return {}
    if testcontainers_config.ryuk_disabled:
        return {}
    try:
        Reaper.get_instance()
    except Exception as exc:
        log.warning("testcontainers' Ryuk did not start (%s); relying on reap_docker", exc)
        return {}
    return {LABEL_SESSION_ID: create_labels(image, None)[LABEL_SESSION_ID]}


def parse_leader_id(text: str) -> int:
    """``LeaderId`` from ``kafka-metadata-quorum.sh describe --status``."""
    m = re.search(r"^LeaderId:\s*(\d+)", text, re.M)
    if not m:
        raise HarnessError(f"no LeaderId in metadata quorum status: {text.strip()[:200]}")
    return int(m.group(1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# --- one broker container ---------------------------------------------------------------


@dataclass(eq=False)
class DockerNode:
    """A broker container with the process backend's node verbs (pause, kill, stop...)."""

    plan: dp.NodePlan
    cluster: DockerCluster

    @property
    def node_id(self) -> int:
        return self.plan.node_id

    @property
    def name(self) -> str:
        return self.plan.container

    @property
    def internal_address(self) -> str:
        """Where the harness reaches this broker directly (the published OBSERVE listener)."""
        return f"{self.cluster.host_ip}:{self.plan.observe_port}"

    def container(self) -> Any:
        return self.cluster.client.containers.get(self.name)

    def status(self) -> str | None:
        try:
            return str(self.container().status)
        except Exception as exc:
            if _is_not_found(exc):
                return None
            raise

    def state(self) -> str | None:
        return dp.state_letter(self.status())

    def alive(self) -> bool:
        return self.status() in ("running", "paused", "restarting")

    def ip(self) -> str:
        """The container's address on the cluster network (changes when it restarts)."""
        nets = self.container().attrs["NetworkSettings"]["Networks"]
        return str(nets[self.cluster.plan_or_fail().network]["IPAddress"])

    def exec(self, cmd: list[str]) -> tuple[int, str, str]:
        """Run ``cmd`` as root in the container; (exit code, stdout, stderr)."""
        res = self.container().exec_run(cmd, user="root", demux=True)
        code, output = res[0], res[1]
        out, err = output if isinstance(output, tuple) else (output, b"")
        return (
            int(code if code is not None else -1),
            (out or b"").decode(errors="replace"),
            (err or b"").decode(errors="replace"),
        )

    def must_exec(self, cmd: list[str]) -> str:
        code, out, err = self.exec(cmd)
        if code != 0:
            detail = (err.strip() or out.strip()).splitlines()[-1:] or ["?"]
            raise HarnessError(
                f"{' '.join(cmd[:4])} in {self.name} failed ({code}): {detail[0][:200]}"
            )
        return out

    def pause(self) -> None:
        """``docker pause`` (cgroup freezer), verified like SIGSTOP: state T."""
        if not self.alive():
            raise HarnessError(f"node {self.node_id} is not running")
        self.container().pause()
        wait_for(lambda: self.state() == "T", timeout=10, what=f"node {self.node_id} paused")

    def resume(self) -> None:
        self.container().unpause()
        wait_for(lambda: self.state() != "T", timeout=10, what=f"node {self.node_id} unpaused")

    def kill(self) -> None:
        """SIGKILL the broker: no shutdown hooks, as ``kill -9`` in the process backend."""
        if not self.alive():
            return
        c = self.container()
        if c.status == "paused":
            c.unpause()  # an engine may refuse to kill a frozen container
        c.kill()
        wait_for(lambda: not self.alive(), timeout=30, what=f"node {self.node_id} gone")

    def stop(self, timeout: float = 30.0) -> bool:
        """Clean shutdown (SIGTERM, SIGKILL after ``timeout``); True if it ended cleanly."""
        if not self.alive():
            return True
        c = self.container()
        if c.status == "paused":
            c.unpause()
        c.stop(timeout=int(timeout))
        code = self.container().attrs.get("State", {}).get("ExitCode")
        return code != 137

    def start(self) -> None:
        if self.alive():
            raise HarnessError(f"node {self.node_id} is already running")
        self.container().start()
        wait_for(lambda: self.status() == "running", timeout=30, what=f"{self.name} running")
        for cmd in dp.chain_setup_commands():
            self.must_exec(cmd)


# --- the cluster ------------------------------------------------------------------------


class DockerCluster(ClusterBase[DockerNode]):
    """``with DockerCluster(ClusterConfig(...)) as c:``; ``harness.substrate.api.Cluster``."""

    def __init__(
        self,
        config: ClusterConfig | None = None,
        *,
        client: Any = None,
        use_ryuk: bool = True,
        **kwargs: Any,
    ) -> None:
        self.config = config or ClusterConfig(**kwargs)
        check_config(self.config)
        self.client = client
        self.use_ryuk = use_ryuk
        self.run_id = new_run_id()
        self.cluster_id = new_cluster_id()
        self.kafka_version = self.config.kafka_version or DEFAULT_KAFKA_VERSION
        self.install = None  # no local Kafka: tools run inside the containers
        self.slot = None  # no host slot: names derive from the run id, ports from the OS
        self.host_ip = "127.0.0.1"
        self.plan: dp.ClusterPlan | None = None
        self.nodes: list[DockerNode] = []
        self.toxiproxy: Toxiproxy | None = None
        self.settings: dict[str, str] = {}
        self.dir: Path | None = None
        self.timings: dict[str, float] = {}
        self.extra_labels: dict[str, str] = {}
        self._admin: Any = None
        self._cut: set[int] = set()
        self._pairs: list[tuple[int, int]] = []
        self._created: list[tuple[str, str]] = []  # (kind, name), in creation order
        self._stopped = False
        self._old_sigterm: Any = None

    # --- lifecycle --------------------------------------------------------------------

    @property
    def uses_netns(self) -> bool:
        """Partitions between brokers are possible (iptables inside the containers)."""
        return True

    def plan_or_fail(self) -> dp.ClusterPlan:
        if self.plan is None:
            raise HarnessError("the Docker cluster is not started")
        return self.plan

    def make_plan(self) -> dp.ClusterPlan:
        """The cluster's plan: ports picked on the host, settings merged, names derived."""
        cfg = self.config
        ports = dp.allocate_ports(cfg.nodes, cfg.base_port, _port_free, _free_port)
        self.settings = default_broker_settings(cfg.nodes)
        self.settings.update(cfg.broker_settings)
        return dp.plan_cluster(
            self.run_id,
            owner_token(),
            self.cluster_id,
            self.kafka_version,
            ports,
            self.settings,
            transaction_version=cfg.transaction_version,
            host_ip=self.host_ip,
            toxiproxy_image=os.environ.get(TOXIPROXY_IMAGE_ENV, dp.TOXIPROXY_IMAGE),
        )

    def _labelled(self, spec: dict[str, Any]) -> dict[str, Any]:
        return {**spec, "labels": {**spec["labels"], **self.extra_labels}}

    def start(self) -> None:
        t0 = time.monotonic()
        cfg = self.config
        if (
            cfg.transaction_version is not None
            and not KafkaVersion(self.kafka_version).supports_transaction_version
        ):
            raise HarnessError(
                f"Kafka {self.kafka_version} has no transaction.version feature (4.x only)"
            )
        if self.client is None:
            self.client = connect_engine()
        reap_docker(self.client)
        self._install_signal_handlers()
        atexit.register(self.stop)
        plan = self.plan = self.make_plan()
        if self.use_ryuk:
            self.extra_labels = ryuk_labels(plan.broker_image)
        self.dir = Path(cfg.store or Path("store") / "clusters" / self.run_id).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "cluster.json").write_text(
            json.dumps({"run_id": self.run_id, "cluster_id": self.cluster_id, "backend": "docker"})
        )
        for n in plan.nodes:
            node_dir = self.dir / "nodes" / f"n{n.node_id}"
            node_dir.mkdir(parents=True, exist_ok=True)
            props = dp.node_properties(plan, n.node_id)
            (node_dir / "server.properties").write_text(dp.render_properties(props))
        self._ensure_images(plan)
        self.timings["images"] = time.monotonic() - t0

        self.client.networks.create(**self._labelled(dp.network_spec(plan)))
        self._created.append(("network", plan.network))
        for n in plan.nodes:
            self.client.volumes.create(**self._labelled(dp.volume_spec(plan, n.node_id)))
            self._created.append(("volume", n.volume))
        self._created.append(("container", plan.toxiproxy))
        self.client.containers.run(**self._labelled(dp.toxiproxy_container_spec(plan)))
        self.toxiproxy = Toxiproxy(Path("toxiproxy"), plan.api_port, self.dir / "toxiproxy.log", {})
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
            node = DockerNode(n, self)
            for cmd in dp.chain_setup_commands():
                node.must_exec(cmd)
            self.nodes.append(node)
        self.timings["containers"] = time.monotonic() - t0
        self.wait_ready(cfg.ready_timeout)
        self.timings["ready"] = time.monotonic() - t0
        log.info("docker cluster %s ready in %.1fs", self.run_id, self.timings["ready"])

    def _ensure_images(self, plan: dp.ClusterPlan) -> None:
        """Build the broker image from ``docker/broker`` and pull toxiproxy, if missing."""
        images = self.client.images
        try:
            images.get(plan.broker_image)
        except Exception as exc:
            if not _is_not_found(exc):
                raise
            context = dp.docker_dir() / "broker"
            if not (context / "Dockerfile").exists():
                raise HarnessError(f"no broker Dockerfile at {context}") from None
            try:
                images.build(
                    path=str(context),
                    tag=plan.broker_image,
                    buildargs=dp.broker_build_args(plan.kafka_version),
                    rm=True,
                )
            except Exception as build_exc:
                first = (str(build_exc).strip().splitlines() or ["?"])[0]
                raise HarnessError(
                    f"building {plan.broker_image} (FROM apache/kafka:{plan.kafka_version}) "
                    f"failed: {first[:200]}"
                ) from None
        try:
            images.get(plan.toxiproxy_image)
        except Exception as exc:
            if not _is_not_found(exc):
                raise
            repo, _, tag = plan.toxiproxy_image.rpartition(":")
            images.pull(repo, tag=tag)

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Every broker registered and unfenced, then a transaction through toxiproxy."""
        deadline = time.monotonic() + timeout
        want = {n.node_id for n in self.nodes}

        def all_registered() -> bool:
            for node in self.nodes:
                if not node.alive():
                    raise HarnessError(
                        f"node {node.node_id} exited during start-up; see docker logs {node.name}"
                    )
            return self.registered_brokers() == want

        wait_for(all_registered, timeout=timeout, what=f"brokers {sorted(want)} unfenced")
        from harness.kafka.readiness import transactional_round_trip

        transactional_round_trip(self, max(5.0, deadline - time.monotonic()))  # type: ignore[arg-type]

    def stop(self) -> None:
        """Heal, save logs, kill brokers, dump segments, remove everything. Idempotent."""
        if not self._first_stop():
            return
        t0 = time.monotonic()
        self._admin = None
        if self.client is not None and self.plan is not None:
            try:
                self.heal_all()
            except Exception as exc:
                log.warning("heal during stop failed: %s", exc)
            self._save_logs()
            for node in self.nodes:
                try:
                    node.kill()
                except Exception as exc:
                    log.warning("killing %s failed: %s", node.name, exc)
            self.timings["stop_nodes"] = time.monotonic() - t0
            if self.config.dump_logs and self.nodes and self.dir is not None:
                try:
                    self.dump_log_segments()
                except Exception as exc:
                    log.warning("log segment dump failed: %s", exc)
            self.timings["dump"] = time.monotonic() - t0
            self._remove_created()
        self._restore_signal_handlers()
        self.timings["teardown"] = time.monotonic() - t0

    def _remove_created(self) -> None:
        """Containers first (they hold the volumes and the network), then the rest."""
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
                if not _is_not_found(exc):
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

    def dump_log_segments(self) -> Path:
        """``evidence/logdump.jsonl`` in the process backend's format, dumped in a helper
        container that mounts every node's data volume (the brokers are dead by then)."""
        from harness.substrate.evidence import _KIND_ARGS, parse_dump
        from history.logdump_format import header

        plan = self.plan_or_fail()
        assert self.dir is not None
        spec = self._labelled(dp.dump_container_spec(plan))
        self._created.append(("container", spec["name"]))
        helper = self.client.containers.run(**spec)
        out_dir = self.dir / "evidence"
        out_dir.mkdir(parents=True, exist_ok=True)
        out = out_dir / "logdump.jsonl"
        with open(out, "w") as fh:
            fh.write(json.dumps(header(len(plan.nodes))) + "\n")
            for n in plan.nodes:
                res = helper.exec_run(["find", f"/dump/n{n.node_id}", "-name", "*.log"])
                listing = (res[1] or b"").decode(errors="replace").split()
                for kind, files in dp.classify_segments(listing).items():
                    if not files:
                        continue
                    cmd = [
                        f"{KAFKA_BIN}/kafka-dump-log.sh",
                        "--deep-iteration",
                        *_KIND_ARGS[kind],
                        "--files",
                        ",".join(files),
                    ]
                    code, output = helper.exec_run(cmd, demux=True)[:2]
                    text = (output[0] if isinstance(output, tuple) else output) or b""
                    if code != 0:
                        log.warning("dumping %s of node %s failed (%s)", kind, n.node_id, code)
                        continue
                    for row in parse_dump(text.decode(errors="replace"), n.node_id):
                        row["kind"] = kind
                        fh.write(json.dumps(row, separators=(",", ":")) + "\n")
        return out

    # --- addresses and clients ---------------------------------------------------------

    def proxy_name(self, node_id: int) -> str:
        return dp.proxy_name(node_id)

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

    # The admin client, node verbs and the "freshest view" rules are the process backend's,
    # shared through ClusterBase so the two backends cannot drift apart.

    # --- look-ups ---------------------------------------------------------------------

    def _askable(self, exclude_cut: bool) -> list[DockerNode]:
        nodes = [n for n in self.nodes if not (exclude_cut and n.node_id in self._cut)]
        return [n for n in nodes or self.nodes if n.status() == "running"]

    def registered_brokers(self) -> set[int]:
        """Intersection of every answering broker's live-broker list (see Cluster)."""
        views = []
        for node in self._askable(exclude_cut=True):
            try:
                views.append(
                    fetch_metadata(self.host_ip, node.plan.observe_port, [], node.node_id)[0]
                )
            except (OSError, struct.error):
                continue
        if not views:
            raise HarnessError("no live broker answered a metadata request")
        return set.intersection(*views)

    def partition_views(self, topic: str, partition: int) -> list[PartitionView]:
        views = []
        for node in self._askable(exclude_cut=False):
            try:
                got = fetch_partitions(self.host_ip, node.plan.observe_port, [topic], node.node_id)
            except OSError:
                continue
            view = got.get((topic, partition))
            if view is not None and view.error == 0:
                views.append(view)
        return views

    def active_controller(self) -> int:
        """The quorum leader, asked with Kafka's own tool inside a running broker."""
        for node in self._askable(exclude_cut=True):
            code, out, _ = node.exec(
                [
                    f"{KAFKA_BIN}/kafka-metadata-quorum.sh",
                    "--bootstrap-server",
                    f"localhost:{dp.INTERNAL_PORT}",
                    "describe",
                    "--status",
                ]
            )
            if code == 0:
                return parse_leader_id(out)
        raise HarnessError("no running broker could describe the metadata quorum")

    # --- node control -----------------------------------------------------------------

    def start_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Start the container again on its volume, re-apply partitions, wait registered.

        A restarted container gets a fresh network namespace (its iptables rules are gone)
        and possibly a new address (its peers' rules are stale), so every cut is re-applied.
        """
        self.node(node_id).start()
        if self._pairs:
            self._apply_cuts()
        wait_for(
            lambda: node_id in self.registered_brokers(),
            timeout=timeout,
            what=f"node {node_id} registered after restart",
        )

    # --- network faults ---------------------------------------------------------------

    def _apply_cuts(self) -> None:
        running = {n.node_id: n for n in self.nodes if n.status() == "running"}
        ips = {i: n.ip() for i, n in running.items()}
        for n in running.values():
            n.must_exec(dp.heal_command())
        for a, b in self._pairs:
            for src, dst in ((a, b), (b, a)):
                if src in running and dst in ips:
                    for cmd in dp.cut_commands(ips[dst]):
                        running[src].must_exec(cmd)

    def partition(self, *groups: list[int]) -> None:
        """Cut every node of each group from every node of every other group (iptables)."""
        for g in groups:
            for i in g:
                self.node(i)
        self._pairs.extend(p for p in dp.partition_pairs(groups) if p not in self._pairs)
        self._apply_cuts()
        largest = max(groups, key=len)
        for g in groups:
            if g is not largest:
                self._cut.update(g)

    def heal(self) -> None:
        for n in self.nodes:
            if n.status() == "running":
                n.must_exec(dp.heal_command())
        self._pairs.clear()
        self._cut.clear()

    def can_reach(self, src: int, dst: int) -> bool:
        """A TCP connect from inside ``src``'s container to ``dst``'s inter-broker port."""
        code, _, _ = self.node(src).exec(dp.probe_command(self.node(dst).ip(), dp.INTERNAL_PORT))
        return code == 0

    def _proxy(self) -> Toxiproxy:
        if self.toxiproxy is None:
            raise HarnessError("toxiproxy is not running")
        return self.toxiproxy

    def add_toxic(
        self, node_id: int, kind: str, attributes: dict[str, Any] | None = None, **kw: Any
    ) -> str:
        return self._proxy().add_toxic(self.proxy_name(node_id), kind, attributes, **kw)

    def remove_toxic(self, node_id: int, name: str) -> None:
        self._proxy().remove_toxic(self.proxy_name(node_id), name)

    def proxy_down(self, node_id: int) -> None:
        self._proxy().set_enabled(self.proxy_name(node_id), False)

    def proxy_up(self, node_id: int) -> None:
        self._proxy().set_enabled(self.proxy_name(node_id), True)

    def heal_all(self) -> None:
        """Undo every fault: unpause, flush partition chains, drop toxics."""
        self._resume_paused()
        self.heal()
        if self.toxiproxy is not None:
            self.toxiproxy.reset()
