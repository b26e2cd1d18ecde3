"""The hosts file of the SSH backend: which machines run the brokers, and how to log in.

A TOML file with one ``[[node]]`` table per machine, in node order (node 1 first)::

    [[node]]
    host = "10.0.0.11"          # where the control node's SSH and Kafka clients reach it
    port = 22                   # optional, 22
    user = "root"               # optional, root; otherwise a user with passwordless sudo
    key = "~/.ssh/id_ed25519"   # optional: the agent and default keys are tried without it

A ``[lab]`` table, written by ``python -m harness ssh-lab up``, names the containers that
stand in for machines, so ``ssh-lab down`` finds them; a run ignores it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from common.errors import HarnessError


@dataclass(frozen=True)
class SshHost:
    """One machine: where to reach it and as whom."""

    host: str
    port: int = 22
    user: str = "root"
    key: str | None = None

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class HostsFile:
    path: Path
    hosts: list[SshHost]
    lab: str | None = None


def load_hosts(path: Path | str) -> HostsFile:
    """Parse and check a hosts file; every problem is one line naming the file."""
    p = Path(path).expanduser()
    try:
        data = tomllib.loads(p.read_text())
    except OSError as exc:
        raise HarnessError(f"hosts file {p}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"hosts file {p} is not valid TOML: {exc}") from None
    tables = data.get("node")
    if not isinstance(tables, list) or not tables:
        raise HarnessError(f"hosts file {p} lists no [[node]] (one per machine)")
    hosts = []
    for i, t in enumerate(tables, start=1):
        unknown = set(t) - {"host", "port", "user", "key"}
        if unknown:
            raise HarnessError(f"hosts file {p}, node {i}: unknown key {sorted(unknown)[0]!r}")
        host = t.get("host")
        if not isinstance(host, str) or not host:
            raise HarnessError(f"hosts file {p}, node {i}: host is missing")
        port = t.get("port", 22)
        if not isinstance(port, int) or not 0 < port < 65536:
            raise HarnessError(f"hosts file {p}, node {i}: port must be 1-65535, not {port!r}")
        key = t.get("key")
        if key is not None:
            key = str(Path(str(key)).expanduser())
            if not Path(key).is_file():
                raise HarnessError(f"hosts file {p}, node {i}: key {key} does not exist")
        hosts.append(SshHost(host, port, str(t.get("user", "root")), key))
    seen = {(h.host, h.port) for h in hosts}
    if len(seen) != len(hosts):
        raise HarnessError(f"hosts file {p} lists a machine twice")
    lab = data.get("lab", {}).get("name") if isinstance(data.get("lab"), dict) else None
    return HostsFile(p, hosts, lab)


def render_hosts(hosts: list[SshHost], lab: str | None = None) -> str:
    """The TOML text of a hosts file (what ``ssh-lab up`` writes)."""
    lines = ["# Machines for --backend ssh, node 1 first (docs/substrate.md, the SSH backend).\n"]
    if lab:
        lines.append(f'[lab]\nname = "{lab}"\n\n')
    for h in hosts:
        lines.append(f'[[node]]\nhost = "{h.host}"\nport = {h.port}\nuser = "{h.user}"\n')
        if h.key:
            lines.append(f'key = "{h.key}"\n')
        lines.append("\n")
    return "".join(lines)
