"""One broker on a machine of its own, driven over SSH: a JVM started in the run's
directory there, carrying the run marker, signalled by its pid."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from common.errors import HarnessError
from common.waits import wait_for
from harness.substrate.process.node import INTERNAL_PORT, JVM_OPTS
from harness.substrate.runstate import MARKER_ENV
from harness.substrate.ssh.remote import Remote

#: Each run's directory on a machine: configs, logs, data, and ``owner.json`` (who to ask
#: whether the run still lives).
RUNS_ROOT = "/var/lib/kafka-harness/runs"
#: Kafka's jars, one directory per version and content (kept between runs, like a package).
KAFKA_ROOT = "/opt/kafka-harness/kafka"


@dataclass(eq=False)
class SshNode:
    """A broker's verbs (pause, kill, start...) as commands on its machine."""

    node_id: int
    remote: Remote
    #: Where the other brokers and the harness reach this machine (an IP address).
    address: str
    run_id: str
    java: str
    libs: str
    log4j2: bool
    pid: int | None = field(default=None)

    @property
    def dir(self) -> str:
        return f"{RUNS_ROOT}/{self.run_id}/n{self.node_id}"

    @property
    def data_dir(self) -> str:
        return f"{self.dir}/data"

    @property
    def internal_address(self) -> str:
        return f"{self.address}:{INTERNAL_PORT}"

    @property
    def logs(self) -> str:
        return f"{self.remote.host.host}:{self.dir}/server.log"

    def java_command(self, main: str, *args: str, opts: tuple[str, ...] = ()) -> str:
        conf = f"{self.dir}/log4j{'2' if self.log4j2 else ''}.properties"
        log_opt = (
            f"-Dlog4j2.configurationFile={conf}"
            if self.log4j2
            else f"-Dlog4j.configuration=file:{conf}"
        )
        words = [self.java, *opts, log_opt, "-cp", f"{self.libs}/*", main, *args]
        return " ".join(shlex.quote(w) for w in words)

    def start(self) -> None:
        """The JVM in a session of its own (it outlives the SSH channel), its pid written by
        the shell that becomes it."""
        if self.alive():
            raise HarnessError(f"node {self.node_id} is already running")
        java = self.java_command(
            "kafka.Kafka",
            f"{self.dir}/server.properties",
            opts=(
                *JVM_OPTS,
                f"-Dkafka.logs.dir={self.dir}",
                f"-Dkafka.harness.node={self.node_id}",
            ),
        )
        inner = f"echo $$ > {self.dir}/pid; exec {java}"
        # The previous incarnation's pid file goes first: read back, it would name a dead
        # (or, once reused, a stranger's) process.
        self.pid = None
        self.remote.run(
            f"rm -f {self.dir}/pid && cd {self.dir} && {MARKER_ENV}={shlex.quote(self.run_id)} "
            f"setsid sh -c {shlex.quote(inner)} >> {self.dir}/stdout.log 2>&1 < /dev/null &"
        )
        wait_for(self._read_pid, timeout=10, what=f"node {self.node_id}'s pid on its machine")

    def _read_pid(self) -> bool:
        code, out, _ = self.remote.run(f"cat {self.dir}/pid 2>/dev/null", check=False)
        if code == 0 and out.strip().isdigit():
            self.pid = int(out.strip())
            return True
        return False

    def state(self) -> str | None:
        """The process's state letter as its kernel reports it (T when stopped), or None."""
        if self.pid is None:
            return None
        code, out, _ = self.remote.run(f"cat /proc/{self.pid}/stat 2>/dev/null", check=False)
        if code != 0 or ")" not in out:
            return None
        state = out.rsplit(")", 1)[1].split()[0]
        return None if state in ("Z", "X") else state

    def alive(self) -> bool:
        return self.state() is not None

    def running(self) -> bool:
        return self.state() not in (None, "T")

    def _signal(self, sig: str) -> None:
        if self.pid is None or not self.alive():
            raise HarnessError(f"node {self.node_id} is not running")
        self.remote.run(f"kill -{sig} {self.pid}")

    def pause(self) -> None:
        """SIGSTOP, verified: returns once the machine's kernel reports state T."""
        self._signal("STOP")
        wait_for(lambda: self.state() == "T", timeout=10, what=f"node {self.node_id} paused")

    def resume(self) -> None:
        self._signal("CONT")
        wait_for(lambda: self.state() != "T", timeout=10, what=f"node {self.node_id} resumed")

    def kill(self) -> None:
        """kill -9 (and SIGCONT, in case it was stopped), then waits until it is gone."""
        if self.pid is None:
            return
        self.remote.run(f"kill -9 {self.pid} 2>/dev/null; kill -CONT {self.pid} 2>/dev/null; true")
        wait_for(lambda: not self.alive(), timeout=30, what=f"node {self.node_id} gone")
        self.pid = None

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM (after SIGCONT: a stopped JVM cannot handle it), SIGKILL after
        ``timeout``; True if it ended cleanly."""
        if self.pid is None or not self.alive():
            self.pid = None
            return True
        self.remote.run(f"kill -CONT {self.pid}; kill -TERM {self.pid}", check=False)
        try:
            wait_for(lambda: not self.alive(), timeout=timeout, what=f"node {self.node_id} stopped")
        except HarnessError:
            self.kill()
            return False
        self.pid = None
        return True
