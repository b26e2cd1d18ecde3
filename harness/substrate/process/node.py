"""One Kafka node: a combined broker+controller JVM in its own network namespace.

The node owns its config, its data directory and its process. Control verbs (pause, resume,
kill, restart, clean stop) act on the JVM's pid directly: ``ip netns exec`` replaces itself
with the JVM, so the pid we spawn is the broker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from common.errors import HarnessError
from common.procfs import process_state
from common.waits import wait_for
from harness.kafka.install import Installation
from harness.substrate.process.network import NodeNet

CLIENT_PORT = 9092
INTERNAL_PORT = 9093
CONTROLLER_PORT = 9094

# Small heap, C1 only and few GC threads: three to five of these share two cores with the
# clients under test, and start-up time matters more than peak JIT throughput here.
JVM_OPTS = [
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]

LOG4J2 = """\
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""

LOG4J1 = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
"""


def broker_properties(
    node_id: int,
    bind: str,
    address: str,
    client_advertised: tuple[str, int],
    voters: str,
    data_dir: str,
    settings: dict[str, str],
) -> dict[str, str]:
    """A combined broker+controller node's settings: listeners bound on ``bind``, the
    inter-broker one advertised at ``address`` (where its peers reach it), the client one at
    ``client_advertised`` (its toxiproxy listener); ``settings`` over all of it."""
    host, port = client_advertised
    base = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": (
            f"CLIENT://{bind}:{CLIENT_PORT},INTERNAL://{bind}:{INTERNAL_PORT},"
            f"CONTROLLER://{bind}:{CONTROLLER_PORT}"
        ),
        "advertised.listeners": f"CLIENT://{host}:{port},INTERNAL://{address}:{INTERNAL_PORT}",
        "listener.security.protocol.map": (
            "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
        ),
        "inter.broker.listener.name": "INTERNAL",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": data_dir,
    }
    base.update(settings)
    return base


def render_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def log_config(log4j2: bool, log_path: str) -> str:
    """The broker's logging configuration: everything into ``log_path``."""
    return (LOG4J2 if log4j2 else LOG4J1).format(log=log_path)


class KafkaNode:
    """A node's files and process; the Cluster composes several of these."""

    def __init__(
        self,
        node_id: int,
        net: NodeNet,
        install: Installation,
        directory: Path,
        client_advertised: tuple[str, int],
        env: dict[str, str],
    ) -> None:
        self.node_id = node_id
        self.net = net
        self.install = install
        self.dir = directory
        self.data_dir = directory / "data"
        self.config_path = directory / "server.properties"
        self.log_path = directory / "server.log"
        self.stdout_path = directory / "stdout.log"
        self.client_advertised = client_advertised
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        #: ``-javaagent:`` options of a broker patch (``harness.kafka.brokerpatch``).
        self.agent_opts: list[str] = []
        #: Options of a secured cluster (``use_hosts_file``).
        self.security_opts: list[str] = []

    @property
    def internal_address(self) -> str:
        return f"{self.net.ip}:{INTERNAL_PORT}"

    @property
    def controller_address(self) -> str:
        return f"{self.net.ip}:{CONTROLLER_PORT}"

    def write_config(self, voters: str, settings: dict[str, str]) -> None:
        props = broker_properties(
            self.node_id,
            self.net.ip,
            self.net.ip,
            self.client_advertised,
            voters,
            str(self.data_dir),
            settings,
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(render_properties(props))
        log_conf = self.dir / ("log4j2.properties" if self.install.log4j2 else "log4j.properties")
        log_conf.write_text(log_config(self.install.log4j2, str(self.log_path)))

    def _java(self, main: str, *args: str, extra_opts: list[str] | None = None) -> list[str]:
        log_conf = self.dir / ("log4j2.properties" if self.install.log4j2 else "log4j.properties")
        log_opt = (
            f"-Dlog4j2.configurationFile={log_conf}"
            if self.install.log4j2
            else f"-Dlog4j.configuration=file:{log_conf}"
        )
        return [
            self.install.java,
            *(extra_opts or []),
            log_opt,
            "-cp",
            self.install.classpath,
            main,
            *args,
        ]

    def use_hosts_file(self, names: dict[str, str]) -> None:
        """Resolve names from a file of the node's own, ``names`` (address to name).

        A SASL listener asks the JVM for the name of the address a connection came in on.
        Inside a namespace the machine's name server is out of reach, so each such lookup
        waited for the resolver's timeouts: a secured cluster took a minute to pass its
        readiness transaction. The file answers at once."""
        path = self.dir / "hosts"
        path.write_text("".join(f"{a} {n}\n" for a, n in names.items()))
        self.security_opts = [f"-Djdk.net.hosts.file={path}"]

    def format_command(
        self, cluster_id: str, transaction_version: int | None, extra: list[str] | None = None
    ) -> list[str]:
        args = ["format", "-t", cluster_id, "-c", str(self.config_path), *(extra or [])]
        if transaction_version is not None:
            args += ["--feature", f"transaction.version={transaction_version}"]
        return self._java(
            "kafka.tools.StorageTool",
            *args,
            extra_opts=["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto"],
        )

    def start(self) -> None:
        if self.alive():
            raise HarnessError(f"node {self.node_id} is already running")
        out = open(self.stdout_path, "ab")  # noqa: SIM115 - handed to the child
        cmd = self.net.exec_prefix() + self._java(
            "kafka.Kafka",
            str(self.config_path),
            extra_opts=[
                *JVM_OPTS,
                *self.agent_opts,
                *self.security_opts,
                f"-Dkafka.logs.dir={self.dir}",
                f"-Dkafka.harness.node={self.node_id}",
            ],
        )
        self.proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )
        out.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def state(self) -> str | None:
        return process_state(self.proc.pid) if self.alive() and self.proc else None

    def running(self) -> bool:
        return self.alive() and self.state() != "T"

    @property
    def logs(self) -> str:
        return str(self.log_path)

    def pause(self) -> None:
        """SIGSTOP, verified: returns once the kernel reports the JVM stopped (state T)."""
        self._signal(signal.SIGSTOP)
        wait_for(
            lambda: self.state() == "T",
            timeout=10,
            interval=0.005,
            what=f"node {self.node_id} to reach state T",
        )

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        wait_for(
            lambda: self.state() != "T",
            timeout=10,
            interval=0.005,
            what=f"node {self.node_id} to leave state T",
        )

    def _signal(self, sig: signal.Signals) -> None:
        if not self.alive() or self.proc is None:
            raise HarnessError(f"node {self.node_id} is not running")
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """kill -9: no shutdown hooks, no clean log close (the crash the tests want)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
            os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.wait(timeout=30)
        self.proc = None

    def stop(self, timeout: float = 30.0) -> bool:
        """Clean shutdown (SIGTERM); escalates to SIGKILL. True if it stopped cleanly."""
        if self.proc is None:
            return True
        if self.proc.poll() is not None:
            self.proc = None
            return True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)  # a paused JVM cannot handle SIGTERM
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
            clean = True
        except subprocess.TimeoutExpired:
            clean = False
            self.kill()
        self.proc = None
        return clean
