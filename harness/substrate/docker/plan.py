"""What a Docker-backed cluster is made of, as pure data: names, ports, configs, container specs.

Everything the Docker backend asks the engine to create is computed here first, without an
engine, so that the parts that decide correctness (who advertises what, which proxy points
where, which labels make a leftover findable) are unit-tested on machines with no Docker.

Layout of one cluster (run id ``R``, resource prefix ``kh-R``):

- network ``kh-R`` (bridge); every broker and the toxiproxy container join it;
- broker ``kh-R-nI``: combined broker+controller, listeners ``CLIENT`` :9092 (reached only
  through toxiproxy, advertised as ``127.0.0.1:<proxy port>``), ``INTERNAL`` :9093
  (inter-broker, advertised by container name), ``CONTROLLER`` :9094 (quorum) and ``OBSERVE``
  :9095 (published to the host, advertised as ``127.0.0.1:<observe port>``: the harness's own
  direct path for look-ups and admin calls, which must not cross the toxics);
- toxiproxy ``kh-R-toxiproxy``: API on 8474 and proxy ``nI`` listening on ``0.0.0.0:<proxy
  port>`` with upstream ``kh-R-nI:9092``; both published to the same port numbers on the host,
  so what a broker advertises is exactly where a client on the host connects;
- volume ``kh-R-nI-data``: the node's log dirs, so a killed container restarts on its data
  and the log-segment dump can read it after the brokers are gone.

Every container runs the one runtime image (``docker.images``: Debian, Java 17, iptables);
Kafka's jars (``kafka_libs``, the Maven-resolved installation) are bind-mounted read-only at
``/opt/kafka/libs`` and toxiproxy's server (``toxiproxy_bin``, the harness's Go build) at
``/usr/local/bin/toxiproxy-server``, so no image is ever pulled.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from harness.substrate.process.node import render_properties
from harness.substrate.toxiproxy import proxy_name

LABEL_RUN = "kafka-harness.run"
LABEL_ROLE = "kafka-harness.role"
LABEL_NODE = "kafka-harness.substrate.process.node"
LABEL_OWNER = "kafka-harness.owner"  # "<hostname>:<pid>" of the harness that made it

CLIENT_PORT = 9092
INTERNAL_PORT = 9093
CONTROLLER_PORT = 9094
OBSERVE_PORT = 9095
TOXIPROXY_API_PORT = 8474
DATA_DIR = "/var/lib/kafka/data"
PARTITION_CHAIN = "KH-PART"

KAFKA_LIBS = "/opt/kafka/libs"
SECURITY_DIR = "/etc/kafka-harness/security"
TOXIPROXY_BIN = "/usr/local/bin/toxiproxy-server"
#: Logging of Kafka's tools inside the containers (warnings to stderr), per log4j flavour.
TOOLS_LOG4J2 = "-Dlog4j2.configurationFile=/etc/kafka-harness/tools-log4j2.properties"
TOOLS_LOG4J1 = "-Dlog4j.configuration=file:/etc/kafka-harness/tools-log4j.properties"

# Same sizing as the process backend's JVMs (process/node.py JVM_OPTS): several brokers share
# two cores with the clients under test, so start-up beats peak throughput.
BROKER_HEAP_OPTS = "-Xms256m -Xmx512m"
BROKER_JVM_OPTS = (
    "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -XX:+ExitOnOutOfMemoryError "
    "-Djava.awt.headless=true"
)


def docker_dir() -> Path:
    """The repository's ``docker/`` folder (image build contexts, compose example)."""
    return Path(__file__).resolve().parents[3] / "docker"


def resource_prefix(run_id: str) -> str:
    """``kh-<run id>``, lower-cased and restricted to what Docker names and DNS accept."""
    safe = re.sub(r"[^a-z0-9-]", "-", run_id.lower()).strip("-")
    if not safe:
        raise HarnessError(f"run id {run_id!r} gives no usable Docker name")
    return f"kh-{safe}"


def labels(run_id: str, role: str, owner: str, node: int | None = None) -> dict[str, str]:
    """Labels on every resource: the run (for the reaper), its role, its owner process."""
    out = {LABEL_RUN: run_id, LABEL_ROLE: role, LABEL_OWNER: owner}
    if node is not None:
        out[LABEL_NODE] = str(node)
    return out


def allocate_ports(
    nodes: int, base_port: int | None, is_free: Callable[[int], bool], pick: Callable[[], int]
) -> list[int]:
    """``2 * nodes + 1`` host ports: toxiproxy API, one proxy per node, one observe per node.

    With ``base_port`` they are contiguous from it (as in the process backend: the API first,
    proxies next) and must all be free; otherwise each is an ephemeral port the OS picked.
    """
    count = 2 * nodes + 1
    if base_port is not None:
        ports = list(range(base_port, base_port + count))
        taken = [p for p in ports if not is_free(p)]
        if taken:
            raise HarnessError(
                f"port {taken[0]} on 127.0.0.1 is in use; choose another --base-port"
            )
        return ports
    ports: list[int] = []
    while len(ports) < count:
        p = pick()
        if p not in ports:
            ports.append(p)
    return ports


@dataclass(frozen=True)
class NodePlan:
    """One broker container: its name (also its DNS name on the network) and host ports."""

    node_id: int
    container: str
    volume: str
    proxy_port: int
    observe_port: int

    @property
    def internal_address(self) -> str:
        return f"{self.container}:{INTERNAL_PORT}"

    @property
    def upstream(self) -> str:
        return f"{self.container}:{CLIENT_PORT}"


@dataclass(frozen=True)
class ClusterPlan:
    """Every name, port and image of one Docker-backed cluster."""

    run_id: str
    owner: str
    cluster_id: str
    kafka_version: str
    transaction_version: int | None
    network: str
    toxiproxy: str
    api_port: int
    nodes: tuple[NodePlan, ...]
    settings: dict[str, str] = field(default_factory=dict)
    host_ip: str = "127.0.0.1"
    #: The runtime image every container of the cluster runs (``docker.images``).
    image: str = ""
    #: Host paths bind-mounted read-only: the Kafka jars and toxiproxy's server binary.
    kafka_libs: str = ""
    toxiproxy_bin: str = ""
    #: A secured cluster's (``--security``): each node's settings over ``settings``, the
    #: directory of its certificates (mounted read-only at ``SECURITY_DIR``) and the format
    #: arguments that create its SCRAM users.
    security_settings: dict[int, dict[str, str]] = field(default_factory=dict)
    security_dir: str = ""
    security_format_args: tuple[str, ...] = ()

    def node(self, node_id: int) -> NodePlan:
        if not 1 <= node_id <= len(self.nodes):
            raise HarnessError(f"no node {node_id} (cluster has {len(self.nodes)})")
        return self.nodes[node_id - 1]


def plan_cluster(
    run_id: str,
    owner: str,
    cluster_id: str,
    kafka_version: str,
    ports: list[int],
    settings: dict[str, str],
    transaction_version: int | None = None,
    host_ip: str = "127.0.0.1",
    image: str = "",
    kafka_libs: str = "",
    toxiproxy_bin: str = "",
    prefix: str | None = None,
) -> ClusterPlan:
    """The plan for ``(len(ports) - 1) // 2`` nodes; see the module docstring for the layout."""
    if len(ports) < 3 or len(ports) % 2 == 0:
        raise HarnessError(f"need 2 * nodes + 1 ports, got {len(ports)}")
    n = (len(ports) - 1) // 2
    prefix = prefix or resource_prefix(run_id)
    nodes = tuple(
        NodePlan(
            node_id=i,
            container=f"{prefix}-n{i}",
            volume=f"{prefix}-n{i}-data",
            proxy_port=ports[i],
            observe_port=ports[n + i],
        )
        for i in range(1, n + 1)
    )
    return ClusterPlan(
        run_id=run_id,
        owner=owner,
        cluster_id=cluster_id,
        kafka_version=kafka_version,
        transaction_version=transaction_version,
        network=prefix,
        toxiproxy=f"{prefix}-toxiproxy",
        api_port=ports[0],
        nodes=nodes,
        settings=dict(settings),
        host_ip=host_ip,
        image=image,
        kafka_libs=kafka_libs,
        toxiproxy_bin=toxiproxy_bin,
    )


COMPOSE_CLUSTER_ID = "a2hhcm5lc3MtZXhhbXBsZQ"  # base64url of the 16 bytes "kharness-example"


def compose_plan(kafka_version: str, nodes: int = 3) -> ClusterPlan:
    """The layout of ``docker/compose.yaml``: services ``kafka-nI`` and ``kafka-toxiproxy``,
    API on 8474, proxies on 22001.., observe listeners on 23001.. (fixed, for humans)."""
    from harness.substrate.api import default_broker_settings

    ports = [TOXIPROXY_API_PORT]
    ports += [22000 + i for i in range(1, nodes + 1)]
    ports += [23000 + i for i in range(1, nodes + 1)]
    return plan_cluster(
        "compose-example",
        "compose",
        COMPOSE_CLUSTER_ID,
        kafka_version,
        ports,
        default_broker_settings(nodes),
        prefix="kafka",
    )


def compose_files(plan: ClusterPlan) -> dict[str, str]:
    """The files ``docker/compose.yaml`` mounts, rendered from ``plan`` (kept in sync by a
    unit test): each node's ``server.properties`` and toxiproxy's proxy list."""
    files = {
        f"n{n.node_id}.properties": render_properties(node_properties(plan, n.node_id))
        for n in plan.nodes
    }
    files["toxiproxy.json"] = json.dumps(proxy_definitions(plan), indent=2) + "\n"
    return files


# --- broker configuration -------------------------------------------------------------


def quorum_voters(plan: ClusterPlan) -> str:
    """The static KRaft voter set: every node, by container name, on its controller port."""
    return ",".join(f"{n.node_id}@{n.container}:{CONTROLLER_PORT}" for n in plan.nodes)


def node_properties(plan: ClusterPlan, node_id: int) -> dict[str, str]:
    """One node's ``server.properties``; the run's settings override the base keys."""
    node = plan.node(node_id)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": quorum_voters(plan),
        "listeners": (
            f"CLIENT://0.0.0.0:{CLIENT_PORT},INTERNAL://0.0.0.0:{INTERNAL_PORT},"
            f"CONTROLLER://0.0.0.0:{CONTROLLER_PORT},OBSERVE://0.0.0.0:{OBSERVE_PORT}"
        ),
        # CLIENT is advertised as the node's toxiproxy proxy, so every client connection,
        # including the ones metadata redirects, crosses toxiproxy.
        "advertised.listeners": (
            f"CLIENT://{plan.host_ip}:{node.proxy_port},"
            f"INTERNAL://{node.internal_address},"
            f"OBSERVE://{plan.host_ip}:{node.observe_port}"
        ),
        "listener.security.protocol.map": (
            "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,OBSERVE:PLAINTEXT"
        ),
        "inter.broker.listener.name": "INTERNAL",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": DATA_DIR,
    }
    props.update(plan.settings)
    props.update(plan.security_settings.get(node_id, {}))
    return props


def format_args(plan: ClusterPlan) -> str:
    """Extra ``kafka-storage.sh format`` arguments (the transaction.version feature, 4.x)."""
    tv = plan.transaction_version
    words = [] if tv is None else [f"--feature transaction.version={tv}"]
    return " ".join([*words, *plan.security_format_args])


def broker_environment(plan: ClusterPlan, node_id: int) -> dict[str, str]:
    """What the image's entrypoint reads: the config (base64, no bind mount needed: works with
    an engine whose file system is not ours), the cluster id and the JVM sizing."""
    text = render_properties(node_properties(plan, node_id))
    return {
        "KH_SERVER_PROPERTIES": base64.b64encode(text.encode()).decode(),
        "KH_CLUSTER_ID": plan.cluster_id,
        "KH_FORMAT_ARGS": format_args(plan),
        "KAFKA_HEAP_OPTS": BROKER_HEAP_OPTS,
        "KAFKA_JVM_PERFORMANCE_OPTS": BROKER_JVM_OPTS,
    }


# --- toxiproxy ------------------------------------------------------------------------


def proxy_definitions(plan: ClusterPlan) -> list[dict[str, Any]]:
    """One proxy per node: listen on the published port, forward to the broker's CLIENT."""
    return [
        {
            "name": proxy_name(n.node_id),
            "listen": f"0.0.0.0:{n.proxy_port}",
            "upstream": n.upstream,
            "enabled": True,
        }
        for n in plan.nodes
    ]


# --- engine objects ---------------------------------------------------------------------


def network_spec(plan: ClusterPlan) -> dict[str, Any]:
    """Keyword arguments of ``client.networks.create``."""
    return {
        "name": plan.network,
        "driver": "bridge",
        "labels": labels(plan.run_id, "network", plan.owner),
    }


def volume_spec(plan: ClusterPlan, node_id: int) -> dict[str, Any]:
    """Keyword arguments of ``client.volumes.create``: labelled, so the reaper finds it."""
    return {
        "name": plan.node(node_id).volume,
        "labels": labels(plan.run_id, "data", plan.owner, node_id),
    }


def broker_container_spec(plan: ClusterPlan, node_id: int) -> dict[str, Any]:
    """Keyword arguments of ``client.containers.run`` for one broker."""
    node = plan.node(node_id)
    return {
        "image": plan.image,
        "name": node.container,
        "hostname": node.container,
        "detach": True,
        "network": plan.network,
        "labels": labels(plan.run_id, "broker", plan.owner, node_id),
        "environment": broker_environment(plan, node_id),
        "volumes": {
            node.volume: {"bind": DATA_DIR, "mode": "rw"},
            plan.kafka_libs: {"bind": KAFKA_LIBS, "mode": "ro"},
            **(
                {plan.security_dir: {"bind": SECURITY_DIR, "mode": "ro"}}
                if plan.security_dir
                else {}
            ),
        },
        "ports": {f"{OBSERVE_PORT}/tcp": (plan.host_ip, node.observe_port)},
        # iptables inside the container is how partitions are cut (see PARTITION_CHAIN).
        "cap_add": ["NET_ADMIN"],
    }


def toxiproxy_container_spec(plan: ClusterPlan) -> dict[str, Any]:
    """Keyword arguments of ``client.containers.run`` for the toxiproxy server."""
    ports: dict[str, tuple[str, int]] = {f"{TOXIPROXY_API_PORT}/tcp": (plan.host_ip, plan.api_port)}
    for n in plan.nodes:
        ports[f"{n.proxy_port}/tcp"] = (plan.host_ip, n.proxy_port)
    return {
        "image": plan.image,
        "name": plan.toxiproxy,
        "detach": True,
        "network": plan.network,
        "labels": labels(plan.run_id, "toxiproxy", plan.owner),
        "entrypoint": [TOXIPROXY_BIN],
        "command": ["-host=0.0.0.0", f"-port={TOXIPROXY_API_PORT}"],
        "volumes": {plan.toxiproxy_bin: {"bind": TOXIPROXY_BIN, "mode": "ro"}},
        "ports": ports,
    }


def dump_container_spec(plan: ClusterPlan) -> dict[str, Any]:
    """A helper container that mounts every node's data volume read-only at ``/dump/nI``.

    The log-segment dump runs in it after the brokers are killed, as the process backend
    dumps after its JVMs are gone: the files are then final.
    """
    volumes = {n.volume: {"bind": f"/dump/n{n.node_id}", "mode": "ro"} for n in plan.nodes}
    volumes[plan.kafka_libs] = {"bind": KAFKA_LIBS, "mode": "ro"}
    return {
        "image": plan.image,
        "name": f"{resource_prefix(plan.run_id)}-dump",
        "detach": True,
        "entrypoint": ["sleep", "3600"],
        "network_disabled": True,
        "labels": labels(plan.run_id, "dump", plan.owner),
        "volumes": volumes,
    }


def tool_exec_command(kafka_version: str, main_class: str, args: list[str]) -> list[str]:
    """A Kafka tool run from the mounted jars inside a container of the runtime image."""
    log_opt = TOOLS_LOG4J2 if int(kafka_version.split(".")[0]) >= 4 else TOOLS_LOG4J1
    return [
        "java",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Xmx512m",
        log_opt,
        "-cp",
        f"{KAFKA_LIBS}/*",
        main_class,
        *args,
    ]


# --- faults -----------------------------------------------------------------------------


def chain_setup_commands() -> list[list[str]]:
    """Create the partition chain and hook it into INPUT and OUTPUT (idempotent via ``-C``)."""
    ipt = ["iptables", "-w"]
    return [
        ["sh", "-c", f"iptables -w -N {PARTITION_CHAIN} 2>/dev/null || true"],
        [
            "sh",
            "-c",
            f"iptables -w -C INPUT -j {PARTITION_CHAIN} 2>/dev/null "
            f"|| iptables -w -I INPUT -j {PARTITION_CHAIN}",
        ],
        [
            "sh",
            "-c",
            f"iptables -w -C OUTPUT -j {PARTITION_CHAIN} 2>/dev/null "
            f"|| iptables -w -I OUTPUT -j {PARTITION_CHAIN}",
        ],
        [*ipt, "-F", PARTITION_CHAIN],
    ]


def cut_commands(peer_ip: str) -> list[list[str]]:
    """Drop everything to and from ``peer_ip`` (run inside one container; the caller runs it
    in both, so the cut is symmetric even for packets already in flight)."""
    ipt = ["iptables", "-w", "-A", PARTITION_CHAIN]
    return [[*ipt, "-s", peer_ip, "-j", "DROP"], [*ipt, "-d", peer_ip, "-j", "DROP"]]


def heal_command() -> list[str]:
    return ["iptables", "-w", "-F", PARTITION_CHAIN]


def probe_command(host: str, port: int, timeout: int = 1) -> list[str]:
    """A TCP connect from inside a container (netcat-openbsd is in the broker image)."""
    return ["nc", "-z", "-w", str(timeout), host, str(port)]


def partition_pairs(groups: tuple[list[int], ...]) -> list[tuple[int, int]]:
    """Every (a, b) with a and b in different groups, each unordered pair once."""
    pairs = []
    for i, g in enumerate(groups):
        for h in groups[i + 1 :]:
            pairs.extend((a, b) for a in g for b in h)
    return pairs


def state_letter(status: str | None) -> str | None:
    """A container status as the process backend's one-letter state (``T`` = paused)."""
    if status == "paused":
        return "T"
    if status in ("running", "restarting"):
        return "S"
    return None
