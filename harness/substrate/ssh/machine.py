"""What the SSH backend does to a machine besides running brokers: Java and Kafka's jars put
in place, the run's directory and firewall chain made, and a dead run's leftovers removed.

Everything a run leaves on a machine is findable from the machine alone: its directory under
``RUNS_ROOT`` (with ``owner.json``: the run and the control machine that started it), its
processes (``KAFKA_HARNESS_RUN=<run>`` in their environment) and its firewall rules (a chain
of its own, jumped to from INPUT and OUTPUT by rules commented ``kafka-harness:<run>``).
Kafka's jars under ``KAFKA_ROOT`` stay, as an installed package does.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
from pathlib import Path

from common.errors import HarnessError
from harness.substrate.runstate import MARKER_ENV
from harness.substrate.ssh.node import KAFKA_ROOT, RUNS_ROOT
from harness.substrate.ssh.remote import Remote

#: Java 17 is what Kafka 4 brokers need; the package names of the families we know.
JAVA_PACKAGES = (
    (
        "apt-get",
        "DEBIAN_FRONTEND=noninteractive apt-get update -q && "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
        "openjdk-17-jre-headless || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
        "--no-install-recommends openjdk-21-jre-headless",
    ),
    ("dnf", "dnf install -y -q java-17-openjdk-headless"),
    ("yum", "yum install -y -q java-17-openjdk-headless"),
    ("apk", "apk add -q openjdk17-jre-headless"),
)


def control_machine_id() -> str:
    """This (control) machine's identity, recorded as the owner of what it starts remotely."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text:
            return text
    import socket

    return socket.gethostname()


def chain_name(run_id: str) -> str:
    """The run's iptables chain (names are at most 28 characters)."""
    return "kh-" + hashlib.sha256(run_id.encode()).hexdigest()[:12]


def tag(run_id: str) -> str:
    return f"kafka-harness:{run_id}"


def _java_major(version_text: str) -> int | None:
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def ensure_java(remote: Remote) -> str:
    """The machine's Java 17+ (its path), installed from its package manager when missing."""
    find = "readlink -f $(command -v java) 2>/dev/null || true"
    java = remote.run(find)[1].strip()
    if java:
        code, out, err = remote.run(f"{shlex.quote(java)} -version", check=False)
        major = _java_major(out + err)
        if code == 0 and major is not None and major >= 17:
            return java
    for manager, cmd in JAVA_PACKAGES:
        if remote.run(f"command -v {manager}", check=False)[0] == 0:
            code, out, err = remote.run(cmd, check=False, timeout=900)
            if code != 0:
                last = (err.strip() or out.strip()).splitlines()[-1:] or ["?"]
                raise HarnessError(
                    f"ssh {remote.host.label}: installing Java 17 with {manager} failed: "
                    f"{last[0][:160]}"
                )
            java = remote.run(find)[1].strip()
            if java:
                return java
            break
    raise HarnessError(
        f"ssh {remote.host.label}: no Java 17+ and no package manager that could install it"
    )


def libs_digest(libs_dir: Path) -> str:
    """Names and sizes of the jars: what the remote copy of a version is keyed by."""
    h = hashlib.sha256()
    for f in sorted(libs_dir.glob("*.jar")):
        h.update(f"{f.name}:{f.stat().st_size}\n".encode())
    return h.hexdigest()[:12]


def ensure_kafka(remote: Remote, version: str, libs_dir: Path) -> str:
    """The directory of Kafka's jars on the machine, copied there (a tar over the SSH
    channel) unless an identical copy is already in place."""
    target = f"{KAFKA_ROOT}/{version}-{libs_digest(libs_dir)}"
    libs = f"{target}/libs"
    if remote.run(f"test -f {target}/complete", check=False)[0] == 0:
        return libs
    tmp = f"{target}.tmp-{hashlib.sha256(remote.host.label.encode()).hexdigest()[:6]}"
    tar = subprocess.Popen(
        ["tar", "-C", str(libs_dir), "-cf", "-", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert tar.stdout is not None
    try:
        remote.run(
            f"rm -rf {tmp} && mkdir -p {tmp}/libs && tar -C {tmp}/libs -xf - && "
            f"touch {tmp}/complete && rm -rf {target} && mv {tmp} {target}",
            stdin=tar.stdout,
            timeout=900,
        )
    finally:
        tar.stdout.close()
        tar.wait(timeout=60)
    return libs


def owner_record(run_id: str) -> str:
    return json.dumps({"run_id": run_id, "control": control_machine_id()})


def chain_setup(run_id: str) -> str:
    """Create the run's chain and jump to it from INPUT and OUTPUT (tagged with the run)."""
    chain, t = chain_name(run_id), tag(run_id)
    return (
        f"iptables -w -N {chain} && "
        f"iptables -w -I INPUT -m comment --comment {t} -j {chain} && "
        f"iptables -w -I OUTPUT -m comment --comment {t} -j {chain}"
    )


def cut_command(run_id: str, peer_ip: str) -> str:
    chain = chain_name(run_id)
    return (
        f"iptables -w -A {chain} -s {peer_ip} -j DROP && "
        f"iptables -w -A {chain} -d {peer_ip} -j DROP"
    )


def heal_command(run_id: str) -> str:
    return f"iptables -w -F {chain_name(run_id)} 2>/dev/null || true"


def reap_run_command(run_id: str) -> str:
    """Remove everything of ``run_id`` on the machine: marked processes (SIGKILL, SIGCONT),
    the tagged jumps and the chain, the run's directory. Idempotent."""
    marker = shlex.quote(f"{MARKER_ENV}={run_id}")
    chain, t = chain_name(run_id), tag(run_id)
    return (
        "for p in /proc/[0-9]*; do "
        f"if tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qxF {marker}; then "
        "kill -9 ${p#/proc/} 2>/dev/null; kill -CONT ${p#/proc/} 2>/dev/null; fi; done; "
        f"iptables -w -S 2>/dev/null | grep -F -- '{t}' | sed 's/^-A /-D /' | "
        "while read -r rule; do eval iptables -w $rule; done; "
        f"iptables -w -F {chain} 2>/dev/null; iptables -w -X {chain} 2>/dev/null; "
        f"rm -rf {RUNS_ROOT}/{run_id}; true"
    )


def leftover_runs(remote: Remote) -> dict[str, str]:
    """run id -> owning control machine, of every run directory on the machine; a run whose
    tagged rules outlived its directory has no known owner ("")."""
    _code, out, _ = remote.run(
        f'for d in {RUNS_ROOT}/*/; do [ -d "$d" ] || continue; '
        'echo "$(basename $d) $(cat $d/owner.json 2>/dev/null | tr -d "\\n")"; done',
        check=False,
    )
    runs = {}
    for line in out.splitlines():
        run_id, _, rest = line.partition(" ")
        try:
            owner = str(json.loads(rest).get("control", ""))
        except ValueError:
            owner = ""
        runs[run_id] = owner
    _code, rules, _ = remote.run("iptables -w -S 2>/dev/null", check=False)
    for run_id in re.findall(r"kafka-harness:([\w.-]+)", rules):
        runs.setdefault(run_id, "")
    return runs


def reap_machine(remote: Remote, live: set[str], everyone: bool = False) -> list[str]:
    """Remove the leftovers of every run on the machine that this control machine started
    and that no live harness here holds (``everyone``: of any control machine's dead-or-not
    runs but the live ones here). Returns the run ids removed."""
    me = control_machine_id()
    removed = []
    for run_id, owner in leftover_runs(remote).items():
        if run_id in live or not re.fullmatch(r"[\w.-]+", run_id):
            continue
        if owner in (me, "") or everyone:
            remote.run(reap_run_command(run_id), check=False, timeout=120)
            removed.append(run_id)
    return removed
