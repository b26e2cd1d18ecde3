"""Live progress of a run, read from the history files as they grow.

The display knows nothing about the workload or the nemeses but what the workload declares
(which op shows its load under way, ``workloads.spec.WorkloadSpec.load_started``): it tails the
per-process history files in ``<run>/processes/`` (the same contract the checkers read), so it
shows what the history will show, and it cannot disturb the run. On a terminal it is a ``rich``
live panel; otherwise (CI logs, README captures) one plain line every ``every`` seconds.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history.schema import is_nemesis

#: Supervisor ops that start / end a client process (docs/history-format.md).
_SPAWN = "spawn"
_EXITS = ("processor-exit", "exit", "worker-exit")


@dataclass
class Snapshot:
    elapsed: float
    time_limit: float
    ops: int
    ops_per_s: float
    faults: list[str]
    alive: int
    spawned: int
    phase: str

    def line(self) -> str:
        faults = ", ".join(self.faults) if self.faults else "none"
        return (
            f"[{self.elapsed:5.0f}s / {self.time_limit:.0f}s {self.phase}] ops {self.ops} "
            f"({self.ops_per_s:.0f}/s); processes alive {self.alive} "
            f"(spawned {self.spawned}); faults: {faults}"
        )


@dataclass
class _Tail:
    """Complete lines appended to one file since the last read."""

    path: Path
    offset: int = 0
    rest: bytes = b""

    def new_lines(self) -> list[bytes]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        return [line for line in lines if line.strip()]


@dataclass
class RunWatcher:
    """Folds the growing history of one run into a :class:`Snapshot`."""

    run_dir: Path
    time_limit: float
    #: Whether a completed op shows the load under way (the workload's declaration).
    load_started: Callable[[Mapping[str, Any]], bool] = lambda op: False
    started: float = field(default_factory=time.monotonic)
    _tails: dict[Path, _Tail] = field(default_factory=dict)
    _ops: int = 0
    _faults: dict[Any, str] = field(default_factory=dict)
    _pids: set[Any] = field(default_factory=set)
    _spawned: int = 0
    _recent: list[tuple[float, int]] = field(default_factory=list)
    _phase: str = "setting up"

    def poll(self) -> Snapshot:
        for path in sorted((self.run_dir / "processes").glob("*.jsonl")):
            tail = self._tails.setdefault(path, _Tail(path))
            for raw in tail.new_lines():
                try:
                    op = json.loads(raw)
                except ValueError:
                    continue
                if "type" in op:
                    self._fold(op)
        now = time.monotonic()
        # A window of about 10 s, always keeping the previous poll so the rate is defined
        # however often (or rarely) the display polls.
        self._recent = [(t, n) for t, n in self._recent[:-1] if now - t <= 10.0] + [
            *self._recent[-1:]
        ]
        self._recent.append((now, self._ops))
        t0, n0 = self._recent[0]
        rate = (self._ops - n0) / (now - t0) if now > t0 else 0.0
        return Snapshot(
            elapsed=now - self.started,
            time_limit=self.time_limit,
            ops=self._ops,
            ops_per_s=rate,
            faults=sorted(self._faults.values()),
            alive=len(self._pids),
            spawned=self._spawned,
            phase=self._phase,
        )

    def _fold(self, op: dict[str, Any]) -> None:
        if op["type"] != "invoke":
            self._ops += 1
        process, f, value = op.get("process"), op.get("f"), op.get("value")
        if is_nemesis(process) and isinstance(value, dict):
            # A stop op names the kind and targets of the fault it ends, not its plan.
            key = (value.get("kind"), json.dumps(value.get("targets"), sort_keys=True))
            if f == "start" and op["type"] == "ok":
                targets = value.get("targets")
                label = str(value.get("kind"))
                self._faults[key] = f"{label} {targets}" if targets else label
            elif f == "stop" and op["type"] != "invoke":
                self._faults.pop(key, None)
        elif process == "supervisor" and isinstance(value, dict) and op["type"] == "ok":
            if f == _SPAWN:
                self._spawned += 1
                self._pids.add(value.get("pid"))
            elif f in _EXITS:
                self._pids.discard(value.get("pid"))
        elif self._phase == "setting up" and op["type"] == "ok" and self.load_started(op):
            self._phase = "running"
        elif process == "final":
            self._phase = "final reads"


class LiveProgress:
    """A thread that shows :class:`RunWatcher` snapshots until :meth:`stop`."""

    def __init__(
        self,
        run_dir: Path,
        time_limit: float,
        load_started: Callable[[Mapping[str, Any]], bool],
        every: float = 10.0,
    ) -> None:
        self.watcher = RunWatcher(run_dir, time_limit, load_started)
        self.every = every
        self.phase: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)

    def __enter__(self) -> LiveProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def set_phase(self, phase: str) -> None:
        """Phases the history cannot show (cluster start, log dumps, checking)."""
        self.phase = phase

    def _poll(self) -> Snapshot:
        snap = self.watcher.poll()
        if self.phase is not None and not (self.phase == "running" and snap.phase != "running"):
            snap.phase = self.phase
        return snap

    def _loop(self) -> None:
        if sys.stdout.isatty():
            self._live()
            return
        while not self._stop.wait(self.every):
            print(self._poll().line(), flush=True)

    def _live(self) -> None:
        from rich.live import Live

        with Live(self._render(), refresh_per_second=2, transient=False) as live:
            while not self._stop.wait(0.5):
                live.update(self._render())

    def _render(self) -> Any:
        from rich.table import Table

        s = self._poll()
        table = Table.grid(padding=(0, 2))
        table.add_row("elapsed", f"{s.elapsed:.0f} s of {s.time_limit:.0f} s ({s.phase})")
        table.add_row("ops", f"{s.ops} ({s.ops_per_s:.0f}/s over the last 10 s)")
        table.add_row("processes alive", f"{s.alive} (spawned {s.spawned})")
        table.add_row("faults active", ", ".join(s.faults) or "none")
        return table
