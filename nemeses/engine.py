"""Runs a schedule against a cluster and its clients, recording every fault as history ops.

The engine keeps an undo log of the faults that are active; ``heal_all`` undoes them in
reverse order and then asks the cluster to heal anything else, so a run that ends early
(an exception, Ctrl-C, a crashing checker) never leaves a cut, a stopped process or a toxic
behind. Faults run one at a time in a background thread; waits are on a stop event.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from nemeses.kinds import KINDS
from nemeses.schedule import Event, Schedule
from nemeses.targets import FaultContext

log = logging.getLogger("nemeses")


class Nemesis:
    """``start()`` runs the schedule in a thread; ``stop()`` ends it and heals everything."""

    def __init__(self, ctx: FaultContext, schedule: Schedule, recorder: Any = None) -> None:
        self.ctx = ctx
        self.schedule = schedule
        self.recorder = recorder
        self.executed: list[dict[str, Any]] = []
        self.active: list[tuple[Event, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._t0 = 0.0
        self.errors: list[str] = []
        self._entries: dict[int, dict[str, Any]] = {}  # id(details) -> its executed entry

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=180)
        self.heal_all()

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def current_faults(self) -> list[str]:
        with self._lock:
            return [f"{ev.kind}->{d.get('targets')}" for ev, d in self.active]

    # --- the schedule ------------------------------------------------------------------

    def _record(self, kind: str, f: str, value: dict[str, Any], error: str | None = None) -> None:
        if self.recorder is None:
            return
        if kind == "invoke":
            self.recorder.invoke(f, value)
        elif kind == "ok":
            self.recorder.ok(f, value)
        elif kind == "fail":
            self.recorder.fail(f, value, error or "failed")
        else:
            self.recorder.info(f, value, error)

    def _timeline(self) -> list[tuple[float, int, int]]:
        """(time, order, event index): starts and stops; events may overlap in a replay."""
        limit = self.schedule.time_limit
        out = []
        for i, ev in enumerate(self.schedule.events):
            out.append((ev.at, 1, i))
            if not KINDS[ev.kind].instant:
                out.append((min(ev.at + ev.duration, max(limit, ev.at)), 0, i))
        return sorted(out)

    def _run(self) -> None:
        running: dict[int, dict[str, Any]] = {}
        for when, order, i in self._timeline():
            if self._stop.wait(max(0.0, self._t0 + when - time.monotonic())):
                return
            event = self.schedule.events[i]
            if order == 1:
                details = self._start(event)
                if details is None:
                    continue
                if KINDS[event.kind].instant:
                    self._finish(event, details)
                else:
                    running[i] = details
            elif i in running:
                self._finish(event, running.pop(i))

    def _start(self, event: Event) -> dict[str, Any] | None:
        kind = KINDS[event.kind]
        value = {"kind": event.kind, "params": event.params, "planned_at": event.at}
        self._record("invoke", "start", value)
        started = self.elapsed()
        try:
            details = kind.start(self.ctx, event.params)
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            self.errors.append(f"start {event.kind}: {msg}")
            log.warning("nemesis could not start %s: %s", event.kind, msg)
            self._record("fail", "start", value, msg)
            # Whatever it managed to do must still be undone.
            with contextlib.suppress(Exception):
                self.ctx.cluster.heal_all()
            self.executed.append({**value, "started_at": round(started, 3), "error": msg})
            return None
        with self._lock:
            self.active.append((event, details))
        self._record("ok", "start", {**value, **details})
        entry = {
            **value,
            "started_at": round(started, 3),
            "targets": details.get("targets"),
            "why": details.get("why"),
            "duration": event.duration,
        }
        self.executed.append(entry)
        self._entries[id(details)] = entry
        return details

    def _finish(self, event: Event, details: dict[str, Any]) -> None:
        kind = KINDS[event.kind]
        value = {"kind": event.kind, "targets": details.get("targets")}
        self._record("invoke", "stop", value)
        result: dict[str, Any] = {}
        try:
            result = kind.stop(self.ctx, details)
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            self.errors.append(f"stop {event.kind}: {msg}")
            self._record("info", "stop", value, msg)
        else:
            self._record("ok", "stop", {**value, **result})
        with self._lock:
            self.active = [(e, d) for e, d in self.active if d is not details]
        entry = self._entries.pop(id(details), None)
        if entry is not None:
            entry["stopped_at"] = round(self.elapsed(), 3)
            if result.get("hit") is not None:  # which armed moments fired (crash-clients)
                entry["hit"] = result["hit"]

    def heal_all(self) -> None:
        """Undo every active fault (newest first), then heal whatever else remains."""
        with self._lock:
            pending = list(reversed(self.active))
        for event, details in pending:
            self._finish(event, details)
        with contextlib.suppress(Exception):
            self.ctx.cluster.heal_all()
