"""Per-node network identities: a private bridge, one namespace per node, iptables cuts.

Each broker runs in its own network namespace with its own IP, so a partition is a real
packet drop between two hosts, not a trick inside a client. Rules live inside the node
namespaces (in a dedicated chain, so heal is one flush), which means deleting a namespace
also deletes its rules: nothing can outlive the cluster.

Without root there are no namespaces; nodes then share loopback (each on its own 127.x
address) and partitions are unavailable. The caller warns about the reduced fidelity.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass

from common.errors import HarnessError

CHAIN = "KH-PART"
SUBNET_BASE = os.environ.get("KAFKA_HARNESS_SUBNET", "10.250")


def _sh(cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise HarnessError(f"{' '.join(cmd)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def namespaces_available() -> bool:
    """Root, `ip` and `iptables` present: the full-fidelity network can be built."""
    return os.geteuid() == 0 and bool(shutil.which("ip")) and bool(shutil.which("iptables"))


def subnet_in_use(slot: int) -> bool:
    """True when the host already routes the slot's subnet (another network owns it)."""
    net = ipaddress.ip_network(f"{SUBNET_BASE}.{slot}.0/24")
    out = _sh(["ip", "-4", "route", "show"], check=False).stdout
    for line in out.splitlines():
        dest = line.split()[0]
        if dest == "default":
            continue
        try:
            if ipaddress.ip_network(dest, strict=False).overlaps(net):
                return True
        except ValueError:
            continue
    return False


@dataclass(frozen=True)
class NodeNet:
    """Where one node lives on the network."""

    node_id: int
    ip: str
    netns: str | None  # None in loopback mode

    def exec_prefix(self) -> list[str]:
        """Prefix that runs a command inside the node's namespace."""
        return ["ip", "netns", "exec", self.netns] if self.netns else []


class BridgeNetwork:
    """A bridge ``kh<slot>br`` with ``<base>.<slot>.1``; node ``i`` at ``<base>.<slot>.<10+i>``."""

    def __init__(self, slot: int, nodes: int) -> None:
        self.slot = slot
        self.bridge = f"kh{slot}br"
        self.gateway = f"{SUBNET_BASE}.{slot}.1"
        self.nodes = [
            NodeNet(i, f"{SUBNET_BASE}.{slot}.{10 + i}", f"kh{slot}n{i}")
            for i in range(1, nodes + 1)
        ]

    @property
    def netns_names(self) -> list[str]:
        return [n.netns for n in self.nodes if n.netns]

    @property
    def link_names(self) -> list[str]:
        return [self.bridge] + [f"kh{self.slot}v{n.node_id}" for n in self.nodes]

    def create(self) -> None:
        _sh(["ip", "link", "add", self.bridge, "type", "bridge"])
        _sh(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge])
        _sh(["ip", "link", "set", self.bridge, "up"])
        for node in self.nodes:
            self._create_node(node)

    def _create_node(self, node: NodeNet) -> None:
        ns = node.netns
        assert ns is not None
        host_side = f"kh{self.slot}v{node.node_id}"
        peer = f"kh{self.slot}p{node.node_id}"
        _sh(["ip", "netns", "add", ns])
        _sh(["ip", "link", "add", host_side, "type", "veth", "peer", "name", peer])
        _sh(["ip", "link", "set", peer, "netns", ns])
        _sh(["ip", "link", "set", host_side, "master", self.bridge])
        _sh(["ip", "link", "set", host_side, "up"])
        _sh(["ip", "-n", ns, "link", "set", peer, "name", "eth0"])
        _sh(["ip", "-n", ns, "addr", "add", f"{node.ip}/24", "dev", "eth0"])
        _sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        _sh(["ip", "-n", ns, "route", "add", "default", "via", self.gateway])
        ipt = ["ip", "netns", "exec", ns, "iptables", "-w"]
        _sh([*ipt, "-N", CHAIN])
        _sh([*ipt, "-I", "INPUT", "-j", CHAIN])
        _sh([*ipt, "-I", "OUTPUT", "-j", CHAIN])

    def forward_rules(self) -> list[list[str]]:
        """Root-namespace FORWARD rules needed when the host's FORWARD policy drops.

        Bridged frames traverse the host's FORWARD chain when br_netfilter is loaded; a host
        with a DROP policy (Docker installs one) would silently cut our nodes apart.
        """
        policy = _sh(["iptables", "-w", "-S", "FORWARD"], check=False).stdout.splitlines()
        if policy and policy[0].strip() == "-P FORWARD ACCEPT":
            return []
        tag = ["-m", "comment", "--comment", f"kafka-harness-slot-{self.slot}"]
        return [
            ["FORWARD", "-i", self.bridge, "-j", "ACCEPT", *tag],
            ["FORWARD", "-o", self.bridge, "-j", "ACCEPT", *tag],
        ]

    def add_root_rules(self, rules: list[list[str]]) -> None:
        for rule in rules:
            _sh(["iptables", "-w", "-I", *rule])

    # --- partitions -------------------------------------------------------------------

    def node(self, node_id: int) -> NodeNet:
        return self.nodes[node_id - 1]

    def cut(self, a: int, b: int) -> None:
        """Drop all packets between nodes ``a`` and ``b``, both ways, in both namespaces."""
        for src, dst in ((a, b), (b, a)):
            ns = self.node(src).netns
            peer_ip = self.node(dst).ip
            ipt = ["ip", "netns", "exec", ns, "iptables", "-w", "-A", CHAIN]
            _sh([*ipt, "-s", peer_ip, "-j", "DROP"])
            _sh([*ipt, "-d", peer_ip, "-j", "DROP"])

    def cut_port(self, node_id: int, port: int) -> None:
        """Drop TCP to and from ``port`` in node ``node_id``'s namespace (healed with the
        partitions)."""
        ns = self.node(node_id).netns
        for flag in ("--dport", "--sport"):
            rule = ["-A", CHAIN, "-p", "tcp", flag, str(port), "-j", "DROP"]
            _sh(["ip", "netns", "exec", ns, "iptables", "-w", *rule])

    def close_listener(self, node_id: int, port: int) -> None:
        """Drop TCP to and from node ``node_id``'s own ``port`` in its namespace: its peers
        cannot reach its listener there, while its own connections to their listeners still
        flow (healed with the partitions)."""
        node = self.node(node_id)
        for ends in (["-d", node.ip, "--dport"], ["-s", node.ip, "--sport"]):
            rule = ["-A", CHAIN, "-p", "tcp", *ends, str(port), "-j", "DROP"]
            _sh(["ip", "netns", "exec", node.netns, "iptables", "-w", *rule])

    def heal(self) -> None:
        for node in self.nodes:
            _sh(["ip", "netns", "exec", node.netns, "iptables", "-w", "-F", CHAIN], check=False)

    def rules(self, node_id: int) -> list[str]:
        """The partition rules currently in a node's chain (for verification and tests)."""
        out = _sh(
            ["ip", "netns", "exec", self.node(node_id).netns, "iptables", "-w", "-S", CHAIN],
            check=False,
        ).stdout
        return [ln for ln in out.splitlines() if ln.startswith("-A")]

    def can_connect(self, src: int, dst_ip: str, port: int, timeout: float = 1.0) -> bool:
        """A real TCP connect from inside node ``src``'s namespace: the probe of a cut."""
        code = (
            "import socket,sys\n"
            f"s=socket.socket();s.settimeout({timeout})\n"
            f"sys.exit(0 if s.connect_ex(('{dst_ip}',{port}))==0 else 1)"
        )
        proc = subprocess.run(
            ["ip", "netns", "exec", self.node(src).netns, "python3", "-c", code],
            capture_output=True,
            check=False,
            timeout=timeout + 10,
        )
        return proc.returncode == 0


class LoopbackNetwork:
    """Fallback without root: node ``i`` at ``127.<100+slot//256>.<slot%256>.<10+i>``."""

    def __init__(self, slot: int, nodes: int) -> None:
        self.slot = slot
        self.nodes = [
            NodeNet(i, f"127.{100 + slot // 256}.{slot % 256}.{10 + i}", None)
            for i in range(1, nodes + 1)
        ]
        self.netns_names: list[str] = []
        self.link_names: list[str] = []

    def create(self) -> None:
        pass

    def forward_rules(self) -> list[list[str]]:
        return []

    def add_root_rules(self, rules: list[list[str]]) -> None:
        pass

    def node(self, node_id: int) -> NodeNet:
        return self.nodes[node_id - 1]

    def cut(self, a: int, b: int) -> None:
        raise HarnessError("partitions need network namespaces (run as root); loopback mode")

    def cut_port(self, node_id: int, port: int) -> None:
        raise HarnessError("cuts need network namespaces (run as root); loopback mode")

    def close_listener(self, node_id: int, port: int) -> None:
        self.cut_port(node_id, port)

    def heal(self) -> None:
        pass

    def rules(self, node_id: int) -> list[str]:
        return []

    def can_connect(self, src: int, dst_ip: str, port: int, timeout: float = 1.0) -> bool:
        import socket

        with socket.socket() as s:
            s.settimeout(timeout)
            return s.connect_ex((dst_ip, port)) == 0
