"""Runs a schedule against a cluster and its clients, recording every fault as history ops.

The engine keeps an undo log of the faults that are active; ``heal_all`` undoes them in
reverse order and then asks the cluster to heal anything else, so a run that ends early
(an exception, Ctrl-C, a crashing checker) never leaves a cut, a stopped process or a toxic
behind. The one-after-another faults run in one background thread, the stream kinds
(crash-clients) in another, so a slow fault of one (a rolling restart takes half a minute)
never holds back the other; each thread records as its own process. Waits are on a stop event.
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
    """``start()`` runs the schedule in its threads; ``stop()`` ends them and heals everything."""

    def __init__(
        self,
        ctx: FaultContext,
        schedule: Schedule,
        recorder: Any = None,
        stream_recorder: Any = None,
    ) -> None:
        self.ctx = ctx
        self.schedule = schedule
        self.recorder = recorder
        #: Records the stream kinds' ops (process ``"nemesis-clients"``); without one they
        #: go to ``recorder`` and the streams share its thread.
        self.stream_recorder = stream_recorder
        self.executed: list[dict[str, Any]] = []
        self.active: list[tuple[Event, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._t0 = 0.0
        self.errors: list[str] = []
        self._entries: dict[int, dict[str, Any]] = {}  # id(details) -> its executed entry

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self._t0 = time.monotonic()
        split = self.stream_recorder is not None
        lanes = [(False, "nemesis")] + ([(True, "nemesis-clients")] if split else [])
        for streams, name in lanes:
            thread = threading.Thread(
                target=self._run, args=(streams if split else None,), name=name, daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        deadline = time.monotonic() + 180
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self.heal_all()

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def current_faults(self) -> list[str]:
        with self._lock:
            return [f"{ev.kind}->{d.get('targets')}" for ev, d in self.active]

    # --- the schedule ------------------------------------------------------------------

    def _record(
        self, event: Event, kind: str, f: str, value: dict[str, Any], error: str | None = None
    ) -> None:
        rec = self.recorder
        if self.stream_recorder is not None and KINDS[event.kind].stream:
            rec = self.stream_recorder
        if rec is None:
            return
        if kind == "invoke":
            rec.invoke(f, value)
        elif kind == "ok":
            rec.ok(f, value)
        elif kind == "fail":
            rec.fail(f, value, error or "failed")
        else:
            rec.info(f, value, error)

    def _timeline(self, streams: bool | None) -> list[tuple[float, int, int]]:
        """(time, order, event index): starts and stops of the stream kinds' events
        (``streams``), of the others, or of all (None); events may overlap in a replay."""
        limit = self.schedule.time_limit
        out = []
        for i, ev in enumerate(self.schedule.events):
            if streams is not None and KINDS[ev.kind].stream != streams:
                continue
            out.append((ev.at, 1, i))
            if not KINDS[ev.kind].instant:
                out.append((min(ev.at + ev.duration, max(limit, ev.at)), 0, i))
        return sorted(out)

    def _run(self, streams: bool | None) -> None:
        running: dict[int, dict[str, Any]] = {}
        for when, order, i in self._timeline(streams):
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
        value = {
            "kind": event.kind,
            "params": event.params,
            "planned_at": event.at,
            "traits": sorted(kind.traits),
        }
        self._record(event, "invoke", "start", value)
        started = self.elapsed()
        try:
            details = kind.start(self.ctx, event.params)
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            self.errors.append(f"start {event.kind}: {msg}")
            log.warning("nemesis could not start %s: %s", event.kind, msg)
            self._record(event, "fail", "start", value, msg)
            # Whatever it managed to do must still be undone. A stream kind acts on processes
            # only, and healing the cluster from its thread would cut short the other
            # thread's broker fault.
            if not kind.stream:
                with contextlib.suppress(Exception):
                    self.ctx.cluster.heal_all()
            self.executed.append({**value, "started_at": round(started, 3), "error": msg})
            return None
        with self._lock:
            self.active.append((event, details))
        self._record(event, "ok", "start", {**value, **details})
        entry = {
            **value,
            "started_at": round(started, 3),
            "start_took": round(self.elapsed() - started, 3),
            "targets": details.get("targets"),
            "why": details.get("why"),
            "duration": event.duration,
        }
        self.executed.append(entry)
        self._entries[id(details)] = entry
        return details

    def _finish(self, event: Event, details: dict[str, Any]) -> None:
        kind = KINDS[event.kind]
        stopping = self.elapsed()
        value = {"kind": event.kind, "targets": details.get("targets")}
        self._record(event, "invoke", "stop", value)
        result: dict[str, Any] = {}
        try:
            result = kind.stop(self.ctx, details)
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            self.errors.append(f"stop {event.kind}: {msg}")
            self._record(event, "info", "stop", value, msg)
        else:
            self._record(event, "ok", "stop", {**value, **result})
        with self._lock:
            self.active = [(e, d) for e, d in self.active if d is not details]
        entry = self._entries.pop(id(details), None)
        if entry is not None:
            # When the undo began (the engine's timing) and when it was verified done (the
            # fault's own: a resumed broker may take seconds to answer on a loaded machine).
            entry["stopping_at"] = round(stopping, 3)
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
