"""The Docker backend without a Docker engine: generated configs, specs, backend choice, and
``DockerCluster`` driving a fake docker client (the engine itself is never contacted here)."""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from common.errors import HarnessError
from harness.kafka import coordinators
from harness.kafka.versions import DEFAULT_KAFKA_VERSION
from harness.substrate import backends
from harness.substrate.abilities import lookups as sb_lookups
from harness.substrate.abilities import signals as sb_signals
from harness.substrate.api import ClusterConfig
from harness.substrate.docker import cluster as bd
from harness.substrate.docker import engine as de
from harness.substrate.docker import plan as dp
from harness.substrate.evidence import classify_segments
from harness.substrate.process.cluster import Cluster

ROOT = Path(__file__).resolve().parent.parent
RUN = "20260101T000000-abcdef12"


IMAGE = "kafka-harness/runtime:0123456789ab"
LIBS = "/cache/kafka/4.1.0/libs"
TOXI_BIN = "/cache/toxiproxy/v2.5.0-x/toxiproxy-server"


def make_plan(nodes: int = 3, **kw: Any) -> dp.ClusterPlan:
    ports = [30000 + i for i in range(2 * nodes + 1)]
    settings = {"min.insync.replicas": "2", "num.io.threads": "3"}
    kw = {"image": IMAGE, "kafka_libs": LIBS, "toxiproxy_bin": TOXI_BIN, **kw}
    return dp.plan_cluster(RUN, "host:1:2", "CID", "4.1.0", ports, settings, **kw)


def props_of(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


# --- pure plan ----------------------------------------------------------------------------


def test_names_derive_from_the_run_id() -> None:
    plan = make_plan()
    assert plan.network == "kh-20260101t000000-abcdef12"
    assert plan.toxiproxy == f"{plan.network}-toxiproxy"
    assert [n.container for n in plan.nodes] == [f"{plan.network}-n{i}" for i in (1, 2, 3)]
    assert plan.nodes[1].volume == f"{plan.network}-n2-data"
    assert dp.resource_prefix("A_b/c") == "kh-a-b-c"
    with pytest.raises(HarnessError):
        dp.resource_prefix("__")


def test_ports_split_into_api_proxies_and_observers() -> None:
    plan = make_plan()
    assert plan.api_port == 30000
    assert [n.proxy_port for n in plan.nodes] == [30001, 30002, 30003]
    assert [n.observe_port for n in plan.nodes] == [30004, 30005, 30006]
    with pytest.raises(HarnessError, match="2 \\* nodes \\+ 1"):
        dp.plan_cluster(RUN, "o", "CID", "4.1.0", [1, 2, 3, 4], {})


def test_allocate_ports_contiguous_from_base_and_refuses_taken() -> None:
    assert dp.allocate_ports(2, 100, lambda p: True, lambda: 0) == [100, 101, 102, 103, 104]
    with pytest.raises(HarnessError, match=r"port 102 .* in use") as exc:
        dp.allocate_ports(2, 100, lambda p: p != 102, lambda: 0)
    assert "\n" not in str(exc.value)


def test_allocate_ephemeral_ports_are_distinct() -> None:
    picks = iter([5, 5, 6, 7, 6, 8, 9])
    assert dp.allocate_ports(2, None, lambda p: True, lambda: next(picks)) == [5, 6, 7, 8, 9]


def test_quorum_voters_name_every_controller() -> None:
    plan = make_plan()
    p = plan.network
    assert dp.quorum_voters(plan) == f"1@{p}-n1:9094,2@{p}-n2:9094,3@{p}-n3:9094"


def test_client_listener_is_advertised_as_the_nodes_proxy() -> None:
    plan = make_plan()
    for node in plan.nodes:
        props = dp.node_properties(plan, node.node_id)
        assert props["node.id"] == str(node.node_id)
        adv = dict(item.split("://") for item in props["advertised.listeners"].split(","))
        assert adv["CLIENT"] == f"127.0.0.1:{node.proxy_port}"
        assert adv["INTERNAL"] == f"{node.container}:9093"
        assert adv["OBSERVE"] == f"127.0.0.1:{node.observe_port}"
        listeners = props["listeners"].split(",")
        assert "CONTROLLER://0.0.0.0:9094" in listeners and "CLIENT://0.0.0.0:9092" in listeners
        names = {kv.split(":")[0] for kv in props["listener.security.protocol.map"].split(",")}
        assert names == {"CLIENT", "INTERNAL", "CONTROLLER", "OBSERVE"}
        assert props["controller.quorum.voters"] == dp.quorum_voters(plan)
        assert props["log.dirs"] == dp.DATA_DIR


def test_run_settings_override_base_properties() -> None:
    plan = make_plan()
    plan.settings["log.dirs"] = "/elsewhere"
    props = dp.node_properties(plan, 1)
    assert props["num.io.threads"] == "3" and props["log.dirs"] == "/elsewhere"
    assert props_of(dp.render_properties(props)) == props


def test_proxies_point_at_the_broker_containers() -> None:
    plan = make_plan()
    proxies = dp.proxy_definitions(plan)
    assert [p["name"] for p in proxies] == ["n1", "n2", "n3"]
    for proxy, node in zip(proxies, plan.nodes, strict=True):
        assert proxy["upstream"] == f"{node.container}:9092"
        assert proxy["listen"] == f"0.0.0.0:{node.proxy_port}"
        assert proxy["enabled"] is True


def test_every_spec_carries_the_run_label() -> None:
    plan = make_plan()
    specs = [
        dp.network_spec(plan),
        dp.volume_spec(plan, 2),
        dp.broker_container_spec(plan, 2),
        dp.toxiproxy_container_spec(plan),
        dp.dump_container_spec(plan),
    ]
    for spec in specs:
        assert spec["labels"][dp.LABEL_RUN] == RUN
        assert spec["labels"][dp.LABEL_OWNER] == "host:1:2"
    roles = [s["labels"][dp.LABEL_ROLE] for s in specs]
    assert roles == ["network", "data", "broker", "toxiproxy", "dump"]
    assert specs[2]["labels"][dp.LABEL_NODE] == "2"


def test_broker_spec_passes_config_and_publishes_only_observe() -> None:
    plan = make_plan(transaction_version=2)
    spec = dp.broker_container_spec(plan, 2)
    node = plan.nodes[1]
    assert spec["image"] == IMAGE
    assert spec["network"] == plan.network and spec["hostname"] == node.container
    assert spec["ports"] == {"9095/tcp": ("127.0.0.1", node.observe_port)}
    # Its data volume, and the installation's jars read-only (no Kafka in the image).
    assert spec["volumes"] == {
        node.volume: {"bind": dp.DATA_DIR, "mode": "rw"},
        LIBS: {"bind": "/opt/kafka/libs", "mode": "ro"},
    }
    assert "NET_ADMIN" in spec["cap_add"]
    env = spec["environment"]
    decoded = props_of(base64.b64decode(env["KH_SERVER_PROPERTIES"]).decode())
    assert decoded == dp.node_properties(plan, 2)
    assert env["KH_CLUSTER_ID"] == "CID"
    assert env["KH_FORMAT_ARGS"] == "--feature transaction.version=2"
    assert dp.format_args(make_plan()) == ""


def test_toxiproxy_spec_publishes_api_and_every_proxy() -> None:
    plan = make_plan()
    spec = dp.toxiproxy_container_spec(plan)
    assert spec["ports"]["8474/tcp"] == ("127.0.0.1", plan.api_port)
    for n in plan.nodes:
        assert spec["ports"][f"{n.proxy_port}/tcp"] == ("127.0.0.1", n.proxy_port)
    assert "-host=0.0.0.0" in spec["command"]
    # The process backend's own toxiproxy build, mounted into the runtime image.
    assert spec["image"] == IMAGE and spec["entrypoint"] == [dp.TOXIPROXY_BIN]
    assert spec["volumes"] == {TOXI_BIN: {"bind": dp.TOXIPROXY_BIN, "mode": "ro"}}


def test_dump_helper_mounts_every_volume_read_only() -> None:
    plan = make_plan()
    spec = dp.dump_container_spec(plan)
    assert spec["volumes"] == {
        **{n.volume: {"bind": f"/dump/n{n.node_id}", "mode": "ro"} for n in plan.nodes},
        LIBS: {"bind": dp.KAFKA_LIBS, "mode": "ro"},
    }
    assert spec["network_disabled"] is True


def test_specs_are_accepted_by_the_docker_library() -> None:
    """The real docker library translates every spec (no engine needed for that step)."""
    containers = pytest.importorskip("docker.models.containers")
    plan = make_plan()
    translated = []
    for spec in (
        dp.broker_container_spec(plan, 1),
        dp.toxiproxy_container_spec(plan),
        dp.dump_container_spec(plan),
    ):
        kwargs = {k: v for k, v in spec.items() if k != "detach"}
        translated.append(containers._create_container_args({**kwargs, "version": "1.44"}))
    broker, toxi, helper = (t["host_config"] for t in translated)
    assert broker["PortBindings"] == {
        "9095/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(plan.nodes[0].observe_port)}]
    }
    assert broker["CapAdd"] == ["NET_ADMIN"] and broker["NetworkMode"] == plan.network
    assert broker["Binds"] == [
        f"{plan.nodes[0].volume}:{dp.DATA_DIR}:rw",
        f"{LIBS}:{dp.KAFKA_LIBS}:ro",
    ]
    assert len(toxi["PortBindings"]) == 1 + len(plan.nodes)
    assert all(b.endswith(":ro") for b in helper["Binds"])


def test_fault_commands() -> None:
    assert dp.cut_commands("10.0.0.3") == [
        ["iptables", "-w", "-A", "KH-PART", "-s", "10.0.0.3", "-j", "DROP"],
        ["iptables", "-w", "-A", "KH-PART", "-d", "10.0.0.3", "-j", "DROP"],
    ]
    assert dp.heal_command() == ["iptables", "-w", "-F", "KH-PART"]
    assert dp.partition_pairs(([1], [2, 3])) == [(1, 2), (1, 3)]
    assert dp.partition_pairs(([1], [2], [3])) == [(1, 2), (1, 3), (2, 3)]
    setup = " ".join(" ".join(c) for c in dp.chain_setup_commands())
    assert "-N KH-PART" in setup and "-I INPUT -j KH-PART" in setup
    assert "-I OUTPUT -j KH-PART" in setup
    assert [dp.state_letter(s) for s in ("paused", "running", "exited", None)] == [
        "T",
        "S",
        None,
        None,
    ]


def test_segments_are_classified_like_the_process_backend() -> None:
    got = classify_segments(
        [
            "/dump/n1/out-0/00000000000000000000.log",
            "/dump/n1/__consumer_offsets-3/00000000000000000000.log",
            "/dump/n1/__transaction_state-1/00000000000000000000.log",
            "/dump/n1/__share_group_state-7/00000000000000000000.log",
            "/dump/n1/__cluster_metadata-0/00000000000000000000.log",
            "/dump/n1/out-0/00000000000000000000.index",
            "/dump/n1/bootstrap.checkpoint",
        ]
    )
    assert got == {
        "data": ["/dump/n1/out-0/00000000000000000000.log"],
        "offsets": ["/dump/n1/__consumer_offsets-3/00000000000000000000.log"],
        "txnlog": ["/dump/n1/__transaction_state-1/00000000000000000000.log"],
        "share-state": ["/dump/n1/__share_group_state-7/00000000000000000000.log"],
    }


def test_parse_leader_id() -> None:
    assert coordinators.parse_leader_id("ClusterId: x\nLeaderId: 2\nLeaderEpoch: 5\n") == 2
    with pytest.raises(HarnessError, match="no LeaderId"):
        coordinators.parse_leader_id("garbage")


# --- files under docker/ stay in step with the code ---------------------------------------


def test_compose_files_are_rendered_from_the_plan() -> None:
    plan = dp.compose_plan(DEFAULT_KAFKA_VERSION)
    for name, text in dp.compose_files(plan).items():
        assert (ROOT / "docker" / "compose" / name).read_text() == text, name
    compose = (ROOT / "docker" / "compose.yaml").read_text()
    for n in plan.nodes:
        assert f'"127.0.0.1:{n.proxy_port}:{n.proxy_port}"' in compose
        assert f'"127.0.0.1:{n.observe_port}:9095"' in compose
        assert f"hostname: {n.container}" in compose
    assert f"KH_CLUSTER_ID: {dp.COMPOSE_CLUSTER_ID}" in compose
    # No registry: the local runtime image, the installation's jars and toxiproxy mounted.
    assert "image: ${KH_RUNTIME_IMAGE:?" in compose and "build:" not in compose
    assert compose.count("}:/opt/kafka/libs:ro") == len(plan.nodes)
    assert "}:/usr/local/bin/toxiproxy-server:ro" in compose


def test_runtime_dockerfile_needs_no_registry() -> None:
    """Built on the debootstrapped root fs with Debian's packages only: no registry image."""
    broker = (ROOT / "docker" / "broker" / "Dockerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)", broker, re.M)
    assert froms == ["${ROOTFS}"]
    assert "openjdk-17-jre-headless" in broker and "iptables" in broker
    assert not (ROOT / "docker" / "toxiproxy").exists()
    entry = ROOT / "docker" / "broker" / "kh-entrypoint.sh"
    assert os.access(entry, os.X_OK)
    assert subprocess.run(["sh", "-n", str(entry)], check=False).returncode == 0
    assert "--ignore-formatted" in entry.read_text()


def _run_entrypoint(
    tmp: Path,
    env: dict[str, str],
    jars: tuple[str, ...] = ("kafka_2.13-4.1.0.jar", "log4j-core-2.jar"),
) -> subprocess.CompletedProcess[str]:
    """The image's entrypoint against a stand-in java that prints its main class and args."""
    libs = tmp / "libs"
    libs.mkdir(parents=True, exist_ok=True)
    for jar in jars:
        (libs / jar).write_bytes(b"")
    java = tmp / "java"
    java.write_text('#!/bin/sh\nwhile [ "$1" != "-cp" ]; do shift; done\nshift 2\necho "$*"\n')
    java.chmod(0o755)
    base = {"PATH": os.environ["PATH"], "KH_KAFKA_LIBS": str(libs), "KH_JAVA": str(java)}
    base["KH_CONF"] = str(tmp / "server.properties")
    return subprocess.run(
        ["sh", str(ROOT / "docker" / "broker" / "kh-entrypoint.sh")],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def test_entrypoint_writes_the_config_formats_once_and_starts(tmp_path: Path) -> None:
    plan = make_plan(transaction_version=2)
    env = dp.broker_environment(plan, 1)
    proc = _run_entrypoint(tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    conf = tmp_path / "server.properties"
    assert props_of(conf.read_text()) == dp.node_properties(plan, 1)
    assert proc.stdout.splitlines() == [
        f"kafka.tools.StorageTool format --ignore-formatted -t CID -c {conf} "
        "--feature transaction.version=2",
        f"kafka.Kafka {conf}",
    ]


def test_entrypoint_refuses_a_missing_installation(tmp_path: Path) -> None:
    env = dp.broker_environment(make_plan(), 1)
    proc = _run_entrypoint(tmp_path, env, jars=())
    assert proc.returncode == 2 and "no Kafka jars" in proc.stderr


def test_entrypoint_takes_a_mounted_file_and_refuses_no_config(tmp_path: Path) -> None:
    mounted = tmp_path / "n1.properties"
    mounted.write_text("node.id=1\n")
    proc = _run_entrypoint(tmp_path, {"KH_CLUSTER_ID": "X", "KH_CONFIG_FILE": str(mounted)})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "server.properties").read_text() == "node.id=1\n"
    assert proc.stdout.splitlines()[0] == (
        f"kafka.tools.StorageTool format --ignore-formatted -t X "
        f"-c {tmp_path / 'server.properties'}"
    )
    proc = _run_entrypoint(tmp_path, {"KH_CLUSTER_ID": "X"})
    assert proc.returncode == 2 and "KH_SERVER_PROPERTIES" in proc.stderr
    proc = _run_entrypoint(tmp_path, {})
    assert proc.returncode != 0 and "KH_CLUSTER_ID" in proc.stderr


# --- backend choice -----------------------------------------------------------------------

CASES = [
    # requested, docker available, process problem, expected (or error fragment)
    ("auto", False, None, "process"),
    ("auto", True, None, "process"),
    ("auto", True, "no java", "docker"),
    ("auto", False, "no java", "!no backend can run here"),
    ("process", False, None, "process"),
    ("process", True, None, "process"),
    ("process", False, "no java", "process"),
    ("process", True, "no java", "process"),
    ("docker", True, None, "docker"),
    ("docker", True, "no java", "docker"),
    ("docker", False, None, "!needs a Docker engine"),
    ("docker", False, "no java", "!needs a Docker engine"),
    ("podman", True, None, "!unknown backend"),
]


@pytest.mark.parametrize(("requested", "docker", "problem", "expected"), CASES)
def test_choose_backend(requested: str, docker: bool, problem: str | None, expected: str) -> None:
    problems = {"process": problem, "docker": None if docker else backends.DOCKER_PROBLEM}
    if expected.startswith("!"):
        with pytest.raises(HarnessError) as exc:
            backends.choose_backend(requested, problems)
        message = str(exc.value)
        assert expected[1:] in message
        assert "\n" not in message
        if requested == "auto":
            assert problem is not None and problem in message
    else:
        got = backends.choose_backend(requested, problems)
        assert got == expected


def test_resolve_probes_docker_only_when_it_matters(monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[str] = []
    monkeypatch.setattr(backends, "docker_engine_available", lambda: probes.append("d") or True)
    monkeypatch.setattr(backends, "process_backend_problem", lambda v: probes.append("p"))
    assert backends.resolve_backend("auto") == "process" and probes == ["p"]
    probes.clear()
    assert backends.resolve_backend("process") == "process" and probes == []
    assert backends.resolve_backend("docker") == "docker" and probes == ["d"]
    monkeypatch.setattr(backends, "process_backend_problem", lambda v: "no java")
    assert backends.resolve_backend("auto") == "docker"


def test_backend_argument() -> None:
    parser = argparse.ArgumentParser()
    backends.add_backend_argument(parser)
    assert parser.parse_args([]).backend == "auto"
    assert parser.parse_args(["--backend", "docker"]).backend == "docker"
    with pytest.raises(SystemExit):
        parser.parse_args(["--backend", "podman"])


def test_cluster_subcommand_takes_backend() -> None:
    from harness.cli import build_parser

    args = build_parser().parse_args(["cluster", "--backend", "process"])
    assert args.backend == "process"


@pytest.mark.skipif(backends.docker_engine_available(), reason="an engine would start a cluster")
def test_cluster_command_without_an_engine_is_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "cluster", "--backend", "docker"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: --backend docker needs a Docker engine, and none answered "
        "(is dockerd running and DOCKER_HOST right?)"
    ]


def test_open_cluster_returns_the_chosen_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = ClusterConfig(nodes=1)
    monkeypatch.setattr(backends, "resolve_backend", lambda b, v: b)
    docker_cluster = backends.open_cluster(cfg, "docker")
    assert isinstance(docker_cluster, bd.DockerCluster) and docker_cluster.config is cfg
    assert isinstance(backends.open_cluster(cfg, "process"), Cluster)


def _fake_docker_module(ping: Any) -> Any:
    class Client:
        def ping(self) -> bool:
            return ping()

        def close(self) -> None:
            pass

    mod = type(sys)("docker")
    mod.from_env = lambda **kw: Client()  # type: ignore[attr-defined]
    return mod


def test_docker_engine_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", _fake_docker_module(lambda: True))
    assert backends.docker_engine_available() is True

    def refuse() -> bool:
        raise ConnectionError("Error while fetching server API version")

    monkeypatch.setitem(sys.modules, "docker", _fake_docker_module(refuse))
    assert backends.docker_engine_available() is False
    monkeypatch.setitem(sys.modules, "docker", None)  # library absent
    assert backends.docker_engine_available() is False


def test_connect_engine_errors_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)
    with pytest.raises(HarnessError, match=r"\[docker\]"):
        de.connect_engine()

    def refuse() -> bool:
        raise ConnectionError("Cannot connect\nto the Docker daemon")

    monkeypatch.setitem(sys.modules, "docker", _fake_docker_module(refuse))
    with pytest.raises(HarnessError) as exc:
        de.connect_engine()
    assert str(exc.value) == "no Docker engine answered: Cannot connect"


def test_process_backend_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.kafka.install as install
    import harness.substrate.process.network as network

    monkeypatch.setattr(install, "find_java", lambda: "/usr/bin/java")
    monkeypatch.setattr(install, "is_installed", lambda v: True)
    monkeypatch.setattr(network, "namespaces_available", lambda: False)
    monkeypatch.setattr(backends, "_loopback_aliases_usable", lambda: True)
    assert backends.process_backend_problem() is None

    monkeypatch.setattr(backends, "_loopback_aliases_usable", lambda: False)
    assert "loopback" in (backends.process_backend_problem() or "")
    monkeypatch.setattr(network, "namespaces_available", lambda: True)
    assert backends.process_backend_problem() is None

    monkeypatch.setattr(install, "is_installed", lambda v: False)
    monkeypatch.setattr(backends.shutil, "which", lambda t: None if t == "mvn" else "/bin/" + t)
    assert (
        backends.process_backend_problem("3.9.0")
        == "Kafka 3.9.0 is not installed and mvn is missing"
    )

    def no_java() -> str:
        raise HarnessError("Java not found on PATH: install a JDK 17 or newer")

    monkeypatch.setattr(install, "find_java", no_java)
    assert (backends.process_backend_problem() or "").startswith("Java not found")


def test_project_imports_without_the_docker_libraries() -> None:
    code = (
        "import sys; sys.modules['docker'] = None; sys.modules['testcontainers'] = None\n"
        "import harness.substrate.docker.cluster, harness.substrate.backends, harness.cli\n"
        "from harness.substrate import backends\n"
        "from harness.substrate.docker import cluster\n"
        "print(backends.docker_engine_available(), cluster.reap_docker())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False {'containers': 0, 'volumes': 0, 'networks': 0}"


# --- ownership and reaping ----------------------------------------------------------------


def test_owner_is_dead_only_for_this_host_and_a_gone_process() -> None:
    starts = {10: "555"}
    alive = starts.get
    assert de.owner_is_dead("me:10:555", "me", alive) is False
    assert de.owner_is_dead("me:11:555", "me", alive) is True  # no such pid
    assert de.owner_is_dead("me:10:444", "me", alive) is True  # pid reused by another
    assert de.owner_is_dead("other:11:555", "me", alive) is False  # another host's
    assert de.owner_is_dead("garbage", "me", alive) is False
    assert de.owner_is_dead(de.owner_token(), os.uname().nodename) is False


# --- a fake docker client -----------------------------------------------------------------


class NotFound(Exception):
    """Named like docker.errors.NotFound, which the backend recognises by name."""


class FakeContainer:
    def __init__(self, engine: FakeEngine, spec: dict[str, Any]) -> None:
        self.engine = engine
        self.name = spec["name"]
        self.spec = spec
        self.labels = spec.get("labels", {})
        self.status = "running"
        self.exit_code = 0
        self.ip = engine.next_ip()

    @property
    def attrs(self) -> dict[str, Any]:
        net = self.spec.get("network") or "none"
        return {
            "NetworkSettings": {"Networks": {net: {"IPAddress": self.ip}}},
            "State": {"ExitCode": self.exit_code},
        }

    def _call(self, verb: str, *args: Any) -> None:
        self.engine.calls.append((verb, self.name, *args))

    def pause(self) -> None:
        self._call("pause")
        self.status = "paused"

    def unpause(self) -> None:
        self._call("unpause")
        self.status = "running"

    def kill(self) -> None:
        self._call("kill")
        self.status, self.exit_code = "exited", 137

    def stop(self, timeout: int = 10) -> None:
        self._call("stop", timeout)
        self.status, self.exit_code = "exited", 143

    def start(self) -> None:
        self._call("start")
        self.status = "running"
        self.ip = self.engine.next_ip()  # a restart may move a container

    def exec_run(self, cmd: list[str], **kw: Any) -> tuple[int, Any]:
        self._call("exec", tuple(cmd))
        code, out = self.engine.exec_reply(self, list(cmd))
        return code, ((out, b"") if kw.get("demux") else out)

    def logs(self, **kw: Any) -> bytes:
        return f"log of {self.name}\n".encode()

    def remove(self, **kw: Any) -> None:
        self._call("remove", kw.get("force"), kw.get("v"))
        self.engine.containers.items.pop(self.name, None)


class FakeResource:
    def __init__(self, engine: FakeEngine, kind: str, spec: dict[str, Any]) -> None:
        self.engine, self.kind, self.name = engine, kind, spec["name"]
        self.attrs = {"Labels": spec.get("labels", {})}

    def remove(self, **kw: Any) -> None:
        self.engine.calls.append((f"remove-{self.kind}", self.name))
        getattr(self.engine, self.kind + "s").items.pop(self.name, None)


class FakeCollection:
    def __init__(self, engine: FakeEngine, kind: str) -> None:
        self.engine, self.kind = engine, kind
        self.items: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        if name not in self.items:
            raise NotFound(name)
        return self.items[name]

    def create(self, **spec: Any) -> Any:
        self.engine.calls.append((f"create-{self.kind}", spec["name"]))
        self.items[spec["name"]] = FakeResource(self.engine, self.kind, spec)
        return self.items[spec["name"]]

    def run(self, **spec: Any) -> FakeContainer:
        self.engine.calls.append(("run", spec["name"]))
        self.engine.specs[spec["name"]] = spec
        self.items[spec["name"]] = FakeContainer(self.engine, spec)
        return self.items[spec["name"]]

    def list(self, **kw: Any) -> list[Any]:
        return list(self.items.values())


class FakeImages:
    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine
        self.present: set[str] = set()

    def get(self, name: str) -> str:
        if name not in self.present:
            raise NotFound(name)
        return name

    def build(self, **kw: Any) -> None:
        self.engine.calls.append(("build", kw["tag"], kw["buildargs"]["KAFKA_VERSION"]))
        self.present.add(kw["tag"])

    def pull(self, repo: str, tag: str) -> None:
        self.engine.calls.append(("pull", f"{repo}:{tag}"))
        self.present.add(f"{repo}:{tag}")


DUMP = """\
Dumping /dump/n1/out-0/00000000000000000000.log
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7 \
producerEpoch: 3 partitionLeaderEpoch: 2 isTransactional: true isControl: false \
position: 0 CreateTime: 1 size: 89 magic: 2 compresscodec: none crc: 1 isvalid: true
| offset: 0 CreateTime: 1 keySize: -1 valueSize: 2 sequence: 0 headerKeys: [] payload: v0
"""


class FakeEngine:
    """Just enough of docker.DockerClient for DockerCluster; records every verb."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.specs: dict[str, dict[str, Any]] = {}
        self.containers = FakeCollection(self, "container")
        self.networks = FakeCollection(self, "network")
        self.volumes = FakeCollection(self, "volume")
        self.images = FakeImages(self)
        self._ip = 1
        self.probe_code = 0
        self.refuse_iptables = False

    def next_ip(self) -> str:
        self._ip += 1
        return f"172.30.0.{self._ip}"

    def exec_reply(self, container: FakeContainer, cmd: list[str]) -> tuple[int, bytes]:
        if cmd[0] == "find":
            node = cmd[1].rsplit("/n", 1)[1]
            return 0, f"/dump/n{node}/out-0/00000000000000000000.log\n".encode()
        if cmd[0] == "java" and "org.apache.kafka.tools.DumpLogSegments" in cmd:
            files = cmd[cmd.index("--files") + 1].split(",")  # each file dumped in turn
            first = DUMP.splitlines()[0].removeprefix("Dumping ")
            return 0, "".join(DUMP.replace(first, f) for f in files).encode()
        if cmd[0] == "nc":
            return self.probe_code, b""
        if cmd[:3] == ["iptables", "-w", "-A"] and self.refuse_iptables:
            return 4, b"iptables v1.8: can't initialize iptables table `filter'"
        return 0, b""

    def verbs(self, verb: str) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] == verb]

    def execs(self, name: str) -> list[tuple[str, ...]]:
        return [c[2] for c in self.calls if c[0] == "exec" and c[1] == name]


class FakeToxiproxy:
    instances: ClassVar[list[FakeToxiproxy]] = []

    def __init__(self, binary: Path, api_port: int, log_path: Path, env: dict[str, str]) -> None:
        self.api_port = api_port
        self.calls: list[tuple[Any, ...]] = []
        FakeToxiproxy.instances.append(self)

    def proxies(self) -> dict[str, Any]:
        return {}

    def create_proxy(self, name: str, listen: str, upstream: str) -> None:
        self.calls.append(("create", name, listen, upstream))

    def add_toxic(self, proxy: str, kind: str, attributes: Any = None, **kw: Any) -> str:
        self.calls.append(("toxic", proxy, kind))
        return f"{kind}_downstream"

    def remove_toxic(self, proxy: str, name: str) -> None:
        self.calls.append(("untoxic", proxy, name))

    def set_enabled(self, proxy: str, enabled: bool) -> None:
        self.calls.append(("enabled", proxy, enabled))

    def reset(self) -> None:
        self.calls.append(("reset",))


def fake_installation(version: str | None) -> Any:
    """What ``ensure_installed`` returns, without Maven: the mounts come from it."""
    from harness.kafka.install import Installation
    from harness.kafka.versions import KafkaVersion

    return Installation(KafkaVersion(version or "4.1.0"), Path(LIBS), Path(TOXI_BIN), "java")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """A DockerCluster started against the fake engine; the readiness transaction skipped."""
    engine = FakeEngine()
    monkeypatch.setattr(bd, "Toxiproxy", FakeToxiproxy)
    monkeypatch.setattr(bd, "ensure_installed", fake_installation)
    monkeypatch.setattr(bd, "ensure_runtime_image", lambda client: IMAGE)
    monkeypatch.setattr(bd.tools, "tool_class", lambda inst, name: f"org.apache.kafka.tools.{name}")
    monkeypatch.setattr(bd.DockerCluster, "wait_ready", lambda self, timeout=90.0: None)
    monkeypatch.setattr(bd.DockerCluster, "run_tool", lambda self, name, *a, **kw: "LeaderId: 3\n")
    for module in (sb_lookups, sb_signals):  # registered brokers, a restart seen registered
        monkeypatch.setattr(
            module,
            "fetch_metadata",
            lambda host, port, topics, source, timeout=3.0: ({1, 2, 3}, {}),
        )
    cfg = ClusterConfig(nodes=3, kafka_version="4.1.0", store=tmp_path / "run")
    cluster = bd.DockerCluster(cfg, client=engine, use_ryuk=False)
    return cluster, engine, tmp_path / "run"


def test_start_creates_labelled_resources_and_proxies(fake: Any) -> None:
    cluster, engine, store = fake
    with cluster as c:
        plan = c.plan
        assert not engine.verbs("build") and not engine.verbs("pull")  # nothing from a registry
        assert plan.image == IMAGE and plan.kafka_libs == LIBS and plan.toxiproxy_bin == TOXI_BIN
        assert engine.calls.index(("create-network", plan.network)) < engine.calls.index(
            ("run", plan.toxiproxy)
        )
        assert [c[1] for c in engine.verbs("create-volume")] == [n.volume for n in plan.nodes]
        for name, spec in engine.specs.items():
            assert spec["labels"][dp.LABEL_RUN] == c.run_id, name
        toxi = FakeToxiproxy.instances[-1]
        assert toxi.api_port == plan.api_port
        assert toxi.calls == [
            ("create", f"n{n.node_id}", f"0.0.0.0:{n.proxy_port}", f"{n.container}:9092")
            for n in plan.nodes
        ]
        assert c.bootstrap == ",".join(f"127.0.0.1:{n.proxy_port}" for n in plan.nodes)
        assert c.internal_bootstrap == ",".join(f"127.0.0.1:{n.observe_port}" for n in plan.nodes)
        for n in plan.nodes:
            setup = engine.execs(n.container)
            assert ("iptables", "-w", "-F", "KH-PART") in setup
        saved = props_of((store / "nodes" / "n2" / "server.properties").read_text())
        assert saved == dp.node_properties(plan, 2)
        # What runner.py reads: the installation (tools, Java clients), a host slot (client cuts).
        assert c.install is not None and c.install.libs_dir == Path(LIBS)
        assert c.slot is not None and c.uses_netns and c.backend == "docker"
        assert c.registered_brokers() == {1, 2, 3}
        assert c.active_controller() == 3


def test_leader_believes_the_freshest_view_over_observe_ports(
    fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.kafka.wire import PartitionView

    cluster, _, _ = fake
    asked: list[tuple[str, int]] = []

    def views(host: str, port: int, topics: list[str], source: int, timeout: float = 3.0) -> Any:
        asked.append((host, port))
        leader, epoch = (1, 4) if source == 1 else (2, 5)  # node 1 is stale
        view = PartitionView(source, leader, epoch, (1, 2, 3), (2, 3), 0)
        return {(topics[0], p): view for p in range(10)}

    monkeypatch.setattr(sb_lookups, "fetch_partitions", views)
    with cluster as c:
        assert c.leader("t", 0) == 2 and c.isr("t", 0) == [2, 3]
        assert asked[:3] == [("127.0.0.1", n.observe_port) for n in c.plan.nodes]
        assert c.txn_coordinator("tx-1") == 2 and c.group_coordinator("g") == 2


def test_pause_resume_kill_and_start_drive_the_engine(fake: Any) -> None:
    cluster, engine, _ = fake
    with cluster as c:
        n2 = c.plan.nodes[1].container
        c.pause(2)
        assert ("pause", n2) in engine.calls and c.node_state(2) == "T"
        c.resume(2)
        assert ("unpause", n2) in engine.calls and c.node_state(2) == "S"
        c.kill(3)
        n3 = c.plan.nodes[2].container
        assert ("kill", n3) in engine.calls and not c.node_alive(3)
        c.start_node(3)
        assert ("start", n3) in engine.calls and c.node_alive(3)
        assert c.stop_node(1) is True  # SIGTERM exit (143) counts as clean
        assert ("stop", c.plan.nodes[0].container, 30) in engine.calls


def test_kill_of_a_paused_node_unpauses_first(fake: Any) -> None:
    cluster, engine, _ = fake
    with cluster as c:
        name = c.plan.nodes[0].container
        c.pause(1)
        c.kill(1)
        tail = [v for v in engine.calls if v[1] == name and v[0] != "exec"][-3:]
        assert tail == [("pause", name), ("unpause", name), ("kill", name)]


def test_partition_cuts_both_sides_and_heal_flushes(fake: Any) -> None:
    cluster, engine, _ = fake
    with cluster as c:
        names = [n.container for n in c.plan.nodes]
        ips = {i: c.node(i).ip() for i in (1, 2, 3)}
        before = len(engine.calls)
        c.partition([1], [2, 3])
        cuts = [(v[1], v[2]) for v in engine.calls[before:] if v[0] == "exec" and "-A" in v[2]]
        expect = [
            (names[0], ("iptables", "-w", "-A", "KH-PART", flag, ips[peer], "-j", "DROP"))
            for peer in (2, 3)
            for flag in ("-s", "-d")
        ] + [
            (names[p - 1], ("iptables", "-w", "-A", "KH-PART", flag, ips[1], "-j", "DROP"))
            for p in (2, 3)
            for flag in ("-s", "-d")
        ]
        assert sorted(cuts) == sorted(expect)
        assert c._cut == {1}
        assert c.can_reach(2, 3)
        engine.probe_code = 1
        assert not c.can_reach(1, 2)
        assert engine.execs(names[1])[-1] == ("nc", "-z", "-w", "1", ips[3], "9093")
        before = len(engine.calls)
        c.heal()
        flushed = [v[1] for v in engine.calls[before:] if v[2] == tuple(dp.heal_command())]
        assert flushed == names
        assert c._pairs == [] and c._cut == set()


def test_restart_during_a_partition_reapplies_cuts_with_new_addresses(fake: Any) -> None:
    cluster, engine, _ = fake
    with cluster as c:
        c.isolate(2)
        old_ip = c.node(2).ip()
        c.kill(2)
        c.start_node(2)
        new_ip = c.node(2).ip()
        assert new_ip != old_ip
        n1_rules = [cmd for cmd in engine.execs(c.plan.nodes[0].container) if "-A" in cmd]
        assert n1_rules[-2:] == [
            ("iptables", "-w", "-A", "KH-PART", "-s", new_ip, "-j", "DROP"),
            ("iptables", "-w", "-A", "KH-PART", "-d", new_ip, "-j", "DROP"),
        ]


def test_a_refused_cut_is_one_line_naming_the_container(fake: Any) -> None:
    cluster, engine, _ = fake
    with cluster as c:
        engine.refuse_iptables = True
        with pytest.raises(HarnessError) as exc:
            c.partition([1], [2])
        message = str(exc.value)
        assert "\n" not in message and c.plan.nodes[0].container in message
        assert "can't initialize iptables" in message


def test_toxics_go_to_the_nodes_proxy(fake: Any) -> None:
    cluster, _, _ = fake
    with cluster as c:
        toxi = FakeToxiproxy.instances[-1]
        assert c.add_toxic(2, "latency", {"latency": 500}) == "latency_downstream"
        c.remove_toxic(2, "latency_downstream")
        c.proxy_down(3)
        c.proxy_up(3)
        assert toxi.calls[-4:] == [
            ("toxic", "n2", "latency"),
            ("untoxic", "n2", "latency_downstream"),
            ("enabled", "n3", False),
            ("enabled", "n3", True),
        ]


def test_stop_heals_saves_evidence_and_removes_everything(fake: Any) -> None:
    cluster, engine, store = fake
    with cluster as c:
        c.pause(1)
        c.partition([1], [2, 3])
        plan = c.plan
    toxi = FakeToxiproxy.instances[-1]
    assert ("reset",) in toxi.calls
    assert ("unpause", plan.nodes[0].container) in engine.calls
    assert (
        store / "nodes" / "n1" / "server.log"
    ).read_text() == f"log of {plan.nodes[0].container}\n"
    assert (store / "toxiproxy.log").exists()
    lines = (store / "evidence" / "logdump.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"logdump_format": 1, "nodes": 3}
    rows = [json.loads(x) for x in lines[1:]]
    assert [(r["node"], r["topic"], r["kind"], r["producerId"]) for r in rows] == [
        (i, "out", "data", 7) for i in (1, 2, 3)
    ]
    # Brokers die before the dump helper starts: the dumped files are final.
    last_kill = max(i for i, v in enumerate(engine.calls) if v[0] == "kill")
    assert last_kill < engine.calls.index(("run", f"{plan.network}-dump"))
    assert engine.containers.items == {}
    assert engine.volumes.items == {} and engine.networks.items == {}
    removals = [v for v in engine.calls if v[0].startswith("remove")]
    assert removals[-1] == ("remove-network", plan.network)
    # Forced, with the image's anonymous volumes: nothing unlabelled is left behind.
    assert {v[2:] for v in removals if v[0] == "remove"} == {(True, True)}
    assert len([v for v in removals if v[0] == "remove"]) == 5  # 3 brokers, proxy, helper
    cluster.stop()  # idempotent: nothing more happens
    assert [v for v in engine.calls if v[0].startswith("remove")] == removals


def test_failed_start_removes_what_was_created(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, engine, _ = fake

    def not_ready(self: Any, timeout: float = 90.0) -> None:
        raise HarnessError("brokers never registered")

    monkeypatch.setattr(bd.DockerCluster, "wait_ready", not_ready)
    with pytest.raises(HarnessError, match="never registered"), cluster:
        pass
    assert engine.containers.items == {} and engine.networks.items == {}
    assert engine.volumes.items == {}


def test_transaction_version_needs_kafka_4(fake: Any) -> None:
    _, engine, tmp = fake
    cfg = ClusterConfig(nodes=1, kafka_version="3.9.0", transaction_version=2, store=tmp)
    with pytest.raises(HarnessError, match=r"4\.x only"):
        bd.DockerCluster(cfg, client=engine, use_ryuk=False).start()
    assert engine.calls == []


def test_reap_docker_removes_only_dead_owners(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = FakeEngine()
    host = os.uname().nodename
    dead_owner = f"{host}:999999999:1"  # no such pid
    for name, owner, run in (
        ("dead", dead_owner, "r1"),
        ("mine", de.owner_token(), "r2"),
        ("remote", "elsewhere:1:1", "r3"),
        ("kept", dead_owner, "r4"),
    ):
        labels = {dp.LABEL_RUN: run, dp.LABEL_OWNER: owner}
        engine.containers.run(name=name, labels=labels)
        engine.volumes.create(name=f"{name}-v", labels=labels)
        engine.networks.create(name=f"{name}-net", labels=labels)
    monkeypatch.setattr(de.socket, "gethostname", lambda: host)
    counts = de.reap_docker(engine, keep={"r4"})
    assert counts == {"containers": 1, "volumes": 1, "networks": 1}
    assert sorted(engine.containers.items) == ["kept", "mine", "remote"]
    assert "dead-v" not in engine.volumes.items and "dead-net" not in engine.networks.items


def test_reap_docker_without_an_engine_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_engine(timeout: float = 5.0) -> Any:
        raise HarnessError("no Docker engine answered: refused")

    monkeypatch.setattr(de, "connect_engine", no_engine)
    assert de.reap_docker() == {"containers": 0, "volumes": 0, "networks": 0}


def test_ryuk_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Session label only when Ryuk is enabled and started; never an exception."""
    config = pytest.importorskip("testcontainers.core.config").testcontainers_config
    container = pytest.importorskip("testcontainers.core.container")
    labels = pytest.importorskip("testcontainers.core.labels")
    started: list[bool] = []
    monkeypatch.setattr(container.Reaper, "get_instance", lambda: started.append(True))

    def local() -> str:
        return "kafka-harness/reaper:x"

    monkeypatch.setattr(config, "ryuk_image", config.ryuk_image)  # restored afterwards
    for env in de.RYUK_IMAGE_ENVS:
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(config, "ryuk_disabled", True)
    assert de.ryuk_labels(local) == {} and started == []
    monkeypatch.setattr(config, "ryuk_disabled", False)
    assert de.ryuk_labels(local) == {labels.LABEL_SESSION_ID: labels.SESSION_ID}
    # testcontainers starts the locally built reaper, never its registry image.
    assert started == [True] and config.ryuk_image == "kafka-harness/reaper:x"
    monkeypatch.setenv("RYUK_CONTAINER_IMAGE", "mirror.example/ryuk:0.8.1")
    monkeypatch.setattr(config, "ryuk_image", "mirror.example/ryuk:0.8.1")
    assert de.ryuk_labels(local) and config.ryuk_image == "mirror.example/ryuk:0.8.1"

    def no_ryuk() -> None:
        raise ConnectionError("cannot pull testcontainers/ryuk")

    monkeypatch.setattr(container.Reaper, "get_instance", no_ryuk)
    assert de.ryuk_labels(local) == {}


def test_owner_token_names_this_process() -> None:
    host, pid, start = de.owner_token().rsplit(":", 2)
    assert int(pid) == os.getpid()
    assert re.fullmatch(r"\d+", start)
    assert host == os.uname().nodename


# --- images built without a registry -------------------------------------------------------


def test_debian_mirror_comes_from_the_machines_apt_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.substrate.docker import images

    monkeypatch.delenv("KAFKA_HARNESS_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://security.debian.org/debian-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n"
    )
    assert images.debian_mirror(tmp_path) == "http://mirror.example/debian"
    assert images.debian_mirror(tmp_path / "none") == images.DEFAULT_MIRROR
    monkeypatch.setenv("KAFKA_HARNESS_DEBIAN_MIRROR", "http://other/debian/")
    assert images.debian_mirror(tmp_path) == "http://other/debian"


def test_image_tags_are_keyed_by_content(tmp_path: Path) -> None:
    from harness.substrate.docker import images

    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM x\n")
    first = images.runtime_tag("rootfs:a", ctx)
    assert first == images.runtime_tag("rootfs:a", ctx)  # unchanged input: same tag
    (ctx / "kh-entrypoint.sh").write_text("#!/bin/sh\n")
    second = images.runtime_tag("rootfs:a", ctx)
    assert len({first, second, images.runtime_tag("rootfs:b", ctx)}) == 3
    assert images.rootfs_tag("http://a/debian") != images.rootfs_tag("http://b/debian")
    assert images.runtime_tag("rootfs:a").startswith(images.RUNTIME_REPO + ":")


class _NoImages:
    """An engine with no images; ``build`` fails with the engine's own error text."""

    def __init__(self) -> None:
        self.images = self

    def get(self, name: str) -> None:
        raise NotFound(name)

    def build(self, **kw: Any) -> None:
        raise RuntimeError("The command '/bin/sh -c apt-get update' returned a non-zero code: 100")


def test_image_build_failures_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.substrate.docker import images

    monkeypatch.setenv("KAFKA_HARNESS_CACHE", str(tmp_path))
    monkeypatch.setattr(images, "find_debootstrap", lambda: None)
    with pytest.raises(HarnessError, match="needs debootstrap") as err:
        images.ensure_runtime_image(_NoImages())
    assert "\n" not in str(err.value)
    monkeypatch.setattr(images, "_build_rootfs", lambda tag, mirror: None)
    with pytest.raises(HarnessError, match=r"building kafka-harness/runtime:\w+ failed: ") as err:
        images.ensure_runtime_image(_NoImages())
    assert "\n" not in str(err.value) and "non-zero code: 100" in str(err.value)
