"""Kafka's own command-line tools, run with the installed jars.

The harness asks the brokers through Kafka's tools where no client library can answer
(quorum status, transaction state, log segment dumps, the Java copier). Tool classes moved
from ``kafka.tools`` to ``org.apache.kafka.tools`` in 4.0, so a tool is named by its simple
class name and resolved against the installed jars.
"""

from __future__ import annotations

import functools
import subprocess
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from common.errors import HarnessError

if TYPE_CHECKING:
    from harness.kafka.install import Installation

#: JVM options of a short-lived tool: start-up time matters more than peak speed.
TOOL_JVM_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")

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
    # The share groups' command is in ``...tools.consumer.group`` beside the consumer groups';
    # the reassignment tool moved to a package of its own in 3.8.
    packages = (
        "org.apache.kafka.tools",
        "org.apache.kafka.tools.consumer.group",
        "org.apache.kafka.tools.reassign",
    )
    for pkg in (*packages, "kafka.tools", "kafka.admin"):
        if f"{pkg}.{simple_name}" in classes:
            return f"{pkg}.{simple_name}"
    raise HarnessError(f"Kafka {install.version} has no tool class {simple_name}")


def tools_log_option(install: Installation) -> str:
    """The JVM option that sends a Kafka tool's logging to stderr at WARN."""
    conf = install.libs_dir.parent / (
        "tools-log4j2.properties" if install.log4j2 else "tools-log4j.properties"
    )
    if not conf.exists():
        conf.write_text(TOOLS_LOG4J2 if install.log4j2 else TOOLS_LOG4J1)
    if install.log4j2:
        return f"-Dlog4j2.configurationFile={conf}"
    return f"-Dlog4j.configuration=file:{conf}"


def tool_command(
    install: Installation, simple_name: str, jvm_opts: tuple[str, ...] = TOOL_JVM_OPTS
) -> list[str]:
    """The command line that starts tool ``simple_name`` (arguments follow)."""
    main = tool_class(install, simple_name)
    return [install.java, *jvm_opts, tools_log_option(install), "-cp", install.classpath, main]


def run_tool(
    install: Installation,
    env: dict[str, str],
    simple_name: str,
    *args: str,
    timeout: float = 60.0,
) -> str:
    """Run one of Kafka's own command-line tools; return its stdout."""
    main = tool_class(install, simple_name)
    cmd = [*tool_command(install, simple_name), *args]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise HarnessError(f"{main.rsplit('.', 1)[-1]} failed: {last[-1] if last else '?'}")
    return proc.stdout
