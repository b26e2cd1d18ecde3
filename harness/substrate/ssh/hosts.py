"""The hosts file of the SSH backend: which machines run the brokers, how to log in, and
which host keys are theirs.

A TOML file with one ``[[node]]`` table per machine, in node order (node 1 first)::

    known_hosts = "hosts.known_hosts"  # optional; relative to this file; this is the default

    [[node]]
    host = "10.0.0.11"          # where the control node's SSH and Kafka clients reach it
    port = 22                   # optional, 22
    user = "root"               # optional, root; otherwise a user with passwordless sudo
    key = "~/.ssh/id_ed25519"   # optional: the agent and default keys are tried without it
    host_key = "ssh-ed25519 AAAA..."  # optional: the machine's host key (a .pub file's line)

A machine's host key is checked against its ``host_key``, else the known_hosts file's lines
for it, else the user's ``~/.ssh/known_hosts`` (``harness.substrate.ssh.hostkeys``). The
known_hosts file (by default ``<hosts file without suffix>.known_hosts`` beside it) need
not exist: ``--accept-new-host-keys`` makes it and writes the keys of machines no source
knows there.

A ``[lab]`` table, written by ``python -m harness ssh-lab up``, names the containers that
stand in for machines, so ``ssh-lab down`` finds them; a run ignores it.
"""

from __future__ import annotations

import base64
import binascii
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import HarnessError

#: The flag that lets a connection record the key of a machine no source knows.
ACCEPT_FLAG = "--accept-new-host-keys"


@dataclass(frozen=True)
class SshHost:
    """One machine: where to reach it, as whom, and (optionally) its host key."""

    host: str
    port: int = 22
    user: str = "root"
    key: str | None = None
    #: ``TYPE BASE64`` of the machine's host key; None: looked up in known_hosts files.
    host_key: str | None = None

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class HostKeyTrust:
    """How a connection checks the machine's host key, beyond the machine's own
    ``host_key``: the known_hosts files it reads and whether an unknown key may be recorded
    (trust on first use). The default reads only the user's ``~/.ssh/known_hosts`` and
    refuses an unknown key."""

    #: The hosts file's known_hosts file: read, and where accepted keys are written.
    known_hosts: Path | None = None
    accept_new: bool = False
    #: The user's own (a field so that tests need not read the real one).
    user_known_hosts: Path = field(default_factory=lambda: Path("~/.ssh/known_hosts").expanduser())

    def sources(self) -> str:
        """Where a key was looked for, for the refusal of an unknown one."""
        files = [str(p) for p in (self.known_hosts, self.user_known_hosts) if p is not None]
        return ", ".join(["the hosts file", *files])


@dataclass(frozen=True)
class HostsFile:
    path: Path
    hosts: list[SshHost]
    lab: str | None = None
    #: Where the machines' keys are recorded beside their ``host_key`` (may not exist yet).
    known_hosts: Path | None = None

    def trust(self, accept_new: bool = False) -> HostKeyTrust:
        """How this file's machines' host keys are checked; ``accept_new``: the flag."""
        return HostKeyTrust(self.known_hosts, accept_new)


def add_host_key_argument(add: Callable[..., Any]) -> None:
    """``--accept-new-host-keys`` through ``add`` (an argparse parser's ``add_argument`` or
    a pytest option group's ``addoption``), for every command that takes ``--hosts``."""
    add(
        ACCEPT_FLAG,
        action="store_true",
        default=False,
        help="with --hosts: trust on first use: record the host key of a machine that no "
        "source knows (host_key, the hosts file's known_hosts file, ~/.ssh/known_hosts) in "
        "the hosts file's known_hosts file; a key that differs from a recorded one is always "
        "refused",
    )


def parse_host_key(text: str) -> Any:
    """A public key from ``TYPE BASE64 [comment]`` (a .pub file's line, or a known_hosts
    line without its names); ValueError saying what is wrong otherwise (its text follows
    "host_key" in the message). paramiko is imported here, not above: reading a hosts file
    without host keys needs no ssh extra."""
    import paramiko

    fields = text.split()
    if len(fields) < 2:
        raise ValueError("must be 'TYPE BASE64' (e.g. 'ssh-ed25519 AAAA...')")
    kind, data = fields[:2]
    try:
        blob = base64.b64decode(data, validate=True)
    except binascii.Error:
        raise ValueError(f"is not base64 after its type {kind}") from None
    try:
        return paramiko.PKey.from_type_string(kind, blob)
    except paramiko.UnknownKeyType:
        raise ValueError(f"has a key type paramiko does not know: {kind!r}") from None
    except Exception:  # a blob of another type, or a truncated one
        raise ValueError(f"does not decode as a {kind} key") from None


def _host_key(value: object, where: str) -> str:
    """A node's ``host_key``, checked with paramiko and kept as ``TYPE BASE64``."""
    if not isinstance(value, str):
        raise HarnessError(f"{where}: host_key must be a string 'TYPE BASE64', not {value!r}")
    try:
        key = parse_host_key(value)
    except ImportError:
        raise HarnessError(
            f"{where}: host_key needs the ssh extra: pip install 'kafka-eos-harness[ssh]'"
        ) from None
    except ValueError as exc:
        raise HarnessError(f"{where}: host_key {exc}") from None
    return f"{key.get_name()} {key.get_base64()}"


def _known_hosts(data: dict[str, Any], p: Path) -> Path:
    value = data.get("known_hosts")
    if value is None:
        return p.with_suffix(".known_hosts")
    if not isinstance(value, str) or not value:
        raise HarnessError(f"hosts file {p}: known_hosts must be a path, not {value!r}")
    path = p.parent / Path(value).expanduser()
    if path.exists() and not path.is_file():
        raise HarnessError(f"hosts file {p}: known_hosts {path} is not a file")
    return path


def load_hosts(path: Path | str) -> HostsFile:
    """Parse and check a hosts file; every problem is one line naming the file."""
    p = Path(path).expanduser()
    try:
        data = tomllib.loads(p.read_text())
    except OSError as exc:
        raise HarnessError(f"hosts file {p}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"hosts file {p} is not valid TOML: {exc}") from None
    unknown_top = set(data) - {"node", "lab", "known_hosts"}
    if unknown_top:
        raise HarnessError(f"hosts file {p}: unknown key {sorted(unknown_top)[0]!r}")
    tables = data.get("node")
    if not isinstance(tables, list) or not tables:
        raise HarnessError(f"hosts file {p} lists no [[node]] (one per machine)")
    hosts = []
    for i, t in enumerate(tables, start=1):
        unknown = set(t) - {"host", "port", "user", "key", "host_key"}
        if unknown:
            first = sorted(unknown)[0]
            hint = " (it goes at the top, before the first table)" if first == "known_hosts" else ""
            raise HarnessError(f"hosts file {p}, node {i}: unknown key {first!r}{hint}")
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
        host_key = t.get("host_key")
        if host_key is not None:
            host_key = _host_key(host_key, f"hosts file {p}, node {i}")
        hosts.append(SshHost(host, port, str(t.get("user", "root")), key, host_key))
    seen = {(h.host, h.port) for h in hosts}
    if len(seen) != len(hosts):
        raise HarnessError(f"hosts file {p} lists a machine twice")
    lab = data.get("lab", {}).get("name") if isinstance(data.get("lab"), dict) else None
    return HostsFile(p, hosts, lab, _known_hosts(data, p))


def render_hosts(hosts: list[SshHost], lab: str | None = None) -> str:
    """The TOML text of a hosts file (what ``ssh-lab up`` writes)."""
    lines = ["# Machines for --backend ssh, node 1 first (docs/substrate.md, the SSH backend).\n"]
    if lab:
        lines.append(f'[lab]\nname = "{lab}"\n\n')
    for h in hosts:
        lines.append(f'[[node]]\nhost = "{h.host}"\nport = {h.port}\nuser = "{h.user}"\n')
        if h.key:
            lines.append(f'key = "{h.key}"\n')
        if h.host_key:
            lines.append(f'host_key = "{h.host_key}"\n')
        lines.append("\n")
    return "".join(lines)
