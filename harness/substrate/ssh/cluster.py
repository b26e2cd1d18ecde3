"""A KRaft cluster on machines of their own, driven over SSH (Jepsen's way): this machine is
the control node, the machines in the hosts file run one broker each.

``SshCluster`` is a ``ClusterBase`` like the process and Docker backends. The control node
installs Kafka as it does for itself (Maven) and copies the jars to each machine; Java comes
from the machine's package manager when it has none. Each broker listens on its machine's
address; its client listener is advertised as a toxiproxy listener on this machine, so
every client connection crosses toxiproxy here, and the client-path faults act as on the
other backends. Faults on the machines: SIGSTOP/SIGCONT, kill -9 and restart by the
broker's pid, partitions with iptables rules in a chain of the run's own. Evidence: each
broker's logs and, at teardown, its data directory are fetched over SSH, and the log dump
is made here with the installation's own tool.

Nothing outlives the run on the machines: teardown removes the run's processes (by their
run marker), its firewall rules (by their tag) and its directory; after a SIGKILL of the
harness, the next start on the same machines, or ``python -m harness reap --hosts FILE``,
finds the run's directory and does the same (``harness.substrate.ssh.machine``).
"""

from __future__ import annotations

import atexit
import json
import logging
import shutil
import socket
import tarfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from common.errors import HarnessError
from harness.kafka.install import ensure_installed
from harness.substrate.api import ClusterConfig
from harness.substrate.base import (
    ClusterBase,
    check_base_port,
    port_free,
    scratch_root,
    slot_ports,
)
from harness.substrate.process.node import (
    CONTROLLER_PORT,
    INTERNAL_PORT,
    broker_properties,
    log_config,
    render_properties,
)
from harness.substrate.runstate import acquire_slot, kill_run_processes, live_run_ids
from harness.substrate.ssh import machine
from harness.substrate.ssh.hosts import HostKeyTrust, SshHost, load_hosts
from harness.substrate.ssh.node import SshNode
from harness.substrate.ssh.remote import Remote
from harness.substrate.toxiproxy import Toxiproxy

log = logging.getLogger("harness.substrate.ssh.cluster")

T = TypeVar("T")


def _each(items: list[Any], fn: Callable[[Any], T]) -> list[T]:
    """``fn`` over the machines at once (SSH round trips dominate); the first error raised."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(fn, items))


def connect_all(hosts: list[SshHost], trust: HostKeyTrust | None = None) -> list[Remote]:
    """Every machine logged in (at once), its host key checked as ``trust`` says (None:
    only the machines' own ``host_key`` and ~/.ssh/known_hosts, an unknown key refused)."""
    remotes = [Remote(h, trust=trust) for h in hosts]
    try:
        _each(remotes, lambda r: r.connect())
    except BaseException:
        for r in remotes:
            r.close()
        raise
    return remotes


def resolve_address(host: str) -> str:
    """The machine's IP address as this machine resolves it (iptables rules need one)."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        raise HarnessError(f"ssh node {host}: the name does not resolve") from None


def reap_hosts(
    hosts_file: Path | str, everyone: bool = False, accept_new_host_keys: bool = False
) -> dict[str, list[str]]:
    """``python -m harness reap --hosts FILE``: every dead run's leftovers on every machine."""
    loaded = load_hosts(hosts_file)
    hosts = loaded.hosts
    remotes = connect_all(hosts, loaded.trust(accept_new_host_keys))
    live = live_run_ids()
    try:
        removed = _each(remotes, lambda r: machine.reap_machine(r, live, everyone))
    finally:
        for r in remotes:
            r.close()
    return {h.label: runs for h, runs in zip(hosts, removed, strict=True)}


class SshCluster(ClusterBase[SshNode]):
    """``with SshCluster(ClusterConfig(hosts=FILE, ...)) as c:``; see the module docstring."""

    backend = "ssh"

    def __init__(self, config: ClusterConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.remotes: list[Remote] = []
        self.scratch: Path | None = None

    @property
    def uses_netns(self) -> bool:
        """Partitions between brokers are possible (iptables on the machines)."""
        return True

    def _ports(self, slot: int) -> list[int]:
        return slot_ports(self.config, slot)

    def _hosts(self) -> tuple[list[SshHost], HostKeyTrust]:
        """The machines the cluster takes, and how their host keys are checked."""
        cfg = self.config
        if not cfg.hosts:
            raise HarnessError("--backend ssh needs --hosts FILE (docs/substrate.md)")
        loaded = load_hosts(cfg.hosts)
        hosts = loaded.hosts
        if len(hosts) < cfg.nodes:
            raise HarnessError(
                f"hosts file {cfg.hosts} lists {len(hosts)} machines; the cluster needs "
                f"{cfg.nodes} (--nodes)"
            )
        return hosts[: cfg.nodes], loaded.trust(cfg.accept_new_host_keys)

    def start(self) -> None:
        t0 = time.monotonic()
        cfg = self.config
        hosts, trust = self._hosts()
        addresses = [resolve_address(h.host) for h in hosts]
        self.install = ensure_installed(cfg.kafka_version)
        self._check_transaction_version(self.install.version)
        install = self.install
        check_base_port(cfg)
        self.slot = acquire_slot(
            self.run_id, cfg.slot, lambda n: all(port_free(p) for p in self._ports(n))
        )
        self._install_signal_handlers()
        atexit.register(self.stop)
        self.remotes = connect_all(hosts, trust)
        self.timings["connect"] = time.monotonic() - t0
        live = live_run_ids() | {self.run_id}
        _each(self.remotes, lambda r: machine.reap_machine(r, live))
        store = self._make_store()
        (store / "cluster.json").write_text(
            json.dumps(
                {
                    "run_id": self.run_id,
                    "cluster_id": self.cluster_id,
                    "backend": "ssh",
                    "hosts": [h.label for h in hosts],
                }
            )
        )
        self.scratch = scratch_root() / self.run_id
        # Recorded before anything is fetched there: a reaper of a dead run removes it.
        self.slot.state.dirs = [str(self.scratch)]
        self.slot.save()
        settings = self._make_settings()
        ports = self._ports(self.slot.number)
        voters = ",".join(f"{i}@{a}:{CONTROLLER_PORT}" for i, a in enumerate(addresses, 1))
        version = str(install.version)

        def prepare(i: int) -> SshNode:
            remote = self.remotes[i - 1]
            java = machine.ensure_java(remote)
            libs = machine.ensure_kafka(remote, version, install.libs_dir)
            node = SshNode(i, remote, addresses[i - 1], self.run_id, java, libs, install.log4j2)
            # The directory and its owner record in one command: a run is reapable as soon
            # as it exists on the machine.
            remote.run(
                f"mkdir -p {node.data_dir} && cat > {node.dir}/../owner.json",
                stdin=machine.owner_record(self.run_id).encode(),
            )
            remote.run(machine.chain_setup(self.run_id))
            props = broker_properties(
                i,
                "0.0.0.0",
                node.address,
                ("127.0.0.1", ports[i]),
                voters,
                node.data_dir,
                settings,
            )
            text = render_properties(props)
            remote.write(f"{node.dir}/server.properties", text)
            (store / "nodes" / f"n{i}").mkdir(parents=True, exist_ok=True)
            (store / "nodes" / f"n{i}" / "server.properties").write_text(text)
            conf = f"{node.dir}/log4j{'2' if install.log4j2 else ''}.properties"
            remote.write(conf, log_config(install.log4j2, f"{node.dir}/server.log"))
            return node

        self.nodes = _each(list(range(1, cfg.nodes + 1)), prepare)
        self.timings["prepare"] = time.monotonic() - t0
        toxiproxy = Toxiproxy(install.toxiproxy_bin, ports[0], store / "toxiproxy.log", self.env)
        toxiproxy.start()
        self.toxiproxy = toxiproxy
        for node in self.nodes:
            toxiproxy.create_proxy(
                self.proxy_name(node.node_id),
                f"127.0.0.1:{ports[node.node_id]}",
                f"{node.address}:9092",
            )
        self._format()
        self.timings["format"] = time.monotonic() - t0
        for node in self.nodes:
            node.start()
        self.wait_ready(cfg.ready_timeout)
        self.timings["ready"] = time.monotonic() - t0
        log.info("ssh cluster %s ready in %.1fs", self.run_id, self.timings["ready"])

    def _format(self) -> None:
        tv = self.config.transaction_version
        assert self.dir is not None

        def fmt(node: SshNode) -> tuple[SshNode, int, str]:
            args = ["format", "-t", self.cluster_id, "-c", f"{node.dir}/server.properties"]
            if tv is not None:
                args += ["--feature", f"transaction.version={tv}"]
            cmd = node.java_command(
                "kafka.tools.StorageTool", *args, opts=("-XX:TieredStopAtLevel=1", "-Xmx256m")
            )
            code, out, err = node.remote.run(cmd, check=False, timeout=180)
            return node, code, out + err

        results = _each(self.nodes, fmt)
        for node, _code, out in results:
            (self.dir / "nodes" / f"n{node.node_id}" / "format.log").write_text(out)
        for node, code, out in results:
            if code != 0:
                lines = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("\t")]
                raise HarnessError(
                    f"formatting node {node.node_id} on {node.remote.host.host} failed: "
                    f"{lines[-1] if lines else out}"
                )

    def _started(self) -> bool:
        return bool(self.nodes)

    def _save_logs(self) -> None:
        """The brokers' logs, fetched from their machines into the store."""
        assert self.dir is not None

        def fetch(node: SshNode) -> None:
            local = self.dir / "nodes" / f"n{node.node_id}"  # type: ignore[operator]
            local.mkdir(parents=True, exist_ok=True)
            for name in ("server.log", "stdout.log"):
                data = node.remote.read(f"{node.dir}/{name}")
                if data is not None:
                    (local / name).write_bytes(data)

        try:
            _each(self.nodes, fetch)
        except Exception as exc:
            log.warning("fetching the brokers' logs failed: %s", exc)

    def _write_logdump(self, out_dir: Path) -> Path:
        """Each machine's data directory fetched (a tar over SSH) into scratch space here,
        then dumped with the installation's tool, as the process backend dumps its own."""
        assert self.scratch is not None

        def fetch(node: SshNode) -> list[str]:
            local = self.scratch / f"n{node.node_id}"  # type: ignore[operator]
            local.mkdir(parents=True, exist_ok=True)
            tar_path = local.parent / f"n{node.node_id}.tar"
            with open(tar_path, "wb") as fh:
                node.remote.stream_out(f"tar -C {node.data_dir} -cf - .", fh)
            with tarfile.open(tar_path) as tar:
                tar.extractall(local, filter="data")
            tar_path.unlink()
            return [str(p) for p in local.glob("*/*.log")]

        listings = _each(self.nodes, fetch)
        segments = {n.node_id: files for n, files in zip(self.nodes, listings, strict=True)}
        return self._dump_here(out_dir, segments)

    def _release(self) -> None:
        """On every machine the run's processes, rules and directory; here toxiproxy, the
        scratch copy, the marked client processes and the slot."""
        if self.toxiproxy is not None:
            try:
                self.toxiproxy.stop()
            except Exception as exc:
                log.warning("stopping toxiproxy failed: %s", exc)

        def clean(remote: Remote) -> None:
            remote.run(machine.reap_run_command(self.run_id), check=False, timeout=120)

        try:
            _each(self.remotes, clean)
        except Exception as exc:
            log.warning("cleaning the machines failed (reap --hosts removes it): %s", exc)
        for r in self.remotes:
            r.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        if self.slot is not None:
            kill_run_processes({self.run_id})
            self.slot.release()

    # --- addresses ---------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Client bootstrap through toxiproxy on this machine: what workloads use."""
        assert self.slot is not None
        ports = self._ports(self.slot.number)
        return ",".join(f"127.0.0.1:{ports[n.node_id]}" for n in self.nodes)

    @property
    def internal_bootstrap(self) -> str:
        return ",".join(n.internal_address for n in self.nodes)

    # --- network faults ----------------------------------------------------------------

    def _cut_links(self, groups: tuple[list[int], ...]) -> None:
        """DROP rules on both machines of every cut pair."""
        cmds: dict[int, list[str]] = {}
        for i, g in enumerate(groups):
            for h in groups[i + 1 :]:
                for a in g:
                    for b in h:
                        cmds.setdefault(a, []).append(
                            machine.cut_command(self.run_id, self.node(b).address)
                        )
                        cmds.setdefault(b, []).append(
                            machine.cut_command(self.run_id, self.node(a).address)
                        )
        _each(
            list(cmds.items()),
            lambda item: self.node(item[0]).remote.run(" && ".join(item[1])),
        )

    def _heal_links(self) -> None:
        _each(self.nodes, lambda n: n.remote.run(machine.heal_command(self.run_id)))

    def can_reach(self, src: int, dst: int) -> bool:
        """A TCP connect from ``src``'s machine to ``dst``'s inter-broker port."""
        target = self.node(dst).address
        code, _, _ = self.node(src).remote.run(
            f"timeout 2 bash -c '</dev/tcp/{target}/{INTERNAL_PORT}'", check=False
        )
        return code == 0
