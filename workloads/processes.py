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

As root every child of a slot runs with a group id of its own (``ClusterAccess.client_gid``:
unique on the machine while the cluster lives; the uid stays root, so file access is the
same), and a successor in the slot gets the same one: a fault can cut one slot's process off
the network by that group (``cut-processor``), as a partition cuts off the machine a client
runs on. :meth:`Supervisor.processor_gids` names them; the fault records the one it cut.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar, Self

from common.errors import HarnessError
from history import Recorder

log = logging.getLogger("workloads.processes")

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def child_env(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with the project put first on ``PYTHONPATH``."""
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def spawn_module(
    module: str,
    args: list[str],
    env: Mapping[str, str],
    log: IO[bytes],
    group: int | None = None,
    python: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``python -m module *args`` in a new session, output to ``log``; ``python`` is
    the interpreter (default: the harness's own)."""
    return spawn_command([python or sys.executable, "-m", module, *args], env, log, group)


def spawn_command(
    cmd: list[str], env: Mapping[str, str], log: IO[bytes], group: int | None = None
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` (a client process: Python, or a JVM of ``workloads.java_clients``) in a
    new session, output to ``log``; with ``group``, as that group id (root only)."""
    return subprocess.Popen(
        cmd,
        env=env,
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        group=group,
    )


_SETGID_EXEC = "import os,sys;os.setgid(int(sys.argv[1]));os.execvp(sys.argv[2],sys.argv[2:])"


def in_group(cmd: list[str], group: int | None) -> list[str]:
    """``cmd`` run as group id ``group`` (root only) for a caller that makes its own
    ``Popen``: a Python that sets the group and executes ``cmd`` in its place (same pid)."""
    if group is None:
        return list(cmd)
    return [sys.executable, "-c", _SETGID_EXEC, str(group), *cmd]


def fs_gid(pid: int) -> int | None:
    """The file-system group id of ``pid`` (the last ``Gid:`` field of its status), None if
    it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Gid:"):
                    return int(line.split()[-1])
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
        return None
    return None


#: What a supervisor calls to start a child: ``start(log file, group id or None)``.
Start = Callable[[IO[bytes], int | None], subprocess.Popen[bytes]]


#: The client contract's exit status of a process the cluster refused for want of an ACL.
EXIT_NOT_AUTHORIZED = 8


class NotAuthorized(HarnessError):
    """A client under test was refused by the cluster's authorizer: a missing ACL, which no
    successor would get past; the run stops (its history is kept) and the harness names the
    ACL (``harness.run.runner``)."""

    def __init__(self, process: int, error: str) -> None:
        super().__init__(f"process {process} was refused by the cluster: {error}")
        self.process = process
        self.error = error


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
    #: The group id it runs with (its slot's own), or None: the group of the harness.
    gid: int | None = None


class Supervisor:
    """Keeps one child per slot alive and records their spawns and exits.

    Subclasses set :attr:`workload_name` and ``options`` (whose ``to_dict`` goes into the
    supervisor's history header), implement ``_spawn(slot, replaces)`` (which calls
    :meth:`_launch`) and :meth:`close`, and may set the class attributes below. A subclass
    with a ``cluster`` (``workloads.base.ClusterAccess``) runs each slot's children with the
    group id the cluster gives that slot (``client_gid``). Used as a context manager, it
    closes on the way out, so no child outlives it.
    """

    #: The workload's name, in the supervisor's history header.
    workload_name: ClassVar[str]
    options: Any

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
        #: Children that exited ``EXIT_NOT_AUTHORIZED``, in order: their slots stay empty.
        self.refused: list[int] = []
        self._next_process = 0
        self._keep_alive = False
        self._stop_monitor = threading.Event()
        self._monitor: threading.Thread | None = None
        self._supervisor: Recorder | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Idempotent: no child outlives the workload, every file is closed."""
        raise NotImplementedError

    def _supervisor_meta(self) -> dict[str, Any]:
        """The header meta of the supervisor's history: the workload and its options."""
        return {"workload": self.workload_name, "role": "supervisor", **self.options.to_dict()}

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
        start: Start,
    ) -> Child:
        """Record the spawn around ``start(log file, group id)`` and put the child in its
        slot; the group id is the slot's (:meth:`_slot_gid`), None to spawn as usual."""
        with self._lock:
            gid = self._slot_gid(slot)
            value = {
                "slot": slot,
                self.id_key: process,
                "transactional_id": transactional_id,
                "replaces": replaces,
            }
            self._record("invoke", "spawn", value)
            logf = open(log_path, "ab")  # noqa: SIM115
            proc = start(logf, gid)
            child = Child(process, slot, proc, logf, time.monotonic(), transactional_id, gid=gid)
            self._children[process] = child
            self._slots[slot] = process
            self._record("ok", "spawn", {**value, "pid": proc.pid})
            return child

    def _slot_gid(self, slot: int) -> int | None:
        """The group id of ``slot``'s children: the cluster's ``client_gid(slot)``, or None
        (no cluster, or one that gives none)."""
        lookup = getattr(getattr(self, "cluster", None), "client_gid", None)
        return lookup(slot) if lookup is not None else None

    def processor_pids(self) -> dict[int, int]:
        """Live children's pids by process id (what a fault pauses or kills)."""
        return {p: c.proc.pid for p, c in self._live().items()}

    def transactional_ids(self) -> dict[int, str]:
        """Live children's transactional ids as spawned (what a hijack fences); a workload
        whose children name their producers themselves overrides it."""
        live = self._live()
        return {p: tid for p, c in live.items() if (tid := c.transactional_id) is not None}

    def processor_gids(self) -> dict[int, int]:
        """Live children's group ids by process id, for those that run with one now (the
        kernel's file-system group id, which iptables' owner match reads): what the
        ``cut-processor`` fault cuts off the network."""
        return {
            p: c.gid
            for p, c in self._live().items()
            if c.gid is not None and fs_gid(c.proc.pid) == c.gid
        }

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
                    if child.proc.returncode == EXIT_NOT_AUTHORIZED and not self._fault_refuses():
                        self.refused.append(child.process)
                        continue
                    if not self._may_respawn():
                        continue
                    if time.monotonic() >= respawn_at.get(slot, 0.0):
                        respawn_at.pop(slot, None)
                        self._spawn(slot, replaces=process)

    def _fault_refuses(self) -> bool:
        """Whether the cluster says a fault withdrew the clients' ACLs or credentials just now
        (``refusals_expected``): a refusal then is the fault's, and the slot gets a
        successor as after any exit."""
        expected = getattr(getattr(self, "cluster", None), "refusals_expected", None)
        return bool(expected is not None and expected())

    def check_refused(self) -> None:
        """Raise :class:`NotAuthorized` for the first child the authorizer refused, with the
        error its exit op names (``not-authorized CODE``)."""
        if not self.refused:
            return
        process = self.refused[0]
        error = "an *_AUTHORIZATION_FAILED error"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.processes_dir / f"{process}.jsonl").read_text().splitlines():
                op = json.loads(line)
                reason = str((op.get("value") or {}).get("reason", ""))
                if op.get("f") == "exit" and reason.startswith("not-authorized "):
                    error = reason.split(" ", 1)[1]
        raise NotAuthorized(process, error)

    def _stop_watching(self) -> None:
        """Stop the keep-alive thread, so nothing is restarted behind the caller's back."""
        self._keep_alive = False
        self._stop_monitor.set()
        if self._monitor is not None:
            self._monitor.join(timeout=10)

    def _stop_children(self, timeout: float, key: str) -> dict[int, int | None]:
        """SIGTERM every live child (SIGCONT first if stopped), SIGKILL stragglers; record
        ``stop`` (invoke ``{key: [ids]}``, ok the return codes) and each exit.

        Stops the keep-alive thread first, so nothing is restarted behind the caller's back.
        """
        self._stop_watching()
        with self._lock:
            live = self._unreaped()
            if not live:
                return {}
            self._record("invoke", "stop", {key: [c.process for c in live]})
            for child in live:
                if child.proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child.proc.pid, signal.SIGCONT)
                        os.kill(child.proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for child in live:
                try:
                    child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("%s %d ignored SIGTERM; killing it", self.id_key, child.process)
                    child.proc.kill()
                    child.proc.wait(timeout=10)
            codes = {c.process: c.proc.returncode for c in live}
            self._record("ok", "stop", {"returncodes": [[i, c] for i, c in codes.items()]})
            for child in live:
                self._reap(child)
            return codes

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
