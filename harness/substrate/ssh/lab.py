"""``python -m harness ssh-lab up N --hosts FILE``: N machines to try the SSH backend on,
without machines of one's own.

Each machine is a container of a Debian image built here (``docker/sshlab``: the runtime
image's Java 17 and iptables, plus an SSH server), on a network of its own, reachable by SSH
only with a key generated for the lab. The Docker API is used to start and remove them, and
to read the host key each one generated into the hosts file (the lab made the machines, so
their keys need no trust on first use), and for nothing else: a run treats them as remote
machines, and checks their host keys as it would any machine's. ``ssh-lab down --hosts
FILE`` removes them, their network, the key and the hosts file.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from common.waits import wait_for
from harness.substrate.docker import plan as dp
from harness.substrate.docker.engine import connect_engine, remove_labelled
from harness.substrate.docker.images import ensure_derived_image
from harness.substrate.ssh.hosts import SshHost, load_hosts, parse_host_key, render_hosts
from harness.substrate.ssh.remote import Remote

log = logging.getLogger("harness.substrate.ssh.lab")

LAB_REPO = "kafka-harness/sshlab"
LAB_LABEL = "kafka-harness.sshlab"
LAB_CONTEXT = dp.docker_dir() / "sshlab"
#: Made by ``ssh-keygen -A`` in the lab's entrypoint, before sshd starts.
HOST_KEY_FILE = "/etc/ssh/ssh_host_ed25519_key.pub"


def ensure_lab_image(client: Any) -> str:
    return ensure_derived_image(client, LAB_CONTEXT, LAB_REPO)


def new_key(path: Path) -> str:
    """An Ed25519 key pair: the private key written to ``path`` (0600), the public returned."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_bytes(private)
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return public.decode() + " kafka-harness-sshlab"


def lab_host_key(container: Any) -> str | None:
    """A lab machine's Ed25519 host key as ``TYPE BASE64``, read from the container (None
    until its entrypoint has written it)."""
    code, out = container.exec_run(["cat", HOST_KEY_FILE])
    if code != 0:
        return None
    key = parse_host_key(out.decode(errors="replace"))
    return f"{key.get_name()} {key.get_base64()}"


def lab_up(count: int, hosts_file: Path, client: Any = None) -> list[SshHost]:
    """Start ``count`` machines and write their hosts file; returns the hosts."""
    if count < 1:
        raise HarnessError("ssh-lab up needs at least one machine")
    hosts_file = hosts_file.expanduser().resolve()
    if hosts_file.exists():
        raise HarnessError(f"{hosts_file} exists; ssh-lab down --hosts {hosts_file} first")
    client = client or connect_engine()
    image = ensure_lab_image(client)
    name = uuid.uuid4().hex[:8]
    key_path = hosts_file.with_suffix(".key")
    public = new_key(key_path)
    labels = {LAB_LABEL: name}
    network = f"kh-sshlab-{name}"
    hosts: list[SshHost] = []
    try:
        client.networks.create(network, driver="bridge", labels=labels)
        for i in range(1, count + 1):
            c = client.containers.run(
                image,
                name=f"{network}-{i}",
                hostname=f"node{i}",
                detach=True,
                init=True,
                cap_add=["NET_ADMIN"],
                network=network,
                environment={"AUTHORIZED_KEY": public},
                labels=labels,
            )
            c.reload()
            ip = c.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
            host_key = wait_for(
                lambda c=c: lab_host_key(c), timeout=60, what=f"the host key of {ip}"
            )
            hosts.append(SshHost(ip, 22, "root", str(key_path), host_key))
        for h in hosts:  # each connection checks the key just read
            remote = Remote(h, connect_timeout=3)
            wait_for(
                lambda r=remote: r.connect() is not None,
                timeout=60,
                what=f"sshd on {h.host}",
            )
            remote.close()
    except BaseException:
        remove_labelled(client, f"{LAB_LABEL}={name}")
        key_path.unlink(missing_ok=True)
        raise
    hosts_file.write_text(render_hosts(hosts, lab=name))
    return hosts


def lab_down(hosts_file: Path, client: Any = None) -> int:
    """Remove the lab of ``hosts_file``: containers, network, key, the file itself."""
    lab = load_hosts(hosts_file)
    if not lab.lab:
        raise HarnessError(f"{hosts_file} has no [lab]: it was not written by ssh-lab up")
    client = client or connect_engine()
    removed = remove_labelled(client, f"{LAB_LABEL}={lab.lab}")
    for h in lab.hosts:
        if h.key:
            Path(h.key).unlink(missing_ok=True)
    lab.path.unlink(missing_ok=True)
    return removed
