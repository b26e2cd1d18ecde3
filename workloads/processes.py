"""Child processes of a workload's supervisor: how they are started and kept alive.

Every child is ``python -m <module>`` (or the JVM of its Java twin) in a session of its own
(a Ctrl-C or a signal to the harness's process group does not reach it; the nemeses signal it
by pid), with the cluster's environment (so the reaper finds it by its run marker if the
harness dies) and the project on ``PYTHONPATH``, its stdout and stderr in a log file.

:class:`Supervisor` keeps one child per slot alive: when a child exits it records the exit and
starts a successor with a new history process id in the same slot, no sooner than
``min_lifetime_s`` after its predecessor started (a child that cannot start does not spin the
CPU). Spawns and exits are recorded as ``invoke``/``ok`` pairs in the history of process
``"supervisor"`` (``processes/supervisor.jsonl``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from history import Recorder

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def child_env(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with the project put first on ``PYTHONPATH``."""
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def spawn_module(
    module: str, args: list[str], env: Mapping[str, str], log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start ``python -m module *args`` in a new session, output to ``log``."""
    return spawn_command([sys.executable, "-m", module, *args], env, log)


def spawn_command(
    cmd: list[str], env: Mapping[str, str], log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` (a client process: Python, or a JVM of ``workloads.java_clients``) in a
    new session, output to ``log``."""
    return subprocess.Popen(
        cmd,
        env=env,
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


@dataclass
class Child:
    """One child process (``process`` is its history process id)."""

    process: int
    slot: int
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float
    transactional_id: str | None = None
    reaped: bool = False


class Supervisor:
    """Keeps one child per slot alive and records their spawns and exits.

    Subclasses implement ``_supervisor_meta`` and ``_spawn(slot, replaces)`` (which calls
    :meth:`_launch`), and set the class attributes below.
    """

    #: The key that names the child in the spawn and exit ops' values.
    id_key = "process"
    #: The ``f`` of the op that records a child's exit.
    exit_f = "exit"
    min_lifetime_s = 1.0
    monitor_interval_s = 0.1

    def __init__(self, run_dir: Path) -> None:
        """Children write ``run_dir/processes/<process>.jsonl`` and log to ``run_dir/logs``."""
        self.run_dir = Path(run_dir)
        self.processes_dir = self.run_dir / "processes"
        self.logs_dir = self.run_dir / "logs"
        self.processes_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._children: dict[int, Child] = {}  # every child ever started
        self._slots: dict[int, int] = {}  # slot -> its current child's process id
        self._next_process = 0
        self._keep_alive = False
        self._stop_monitor = threading.Event()
        self._monitor: threading.Thread | None = None
        self._supervisor: Recorder | None = None

    def _supervisor_meta(self) -> dict[str, Any]:
        """The header meta of the supervisor's history."""
        raise NotImplementedError

    def _record(self, type_: str, f: str, value: Any, error: Any = None) -> None:
        """One op of process ``"supervisor"`` (its file is created on the first op)."""
        with self._lock:
            if self._supervisor is None:
                self._supervisor = Recorder(
                    self.processes_dir / "supervisor.jsonl",
                    "supervisor",
                    meta=self._supervisor_meta(),
                )
            self._supervisor.record(type_, f, value, error)  # type: ignore[arg-type]

    def _spawn(self, slot: int, replaces: int | None = None) -> Child:
        raise NotImplementedError

    def _may_respawn(self) -> bool:
        """Whether a child that exited gets a successor now."""
        return True

    def _allocate_process(self) -> int:
        with self._lock:
            process = self._next_process
            self._next_process += 1
            return process

    def _launch(
        self,
        slot: int,
        process: int,
        replaces: int | None,
        transactional_id: str | None,
        log_path: Path,
        start: Callable[[IO[bytes]], subprocess.Popen[bytes]],
    ) -> Child:
        """Record the spawn around ``start(log file)`` and put the child in its slot."""
        with self._lock:
            value = {
                "slot": slot,
                self.id_key: process,
                "transactional_id": transactional_id,
                "replaces": replaces,
            }
            self._record("invoke", "spawn", value)
            logf = open(log_path, "ab")  # noqa: SIM115
            proc = start(logf)
            child = Child(process, slot, proc, logf, time.monotonic(), transactional_id)
            self._children[process] = child
            self._slots[slot] = process
            self._record("ok", "spawn", {**value, "pid": proc.pid})
            return child

    def _reap(self, child: Child) -> None:
        """Record that a child is gone (exit status; negative = killed by that signal)."""
        value = {"slot": child.slot, self.id_key: child.process, "pid": child.proc.pid}
        self._record("invoke", self.exit_f, value)
        self._record("ok", self.exit_f, {**value, "returncode": child.proc.returncode})
        child.reaped = True
        child.log.close()

    def _start_children(self, count: int, thread_name: str) -> None:
        """Spawn slots ``0..count-1`` and the thread that keeps them alive."""
        for slot in range(count):
            self._spawn(slot)
        self._keep_alive = True
        self._monitor = threading.Thread(target=self._watch, name=thread_name, daemon=True)
        self._monitor.start()

    def _watch(self) -> None:
        respawn_at: dict[int, float] = {}
        while not self._stop_monitor.wait(self.monitor_interval_s):
            with self._lock:
                if not self._keep_alive:
                    return
                for slot, process in list(self._slots.items()):
                    child = self._children[process]
                    if child.proc.poll() is None:
                        continue
                    if not child.reaped:
                        self._reap(child)
                        lived = time.monotonic() - child.started
                        respawn_at[slot] = time.monotonic() + max(0.0, self.min_lifetime_s - lived)
                    if not self._may_respawn():
                        continue
                    if time.monotonic() >= respawn_at.get(slot, 0.0):
                        respawn_at.pop(slot, None)
                        self._spawn(slot, replaces=process)

    def _stop_watching(self) -> None:
        """Stop the keep-alive thread, so nothing is restarted behind the caller's back."""
        self._keep_alive = False
        self._stop_monitor.set()
        if self._monitor is not None:
            self._monitor.join(timeout=10)

    def _live(self) -> dict[int, Child]:
        """The slots' current children that are still running, by process id."""
        with self._lock:
            return {
                p: self._children[p]
                for p in self._slots.values()
                if self._children[p].proc.poll() is None
            }

    def _unreaped(self) -> list[Child]:
        """The slots' current children whose exit is not recorded yet."""
        with self._lock:
            current = [self._children[p] for p in self._slots.values()]
            return [c for c in current if not c.reaped]

    def _close_files(self) -> None:
        """Close every child's log and the supervisor's history (idempotent)."""
        with self._lock:
            for c in self._children.values():
                if not c.log.closed:
                    c.log.close()
            if self._supervisor is not None:
                self._supervisor.close()
