"""What the two cluster backends share (``process.cluster.Cluster``, processes in network
namespaces, and ``docker.cluster.DockerCluster``, containers): the context-manager life cycle
and its teardown order, SIGTERM handling, the run marker in the environment, the per-node verbs,
readiness, the look-ups over each broker's own metadata (leaders, coordinators, registered
brokers), the partition bookkeeping and the toxics. A backend supplies only what differs: how
nodes are started and cut apart, where the evidence is read from, and what is removed at the
end. Kept in one place so the backends cannot drift apart.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

from common.errors import HarnessError
from common.waits import wait_for
from harness.kafka import coordinators, javaclients, tools
from harness.kafka.wire import fetch_metadata, fetch_partitions
from harness.substrate import readiness, runstate
from harness.substrate.api import ClusterConfig, new_cluster_id
from harness.substrate.runstate import MARKER_ENV, new_run_id
from harness.substrate.toxiproxy import Toxiproxy, proxy_name

if TYPE_CHECKING:
    from harness.kafka.install import Installation
    from harness.kafka.versions import KafkaVersion
    from harness.kafka.wire import PartitionView
    from harness.substrate.runstate import Slot

log = logging.getLogger("harness.substrate.base")


class _Node(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def internal_address(self) -> str:
        """``host:port`` of the listener the harness asks directly (never through toxics)."""
        ...

    @property
    def logs(self) -> str:
        """Where a reader finds this node's output (named in start-up errors)."""
        ...

    def state(self) -> str | None: ...

    def alive(self) -> bool: ...

    def running(self) -> bool:
        """Alive and not frozen: worth a metadata request."""
        ...

    def start(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def kill(self) -> None: ...

    def stop(self, timeout: float = 30.0) -> bool: ...


N = TypeVar("N", bound=_Node)


def port_free(port: int) -> bool:
    """Whether nothing listens on ``127.0.0.1:port`` (both backends publish ports there)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _can_cut_clients() -> bool:
    """Root and iptables: client processes can get group ids and be cut by them."""
    return os.geteuid() == 0 and bool(shutil.which("iptables"))


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class ClusterBase(Generic[N]):
    """The shared part of a backend.

    A subclass sets the attributes below and implements ``start``, ``bootstrap``,
    ``internal_bootstrap``, ``can_reach`` and the hooks
    ``_cut_links``/``_heal_links`` (the network faults), ``_write_logdump`` (the evidence) and
    ``_release`` (what teardown removes); ``_started``, ``_save_logs`` and ``_after_node_start``
    have defaults.
    """

    config: ClusterConfig
    run_id: str
    nodes: list[N]
    settings: dict[str, str]
    install: Installation | None
    dir: Path | None
    toxiproxy: Toxiproxy | None
    timings: dict[str, float]

    def __init__(self, config: ClusterConfig | None = None, **kwargs: Any) -> None:
        self.config = config or ClusterConfig(**kwargs)
        self.config.validate()
        self.run_id = new_run_id()
        self.cluster_id = new_cluster_id()
        self.install = None
        self.slot: Slot | None = None
        self.nodes = []
        self.settings = {}
        self.dir = None
        self.toxiproxy = None
        self.timings = {}
        self._admin: Any = None
        self._cut: set[int] = set()  # outside the majority of a partition: views may be stale
        self._stopped = False
        self._old_sigterm: Any = None

    def _check_transaction_version(self, version: KafkaVersion) -> None:
        if self.config.transaction_version is not None and not version.supports_transaction_version:
            raise HarnessError(f"Kafka {version} has no transaction.version feature (4.x only)")

    def _make_settings(self) -> dict[str, str]:
        """The defaults for this shape, overridden by the configuration's settings."""
        self.settings = self.config.settings()
        return self.settings

    def _make_store(self) -> Path:
        """The run's store directory (configs, logs, evidence), created."""
        store = self.config.store or Path("store") / "clusters" / self.run_id
        self.dir = Path(store).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir

    # --- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Heal, save the evidence, kill the brokers, remove everything. Safe to call twice.

        Teardown kills rather than stops: the evidence is on disk already, and a clean
        shutdown of a whole KRaft quorum costs seconds per node for nothing. The segment
        dump comes after the kills, so the files it reads are final.
        """
        if not self._first_stop():
            return
        t0 = time.monotonic()
        self._admin = None
        if self._started():
            try:
                self.heal_all()
            except Exception as exc:  # cleanup continues whatever failed
                log.warning("heal during stop failed: %s", exc)
            self._save_logs()
            for node in self.nodes:
                try:
                    node.kill()
                except Exception as exc:
                    log.warning("killing node %s failed: %s", node.node_id, exc)
            self.timings["stop_nodes"] = time.monotonic() - t0
            if self.config.dump_logs and self.nodes and self.dir is not None:
                try:
                    self._write_logdump(self.dir / "evidence")
                except Exception as exc:
                    log.warning("log segment dump failed: %s", exc)
            self.timings["dump"] = time.monotonic() - t0
        try:
            self._heal_clients()  # before the slot is released: the rules carry its number
        except Exception as exc:
            log.warning("removing client cuts failed: %s", exc)
        self._release()
        self._restore_signal_handlers()
        self.timings["teardown"] = time.monotonic() - t0

    def _started(self) -> bool:
        """Whether anything was started that teardown must heal, save and kill."""
        return True

    def _save_logs(self) -> None:
        """Copy node output into the store before the nodes go (a no-op where it is there)."""

    def _write_logdump(self, out_dir: Path) -> Path:
        """``out_dir/logdump.jsonl`` (``harness.substrate.evidence``) from the dead nodes."""
        raise NotImplementedError

    def _release(self) -> None:
        """Remove everything the start created (processes, networks, containers...)."""
        raise NotImplementedError

    @property
    def env(self) -> dict[str, str]:
        """The environment of every process we spawn: carries the run marker."""
        return dict(os.environ, **{MARKER_ENV: self.run_id})

    def _install_signal_handlers(self) -> None:
        """SIGTERM raises SystemExit, so it unwinds through ``stop()`` as Ctrl-C does."""
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: FrameType | None) -> None:
            raise SystemExit(128 + signum)

        self._old_sigterm = signal.signal(signal.SIGTERM, on_term)

    def _restore_signal_handlers(self) -> None:
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._old_sigterm)

    def _first_stop(self) -> bool:
        """True the first time only (``stop`` is idempotent); drops the atexit hook."""
        if self._stopped:
            return False
        self._stopped = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        return True

    # --- readiness ---------------------------------------------------------------------

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Every broker registered and unfenced, then a transaction through toxiproxy."""
        deadline = time.monotonic() + timeout
        want = {n.node_id for n in self.nodes}

        def all_registered() -> bool:
            for node in self.nodes:
                if not node.alive():
                    raise HarnessError(
                        f"node {node.node_id} exited during start-up; see {node.logs}"
                    )
            return self.registered_brokers() == want

        wait_for(all_registered, timeout=timeout, what=f"brokers {sorted(want)} unfenced")
        self.timings["registered"] = time.monotonic() - (deadline - timeout)
        readiness.transactional_round_trip(self, max(5.0, deadline - time.monotonic()))

    def registered_brokers(self) -> set[int]:
        """Broker ids that every answering live broker lists in its metadata.

        In KRaft, metadata lists only registered, unfenced brokers. Each broker is asked
        directly (no client library in the harness process for this: it is called from the
        nemesis thread while brokers die and return). The intersection is conservative both
        ways: a just-restarted broker that has not caught up, or an isolated one whose view
        is stale, can only delay "registered", never fake it.
        """
        views = []
        for node in self._askable(exclude_cut=True):
            try:
                host, port = _host_port(node.internal_address)
                views.append(fetch_metadata(host, port, [], node.node_id)[0])
            except (OSError, struct.error):
                continue
        if not views:
            raise HarnessError("no live broker answered a metadata request")
        return set.intersection(*views)

    def _askable(self, exclude_cut: bool) -> list[N]:
        """Running nodes to ask, leaving out the cut-off minority when asked to (and when
        anyone else is left)."""
        nodes = [n for n in self.nodes if not (exclude_cut and n.node_id in self._cut)]
        return [n for n in nodes or self.nodes if n.running()]

    # --- addresses and clients ---------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    @property
    def internal_bootstrap(self) -> str:
        raise NotImplementedError

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(
                {
                    "bootstrap.servers": self.internal_bootstrap,
                    "log_level": 0,
                    "socket.timeout.ms": 5000,
                }
            )
        return self._admin

    def ensure_topic(
        self,
        topic: str,
        partitions: int,
        replication: int | None = None,
        config: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create ``topic`` (idempotently) and wait until every partition has a leader and
        a full ISR. ``replication`` None: the brokers' ``default.replication.factor`` (the
        run's ``--replication-factor``); without ``min.insync.replicas`` in ``config`` the
        topic takes the brokers' (``--min-insync-replicas``)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic

        if replication is None:
            replication = int(self.settings["default.replication.factor"])
        admin = self.admin()
        futures = admin.create_topics(
            [NewTopic(topic, partitions, replication, config=config or {})],
            request_timeout=timeout,
        )
        try:
            futures[topic].result(timeout=timeout)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise HarnessError(f"creating topic {topic} failed: {exc}") from None

        def all_led() -> bool:
            md = admin.list_topics(topic=topic, timeout=5)
            t = md.topics.get(topic)
            return (
                t is not None
                and t.error is None
                and len(t.partitions) == partitions
                and all(p.leader >= 0 and len(p.isrs) == replication for p in t.partitions.values())
            )

        wait_for(all_led, timeout=timeout, what=f"leaders and full ISR for {topic}")

    def tool_command(
        self, simple_name: str, jvm_opts: tuple[str, ...] = tools.TOOL_JVM_OPTS
    ) -> list[str]:
        """The command line that starts one of Kafka's tools from this cluster's jars."""
        if self.install is None:
            raise HarnessError(f"this cluster has no Kafka installation to run {simple_name}")
        return tools.tool_command(self.install, simple_name, jvm_opts)

    def java_client_command(
        self, main_class: str, jvm_opts: tuple[str, ...] = tools.TOOL_JVM_OPTS
    ) -> list[str]:
        """The command line that starts one of the project's Java clients (built on first use
        against this cluster's Kafka jars; see ``harness.kafka.javaclients``)."""
        if self.install is None:
            raise HarnessError(f"this cluster has no Kafka installation to run {main_class}")
        log_option = tools.tools_log_option(self.install)
        return javaclients.java_command(self.install, main_class, jvm_opts, log_option)

    def run_tool(self, simple_name: str, *args: str, timeout: float = 60.0) -> str:
        """Run one of Kafka's own tools against this cluster; its stdout."""
        if self.install is None:
            raise HarnessError(f"this cluster has no Kafka installation to run {simple_name}")
        return tools.run_tool(self.install, self.env, simple_name, *args, timeout=timeout)

    def node(self, node_id: int) -> N:
        if not 1 <= node_id <= len(self.nodes):
            raise HarnessError(f"no node {node_id} (cluster has {len(self.nodes)})")
        return self.nodes[node_id - 1]

    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes]

    # --- look-ups that aim faults -----------------------------------------------------

    def active_controller(self) -> int:
        """The KRaft quorum leader, as the quorum itself reports it (Kafka's own tool, run
        from the cluster's installation against the direct listeners)."""
        return coordinators.active_controller(self)

    def partition_views(self, topic: str, partition: int) -> list[PartitionView]:
        """Every reachable live broker's own view of a partition, asked one by one."""
        views = []
        for node in self._askable(exclude_cut=False):
            try:
                host, port = _host_port(node.internal_address)
                got = fetch_partitions(host, port, [topic], node.node_id)
            except OSError:
                continue
            view = got.get((topic, partition))
            if view is not None and view.error == 0:
                views.append(view)
        return views

    def partition_view(self, topic: str, partition: int) -> PartitionView:
        """The freshest view: highest leader epoch, preferring the leader's own answer.

        An isolated broker keeps a stale view (it believes it still leads); its epoch is
        lower than the one the majority moved to, so it loses here.
        """
        views = self.partition_views(topic, partition)
        if not views:
            raise HarnessError(f"no live broker has metadata for {topic}-{partition}")
        top = max(v.leader_epoch for v in views)
        fresh = [v for v in views if v.leader_epoch == top]
        own = [v for v in fresh if v.source == v.leader]
        return (own or fresh)[0]

    def leader(self, topic: str, partition: int) -> int | None:
        leader = self.partition_view(topic, partition).leader
        return leader if leader >= 0 else None

    def isr(self, topic: str, partition: int) -> list[int]:
        return list(self.partition_view(topic, partition).isr)

    def group_coordinator(self, group_id: str) -> int | None:
        p = coordinators.partition_for(group_id, int(self.settings["offsets.topic.num.partitions"]))
        return self.leader("__consumer_offsets", p)

    def txn_coordinator(self, transactional_id: str) -> int | None:
        n = int(self.settings["transaction.state.log.num.partitions"])
        return self.leader("__transaction_state", coordinators.partition_for(transactional_id, n))

    # --- node control ------------------------------------------------------------------

    def node_state(self, node_id: int) -> str | None:
        return self.node(node_id).state()

    def node_alive(self, node_id: int) -> bool:
        return self.node(node_id).alive()

    def pause(self, node_id: int) -> None:
        self.node(node_id).pause()

    def resume(self, node_id: int) -> None:
        self.node(node_id).resume()

    def kill(self, node_id: int) -> None:
        self.node(node_id).kill()

    def stop_node(self, node_id: int) -> bool:
        return self.node(node_id).stop()

    def restart(self, node_id: int, *, clean: bool = False, timeout: float = 60.0) -> None:
        """Stop (clean or kill -9) and start again on the same data; waits until registered."""
        node = self.node(node_id)
        if clean:
            node.stop()
        else:
            node.kill()
        self.start_node(node_id, timeout=timeout)

    def start_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Start a stopped node on its data and wait until it is registered again.

        The other brokers' lists alone cannot say so: after a SIGKILL they keep listing the
        dead incarnation until the controller fences it (broker.session.timeout.ms, 9 s by
        default), so a restart checked that way could pass before the new JVM had even
        logged a line (seen: "restarted" 5 s before the broker re-registered). The new
        incarnation must answer itself and list itself, and the others must list it.
        """
        self.node(node_id).start()
        self._after_node_start(node_id)
        wait_for(
            lambda: self._lists_itself(node_id) and node_id in self.registered_brokers(),
            timeout=timeout,
            what=f"node {node_id} registered after restart",
        )

    def _lists_itself(self, node_id: int) -> bool:
        """Whether the node answers a metadata request and counts itself among the live."""
        node = self.node(node_id)
        if not node.running():
            return False
        try:
            host, port = _host_port(node.internal_address)
            return node_id in fetch_metadata(host, port, [], node_id)[0]
        except (OSError, struct.error):
            return False

    def _after_node_start(self, node_id: int) -> None:
        """What a backend must redo for a node that came back (before it registers)."""

    # --- network faults ----------------------------------------------------------------

    def partition(self, *groups: list[int]) -> None:
        """Cut every node of each group from every node of every other group."""
        for g in groups:
            for i in g:
                self.node(i)
        self._cut_links(groups)
        # Nodes outside the largest group are the ones whose metadata may go stale.
        largest = max(groups, key=len)
        for g in groups:
            if g is not largest:
                self._cut.update(g)

    def _cut_links(self, groups: tuple[list[int], ...]) -> None:
        raise NotImplementedError

    def isolate(self, node_id: int) -> None:
        others = [n.node_id for n in self.nodes if n.node_id != node_id]
        self.partition([node_id], others)

    def heal(self) -> None:
        """Undo every partition."""
        self._heal_links()
        self._cut.clear()

    def _heal_links(self) -> None:
        raise NotImplementedError

    # --- toxics: one toxiproxy proxy per node, in front of its client listener ----------

    def proxy_name(self, node_id: int) -> str:
        return proxy_name(node_id)

    def _proxy(self) -> Toxiproxy:
        if self.toxiproxy is None:
            raise HarnessError("toxiproxy is not running")
        return self.toxiproxy

    def add_toxic(
        self, node_id: int, kind: str, attributes: dict[str, Any] | None = None, **options: Any
    ) -> str:
        """A toxic on the node's client path; its name (for ``remove_toxic``). ``options``
        are :meth:`Toxiproxy.add_toxic`'s (stream, toxicity, name)."""
        return self._proxy().add_toxic(self.proxy_name(node_id), kind, attributes, **options)

    def remove_toxic(self, node_id: int, name: str) -> None:
        self._proxy().remove_toxic(self.proxy_name(node_id), name)

    def hold_request(self, node_id: int, **attributes: Any) -> int:
        """Arm the node's proxy to withhold one request and deliver it late (the arm number);
        see harness/substrate/toxiproxy_server/kafka_hold.go for the attributes."""
        return self._proxy().hold_request(self.proxy_name(node_id), **attributes)

    def release_held(self, node_id: int, arm: int) -> list[dict[str, Any]]:
        """Disarm; deliver what arm ``arm`` still holds; that arm's events."""
        return self._proxy().release_held(self.proxy_name(node_id), arm)

    def proxy_down(self, node_id: int) -> None:
        self._proxy().set_enabled(self.proxy_name(node_id), False)

    def proxy_up(self, node_id: int) -> None:
        self._proxy().set_enabled(self.proxy_name(node_id), True)

    # --- client cuts: one client process off the network (root iptables, owner match) -----

    def client_gid(self, slot: int) -> int | None:
        """The group id the children of a workload supervisor's ``slot`` run with, so that
        :meth:`cut_client` can cut exactly them; None (spawn as usual, uncuttable) without
        root and iptables, without a host slot (the Docker backend) or beyond the slot's
        block of ``runstate.CLIENT_GIDS_PER_SLOT`` ids."""
        if self.slot is None or not _can_cut_clients():
            return None
        return runstate.client_gid(self.slot.number, slot)

    def _client_slot(self) -> int:
        if self.slot is None:
            raise HarnessError("client cuts need a host slot (the process backend)")
        if not _can_cut_clients():
            raise HarnessError("client cuts need root and iptables")
        return self.slot.number

    def cut_client(self, gid: int) -> None:
        """Drop every packet that a process of group ``gid`` sends, inbound connections'
        answers included: an OUTPUT rule in the root namespace, tagged with the slot (so
        ``heal_all`` and the reaper find it), verified in ``iptables -S OUTPUT``."""
        number = self._client_slot()
        rule = runstate.client_rule(number, gid)
        proc = subprocess.run(
            ["iptables", "-w", "-I", *rule], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise HarnessError(f"cutting client gid {gid} failed: {proc.stderr.strip()}")
        if rule not in self.client_cuts():
            raise HarnessError(f"the cut of client gid {gid} is not in iptables -S OUTPUT")

    def heal_client(self, gid: int) -> None:
        """Remove every cut of group ``gid`` (a rule added twice is removed twice), verified."""
        number = self._client_slot()
        runstate.remove_client_rules(number, gid)
        if runstate.client_rule(number, gid) in self.client_cuts():
            raise HarnessError(f"the cut of client gid {gid} is still in iptables -S OUTPUT")

    def client_cuts(self) -> list[list[str]]:
        """This cluster's client-cut rules now (as ``iptables -S OUTPUT`` lists them, without
        ``-A``)."""
        if self.slot is None or not _can_cut_clients():
            return []
        return [rule for n, rule in runstate.client_rules() if n == self.slot.number]

    def client_reaches(self, gid: int, timeout: float = 2.0) -> bool:
        """Probe: does a process of group ``gid`` get a TCP connection to the first broker's
        client address? An answer of any kind counts, a refusal included (a proxy that is
        down refuses); a cut one gets EPERM from its own kernel, or no answer at all."""
        host, port = _host_port(self.bootstrap.split(",")[0])
        code = (
            "import socket,sys\n"
            f"s=socket.socket();s.settimeout({timeout})\n"
            "try:\n"
            f"    s.connect(({host!r},{port}))\n"
            "except ConnectionRefusedError:\n"
            "    pass\n"
            "except OSError:\n"
            "    sys.exit(1)\n"
        )
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code],
                group=gid,
                capture_output=True,
                check=False,
                timeout=timeout + 30,
            )
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0

    def _heal_clients(self) -> None:
        if self.slot is not None and _can_cut_clients():
            runstate.remove_client_rules(self.slot.number)

    def heal_all(self) -> None:
        """Undo every fault: reconnect cut clients, resume paused nodes, heal partitions,
        drop toxics."""
        self._heal_clients()
        for node in self.nodes:
            if node.state() == "T":
                node.resume()
        self.heal()
        if self.toxiproxy is not None:
            self.toxiproxy.reset()
