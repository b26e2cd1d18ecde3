"""One broker container, with the process backend's node verbs (pause, kill, stop...)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from common.waits import wait_for
from harness.substrate.docker import plan as dp
from harness.substrate.docker.engine import is_not_found


@dataclass(eq=False)
class DockerNode:
    """A broker container with the process backend's node verbs (pause, kill, stop...)."""

    plan: dp.NodePlan
    client: Any  # the docker engine client
    host_ip: str  # where the engine publishes ports
    network: str  # the cluster network's name

    @property
    def node_id(self) -> int:
        return self.plan.node_id

    @property
    def name(self) -> str:
        return self.plan.container

    @property
    def internal_address(self) -> str:
        """Where the harness reaches this broker directly (the published OBSERVE listener)."""
        return f"{self.host_ip}:{self.plan.observe_port}"

    @property
    def logs(self) -> str:
        return f"docker logs {self.name}"

    def container(self) -> Any:
        return self.client.containers.get(self.name)

    def status(self) -> str | None:
        try:
            return str(self.container().status)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise

    def state(self) -> str | None:
        return dp.state_letter(self.status())

    def alive(self) -> bool:
        return self.status() in ("running", "paused", "restarting")

    def running(self) -> bool:
        return self.status() == "running"

    def ip(self) -> str:
        """The container's address on the cluster network (changes when it restarts)."""
        nets = self.container().attrs["NetworkSettings"]["Networks"]
        return str(nets[self.network]["IPAddress"])

    @property
    def pid(self) -> int | None:
        """The broker JVM's pid on this host (the container's init; a restart changes it)."""
        try:
            pid = int(self.container().attrs.get("State", {}).get("Pid") or 0)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise
        return pid or None

    @property
    def data_dir(self) -> Path:
        """Where the node's data volume lies on this host (a local engine: the harness
        reads it as the process backend reads its nodes' directories)."""
        return Path(self.client.volumes.get(self.plan.volume).attrs["Mountpoint"])

    def exec(self, cmd: list[str]) -> tuple[int, str, str]:
        """Run ``cmd`` as root in the container; (exit code, stdout, stderr)."""
        res = self.container().exec_run(cmd, user="root", demux=True)
        code, output = res[0], res[1]
        out, err = output if isinstance(output, tuple) else (output, b"")
        return (
            int(code if code is not None else -1),
            (out or b"").decode(errors="replace"),
            (err or b"").decode(errors="replace"),
        )

    def must_exec(self, cmd: list[str]) -> str:
        code, out, err = self.exec(cmd)
        if code != 0:
            detail = (err.strip() or out.strip()).splitlines()[-1:] or ["?"]
            raise HarnessError(
                f"{' '.join(cmd[:4])} in {self.name} failed ({code}): {detail[0][:200]}"
            )
        return out

    def pause(self) -> None:
        """``docker pause`` (cgroup freezer), verified like SIGSTOP: state T."""
        if not self.alive():
            raise HarnessError(f"node {self.node_id} is not running")
        self.container().pause()
        wait_for(lambda: self.state() == "T", timeout=10, what=f"node {self.node_id} paused")

    def resume(self) -> None:
        self.container().unpause()
        wait_for(lambda: self.state() != "T", timeout=10, what=f"node {self.node_id} unpaused")

    def kill(self) -> None:
        """SIGKILL the broker: no shutdown hooks, as ``kill -9`` in the process backend."""
        if not self.alive():
            return
        c = self.container()
        if c.status == "paused":
            c.unpause()  # an engine may refuse to kill a frozen container
        c.kill()
        wait_for(lambda: not self.alive(), timeout=30, what=f"node {self.node_id} gone")

    def stop(self, timeout: float = 30.0) -> bool:
        """Clean shutdown (SIGTERM, SIGKILL after ``timeout``); True if it ended cleanly."""
        if not self.alive():
            return True
        c = self.container()
        if c.status == "paused":
            c.unpause()
        c.stop(timeout=int(timeout))
        code = self.container().attrs.get("State", {}).get("ExitCode")
        return code != 137

    def start(self) -> None:
        if self.alive():
            raise HarnessError(f"node {self.node_id} is already running")
        self.container().start()
        wait_for(lambda: self.status() == "running", timeout=30, what=f"{self.name} running")
        for cmd in dp.chain_setup_commands():
            self.must_exec(cmd)
