"""Who coordinates what: the look-ups that let a fault be aimed at the right node.

A group's coordinator is the leader of partition ``abs(hash(group)) % N`` of
``__consumer_offsets``; a transactional id's coordinator is the leader of the same function's
partition of ``__transaction_state`` (``hash`` being Java's ``String.hashCode`` and ``abs``
Kafka's ``Utils.abs``, which maps ``Integer.MIN_VALUE`` to 0). Computing this locally costs
nothing and needs no JVM; the tests cross-check it against the brokers' own answer.
"""

from __future__ import annotations

import functools
import itertools
import re
import subprocess
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.cluster import Cluster
    from harness.install import Installation


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % partitions


TOOLS_LOG4J2 = """\
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
"""
TOOLS_LOG4J1 = """\
log4j.rootLogger=WARN, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.Target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=%p %m%n
"""


@functools.cache
def _jar_classes(libs_dir: Path) -> frozenset[str]:
    names: set[str] = set()
    for jar in libs_dir.glob("kafka*.jar"):
        with zipfile.ZipFile(jar) as zf:
            names.update(n[:-6].replace("/", ".") for n in zf.namelist() if n.endswith(".class"))
    return frozenset(names)


def tool_class(install: Installation, simple_name: str) -> str:
    """The fully-qualified class of a Kafka tool: some moved from ``kafka.tools`` in 4.0."""
    classes = _jar_classes(install.libs_dir)
    for pkg in ("org.apache.kafka.tools", "kafka.tools", "kafka.admin"):
        if f"{pkg}.{simple_name}" in classes:
            return f"{pkg}.{simple_name}"
    raise HarnessError(f"Kafka {install.version} has no tool class {simple_name}")


def tools_log_option(install: Installation) -> str:
    """The JVM option that sends a Kafka tool's logging to stderr at WARN."""
    return _tools_log_config(install)


def _tools_log_config(install: Installation) -> str:
    conf = install.libs_dir.parent / (
        "tools-log4j2.properties" if install.log4j2 else "tools-log4j.properties"
    )
    if not conf.exists():
        conf.write_text(TOOLS_LOG4J2 if install.log4j2 else TOOLS_LOG4J1)
    if install.log4j2:
        return f"-Dlog4j2.configurationFile={conf}"
    return f"-Dlog4j.configuration=file:{conf}"


def run_tool(cluster: Cluster, main: str, *args: str, timeout: float = 60.0) -> str:
    """Run one of Kafka's own command-line tools against the cluster; return its stdout."""
    assert cluster.install is not None
    cmd = [
        cluster.install.java,
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Xmx256m",
        _tools_log_config(cluster.install),
        "-cp",
        cluster.install.classpath,
        main,
        *args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=cluster.env, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise HarnessError(f"{main.rsplit('.', 1)[-1]} failed: {last[-1] if last else '?'}")
    return proc.stdout


def active_controller(cluster: Cluster) -> int:
    """The current KRaft quorum leader, as the quorum itself reports it."""
    assert cluster.install is not None
    out = run_tool(
        cluster,
        tool_class(cluster.install, "MetadataQuorumCommand"),
        "--bootstrap-server",
        cluster.internal_bootstrap,
        "describe",
        "--status",
    )
    m = re.search(r"^LeaderId:\s*(\d+)", out, re.M)
    if not m:
        raise HarnessError(f"no LeaderId in metadata quorum status: {out.strip()[:200]}")
    return int(m.group(1))


def describe_transaction_coordinator(cluster: Cluster, transactional_id: str) -> int:
    """The transaction coordinator as the brokers report it (Kafka's TransactionsCommand)."""
    assert cluster.install is not None
    out = run_tool(
        cluster,
        tool_class(cluster.install, "TransactionsCommand"),
        "--bootstrap-server",
        cluster.internal_bootstrap,
        "describe",
        "--transactional-id",
        transactional_id,
    )
    lines = [[c.strip() for c in ln.split("\t")] for ln in out.splitlines() if "\t" in ln]
    for header, row in itertools.pairwise(lines):
        if "CoordinatorId" in header:
            return int(row[header.index("CoordinatorId")])
    raise HarnessError(f"unexpected TransactionsCommand output: {out.strip()[:200]}")
