"""The SSH backend against real SSH servers: three machines of ``python -m harness ssh-lab``
(containers reachable only by SSH with the lab's key; the harness uses no Docker API on
them). Every fault kind on the machines, the evidence fetched back, nothing left on them after
a run or after a SIGKILLed harness and ``reap --hosts``, a refusing or rootless machine as one
line, the machines' host keys (written by the lab, recorded on first use, a changed one
refused), and the scenario suite run with ``--backend ssh``. Skipped without a Docker
engine."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from common.errors import HarnessError
from harness.substrate import readiness
from harness.substrate.api import ClusterConfig
from harness.substrate.backends import docker_engine_available
from harness.substrate.runstate import marked_processes
from harness.substrate.ssh.cluster import SshCluster, connect_all
from harness.substrate.ssh.hosts import HostKeyTrust, load_hosts, render_hosts
from harness.substrate.ssh.node import RUNS_ROOT

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(not docker_engine_available(), reason="no Docker engine answers"),
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Three lab machines for the module; removed (and checked gone) at its end."""
    from harness.substrate.docker.engine import connect_engine
    from harness.substrate.ssh.lab import LAB_LABEL, lab_down, lab_up

    hosts = tmp_path_factory.mktemp("lab") / "hosts.toml"
    lab_up(3, hosts)
    name = load_hosts(hosts).lab
    yield hosts
    lab_down(hosts)
    client = connect_engine()
    assert not client.containers.list(all=True, filters={"label": f"{LAB_LABEL}={name}"})
    assert not hosts.exists()


def leftovers(hosts: Path) -> dict[str, str]:
    """Per machine, what any run left there: run directories, marked processes, tagged
    rules (asked over SSH, as the harness asks)."""
    remotes = connect_all(load_hosts(hosts).hosts)
    found = {}
    try:
        for r in remotes:
            _, out, _ = r.run(
                f"ls -A {RUNS_ROOT} 2>/dev/null; "
                "grep -l KAFKA_HARNESS_RUN= /proc/[0-9]*/environ 2>/dev/null; "
                "iptables -w -S | grep kafka-harness; true"
            )
            if out.strip():
                found[r.host.host] = out.strip()
    finally:
        for r in remotes:
            r.close()
    return found


def test_every_fault_kind_on_the_machines_and_nothing_left(lab: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with SshCluster(ClusterConfig(hosts=str(lab), store=store)) as c:
        assert c.registered_brokers() == {1, 2, 3}
        c.pause(1)
        assert c.node_state(1) == "T"
        c.resume(1)
        assert c.node_state(1) not in (None, "T")
        c.partition([1], [2, 3])
        assert not c.can_reach(1, 2) and not c.can_reach(3, 1) and c.can_reach(2, 3)
        c.heal()
        assert c.can_reach(1, 2) and c.can_reach(3, 1)
        c.kill(3)
        assert not c.node_alive(3)
        c.start_node(3)
        c.pause(3)  # the new incarnation's pid, not the killed one's
        assert c.node_state(3) == "T"
        c.resume(3)
        c.restart(2, clean=True)
        assert c.registered_brokers() == {1, 2, 3}
        c.proxy_down(1)
        c.heal_all()
        readiness.transactional_round_trip(c, 60)
        run_id = c.run_id
    assert leftovers(lab) == {}
    assert not [pid for pid, rid in marked_processes().items() if rid == run_id]
    assert "Kafka Server started" in (store / "nodes" / "n3" / "server.log").read_text()
    dump = (store / "evidence" / "logdump.jsonl").read_text().splitlines()
    assert len(dump) > 1 and {json.loads(x).get("node") for x in dump[1:]} >= {1, 2, 3}


def test_a_sigkilled_harness_is_reaped_from_the_machines(lab: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "cluster", "--backend", "ssh", "--hosts", str(lab),
         "--hold", "300", "--store", str(tmp_path / "store")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())  # printed once the cluster is ready
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    left = leftovers(lab)
    assert len(left) == 3 and all(info["run_id"] in out for out in left.values()), left
    reap = subprocess.run(
        [sys.executable, "-m", "harness", "reap", "--hosts", str(lab)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert reap.returncode == 0, reap.stderr
    assert all(runs == [info["run_id"]] for runs in json.loads(reap.stdout)["ssh"].values())
    assert leftovers(lab) == {}
    assert not [p for p, rid in marked_processes().items() if rid == info["run_id"]]


def test_a_refusing_or_rootless_machine_is_one_line(lab: Path, tmp_path: Path) -> None:
    good = load_hosts(lab).hosts
    cases = {
        "refused": ([replace(good[0], host="127.0.0.1", port=1)], "refused", []),
        "rootless": (
            [replace(h, user="harness") for h in good],
            "is not root and has no passwordless sudo",
            [],
        ),
        "unknown": ([replace(good[0], host_key=None)], "unknown host key ssh-ed25519 SHA256:", []),
        "changed": (  # refused even so
            [replace(good[0], host_key=ed25519_public())],
            "host key mismatch, refused",
            ["--accept-new-host-keys"],
        ),
    }
    for name, (hosts, says, flags) in cases.items():
        path = tmp_path / f"{name}.toml"
        path.write_text(render_hosts(hosts))
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "cluster", "--backend", "ssh", "--hosts",
             str(path), "--nodes", str(len(hosts)), *flags],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr
    assert leftovers(lab) == {}


def ed25519_public() -> str:
    """A host key no machine has."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public = Ed25519PrivateKey.generate().public_key()
    return public.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()


def test_the_lab_s_host_keys_are_checked_and_recorded_on_first_use(
    lab: Path, tmp_path: Path
) -> None:
    """The lab's hosts file carries each machine's key, enough on its own (no known_hosts
    file anywhere); a wrong recorded key is refused even with --accept-new-host-keys; a file
    without keys is refused, then recorded by ``reap --accept-new-host-keys``, then known."""
    from harness.substrate.ssh.remote import Remote

    hosts = load_hosts(lab).hosts
    assert all(h.host_key and h.host_key.startswith("ssh-ed25519 ") for h in hosts), hosts
    nowhere = tmp_path / "no-such-known-hosts"
    for r in connect_all(hosts, HostKeyTrust(nowhere, user_known_hosts=nowhere)):
        r.close()
    wrong = replace(hosts[0], host_key=ed25519_public())
    with pytest.raises(HarnessError, match="host key mismatch, refused") as err:
        Remote(wrong, trust=HostKeyTrust(nowhere, True, nowhere)).connect()
    assert wrong.host_key and str(err.value).count("ssh-ed25519 SHA256:") == 2
    assert not nowhere.exists()

    bare = tmp_path / "bare.toml"
    bare.write_text(render_hosts([replace(h, host_key=None) for h in hosts]))

    def reap(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness", "reap", "--hosts", str(bare), *flags],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    refused = reap()
    assert refused.returncode == 2 and "--accept-new-host-keys" in refused.stderr
    accepted = reap("--accept-new-host-keys")
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stderr.count("new host key ssh-ed25519 SHA256:") == 3, accepted.stderr
    recorded = (tmp_path / "bare.known_hosts").read_text().splitlines()
    assert sorted(recorded) == sorted(f"{h.host} {h.host_key}" for h in hosts)
    again = reap()
    assert again.returncode == 0 and again.stderr == "", again.stderr


def test_a_machine_without_java_gets_it_from_its_package_manager(lab: Path) -> None:
    from harness.substrate.ssh import machine

    remote = connect_all(load_hosts(lab).hosts[-1:])[0]
    try:
        remote.run(
            "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q openjdk-17-jre-headless",
            timeout=300,
        )
        assert remote.run("command -v java", check=False)[0] != 0
        java = machine.ensure_java(remote)
        assert "17." in remote.run(f"{java} -version")[2]
    finally:
        remote.close()


def test_the_scenario_suite_passes_on_the_machines(lab: Path, tmp_path: Path) -> None:
    """The suite's kill scenario on the Java processors (the confluent-kafka one meets
    finding F5 now and then), given partitions and pauses too with ``--nemesis``, with
    ``--backend ssh``: as a user runs it, passing, and leaving nothing on the machines."""
    junit = tmp_path / "suite.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "harness/test_scenarios.py", "--backend", "ssh",
         "--hosts", str(lab), "-k", "java-kills",
         "--nemesis", "partition,pause,pause-processor,kill,kill-processor",
         "-p", "no:xdist", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}",
         "--time-limit", "20", "--store", str(tmp_path / "store")],
        cwd=ROOT, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, tail
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0"), tail
    clusters = [json.loads(p.read_text()) for p in (tmp_path / "store").rglob("cluster.json")]
    assert clusters and {c["backend"] for c in clusters} == {"ssh"}, clusters
    assert leftovers(lab) == {}
