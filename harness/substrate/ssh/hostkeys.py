"""Whose SSH server a connection reached: the machines' host keys, checked with paramiko's own
machinery (``HostKeys``, ``MissingHostKeyPolicy``, ``BadHostKeyException``).

A machine's recorded keys come from the first of these that knows it: its ``host_key`` in
the hosts file, the hosts file's known_hosts file (``harness.substrate.ssh.hosts``), the
user's ``~/.ssh/known_hosts``. The first source decides alone, so a hosts file's own key is
never overruled by a stale line elsewhere (lab machines reuse the addresses of earlier ones).

- A key that matches a recorded one is accepted.
- A key that differs from the recorded ones is refused, always: it is another machine, or
  someone in between. paramiko raises ``BadHostKeyException``; :func:`changed_key_error`
  makes it one line with both fingerprints.
- A machine no source knows goes to :class:`HostKeyPolicy`: refused with one line naming
  the key and how to accept it, or, with ``--accept-new-host-keys`` (trust on first use),
  recorded in the hosts file's known_hosts file and said in one warning line.

This module needs paramiko (the ssh extra); import it only once paramiko is known to be there.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import paramiko

from common.errors import HarnessError
from harness.substrate.ssh.hosts import ACCEPT_FLAG, HostKeyTrust, SshHost, parse_host_key

log = logging.getLogger("harness.substrate.ssh.hostkeys")

#: Appends to a known_hosts file are serialized: the machines are connected to at once.
_RECORDING = threading.Lock()


def describe(key: paramiko.PKey) -> str:
    """``ssh-ed25519 SHA256:...``: as ``ssh-keygen -l`` shows a key, to compare by eye."""
    return f"{key.get_name()} {key.fingerprint}"


def known_hosts_name(host: SshHost) -> str:
    """The name a machine's keys are recorded under, as OpenSSH and paramiko look them up."""
    return host.host if host.port == 22 else f"[{host.host}]:{host.port}"


def recorded_keys(host: SshHost, trust: HostKeyTrust) -> tuple[dict[str, paramiko.PKey], str]:
    """The keys recorded for ``host`` by type, and where (for messages): those of the first
    source that knows it, or ``({}, "")`` when none does."""
    if host.host_key:
        key = parse_host_key(host.host_key)
        return {key.get_name(): key}, "the hosts file's host_key"
    for path in (trust.known_hosts, trust.user_known_hosts):
        if path is None or not path.is_file():
            continue
        try:
            found = paramiko.HostKeys(str(path)).lookup(known_hosts_name(host))
        except (OSError, UnicodeDecodeError, paramiko.hostkeys.InvalidHostKey) as exc:
            raise HarnessError(f"known_hosts file {path}: {exc}") from None
        if found:
            return dict(found.items()), str(path)
    return {}, ""


def record_key(path: Path, name: str, key: paramiko.PKey) -> None:
    """Append ``name``'s key to the known_hosts file ``path`` (made if missing), one line in
    OpenSSH's format, so ``ssh`` and later runs read it alike."""
    line = paramiko.hostkeys.HostKeyEntry([name], key).to_line()
    with _RECORDING:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a+b") as f:
            if f.tell():
                f.seek(f.tell() - 1)
                if f.read(1) != b"\n":
                    line = "\n" + line
            f.write(line.encode())


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """What paramiko asks about a machine no source knows: refuse it, or, with
    ``trust.accept_new``, record its key and say so."""

    def __init__(self, host: SshHost, trust: HostKeyTrust) -> None:
        self.host = host
        self.trust = trust

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: Any) -> None:
        where = self.trust.known_hosts
        if not (self.trust.accept_new and where is not None):
            how = f"rerun with {ACCEPT_FLAG} to record it in {where}" if where else ""
            raise HarnessError(
                f"ssh {self.host.label}: unknown host key {describe(key)} (not in "
                f"{self.trust.sources()}); if it is the machine's, give it as host_key in the "
                f"hosts file{' or ' + how if how else ''}"
            )
        record_key(where, hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.warning(
            "ssh %s: new host key %s accepted (%s), recorded in %s",
            self.host.label,
            describe(key),
            ACCEPT_FLAG,
            where,
        )


def prepare_client(client: paramiko.SSHClient, host: SshHost, trust: HostKeyTrust) -> str:
    """Give ``client`` the keys recorded for ``host`` and the policy for a machine without
    any; returns where the keys came from, for :func:`changed_key_error`. The user's
    known_hosts is not loaded as paramiko's "system" keys: those would overrule the rest."""
    keys, source = recorded_keys(host, trust)
    store = client.get_host_keys()
    for kind, key in keys.items():
        store.add(known_hosts_name(host), kind, key)
    client.set_missing_host_key_policy(HostKeyPolicy(host, trust))
    return source


def changed_key_error(
    host: SshHost, exc: paramiko.BadHostKeyException, source: str
) -> HarnessError:
    """The one line for a key that differs from the recorded one: refused whatever the flags."""
    return HarnessError(
        f"ssh {host.label}: host key mismatch, refused: the machine offers {describe(exc.key)} "
        f"but {source} records {describe(exc.expected_key)} (another machine, or someone in "
        "between; if it was reinstalled, replace the recorded key)"
    )
