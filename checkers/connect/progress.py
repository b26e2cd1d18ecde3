"""Whether every task of the connector's final configuration kept going: ``stalled-task``.

Why a rule of its own, outside the two engines: the safety rules judge committed records (a
long run's millions, hence Spark); this one judges a handful of facts the scan gathers on the
way (the task counts the connector was given, its last status, the faults' heal, the stop,
and each task's last confirmation), so it is judged once, here, for both engines. A task that
Connect runs but that confirms nothing for :data:`STALL_S` while no fault acts and its
configuration is in force is a Connect that did not recover; the verdict must not call that
run valid (the records such a task never wrote are not lost, so no safety rule sees it).

Public API::

    Progress                      # the facts, gathered by a scan's sink, merged over chunks
    stalled(facts, connector, run_dir, max_examples) -> (count, examples, note or None)
    STALL_S
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from checkers.anomalies import lookup
from checkers.json_text import NOT_JSON, json_value
from history.schema import wall_ms

__all__ = ["STALL_S", "Progress", "stalled"]

#: Seconds a task of the final configuration may go without a confirmation, once the faults
#: have healed and its configuration is in force, before it counts as stalled.
STALL_S: Final = 30.0
#: Lines of the task's worker's log an example quotes (the last that name the task).
LOG_LINES: Final = 6
_LINE_MAX: Final = 300


class Progress:
    """The facts of one chunk of the history (JSON-able, merged with :meth:`merge`).

    ``counts``: ``[index, ms, tasks]`` of each ``ok`` create (its ``tasks.max``) and
    reconfigure; ``workers``: ``{task: [index, worker_id]}``, the last ``ok`` status that
    named the task;
    ``stop``: ``[index, ms]`` of the connector's stop; ``heal``: the latest ``ok`` stop of a
    fault (any ``nemesis*`` process); ``confirmed``: each task's latest confirmation (ms).
    """

    def __init__(self) -> None:
        self.counts: list[list[int]] = []
        self.workers: dict[str, list[Any]] = {}
        self.stop: list[int] | None = None
        self.heal: int | None = None
        self.confirmed: dict[str, int] = {}

    def op(self, index: int, wall: str, process: str, type_: str, f: str, value: bytes) -> None:
        """One op of the ``connect`` or a ``nemesis*`` process (others are ignored)."""
        if process.startswith("nemesis"):
            if type_ == "ok" and f == "stop":
                ms = wall_ms(wall)
                if ms is not None and (self.heal is None or ms > self.heal):
                    self.heal = ms
            return
        if process != "connect":
            return
        if f == "stop" and type_ == "invoke":
            ms = wall_ms(wall)
            if ms is not None and (self.stop is None or index > self.stop[0]):
                self.stop = [index, ms]
            return
        if type_ != "ok" or f not in ("create", "reconfigure", "status"):
            return
        v = json_value(value)
        if v is NOT_JSON or not isinstance(v, dict):
            return
        if f == "status":
            for t in v.get("tasks") or []:
                if isinstance(t, dict) and type(t.get("id")) is int:
                    self.worker(str(t["id"]), index, str(t.get("worker_id")))
            return
        n = v.get("tasks") if f == "reconfigure" else (v.get("config") or {}).get("tasks.max")
        ms = wall_ms(wall)
        if isinstance(n, str) and n.isdigit():
            n = int(n)
        if type(n) is int and ms is not None:
            self.counts.append([index, ms, n])

    def worker(self, task: str, index: int, worker_id: str) -> None:
        if task not in self.workers or index > self.workers[task][0]:
            self.workers[task] = [index, worker_id]

    def confirm(self, task: int, ms: int) -> None:
        """A confirmation Connect gave ``task`` at ``ms`` (a journal's ``committed`` op)."""
        key = str(task)
        if ms > self.confirmed.get(key, -1):
            self.confirmed[key] = ms

    def as_json(self) -> dict[str, Any]:
        return {
            "counts": self.counts,
            "workers": self.workers,
            "stop": self.stop,
            "heal": self.heal,
            "confirmed": self.confirmed,
        }

    @staticmethod
    def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
        """The chunks' facts as one (the latest of each, by history index or clock)."""
        out = Progress()
        for p in parts:
            out.counts += p["counts"]
            for task, (index, worker_id) in p["workers"].items():
                out.worker(task, index, worker_id)
            if p["stop"] is not None and (out.stop is None or p["stop"][0] > out.stop[0]):
                out.stop = p["stop"]
            if p["heal"] is not None and (out.heal is None or p["heal"] > out.heal):
                out.heal = p["heal"]
            for task, ms in p["confirmed"].items():
                out.confirm(int(task), ms)
        out.counts.sort()
        return out.as_json()


def stalled(
    facts: dict[str, Any] | None, connector: str, run_dir: Path, max_examples: int
) -> tuple[int, list[dict[str, Any]], str | None]:
    """The tasks of the final configuration that went :data:`STALL_S` without a
    confirmation before the connector's stop, counting from the later of the faults' heal
    and the last task-count change; each example names the task's worker (the last status
    that named it) and quotes that worker's last log lines about the task. A note instead
    when the run cannot say (no stop, no task count)."""
    kind = lookup("connect", "stalled-task")
    assert kind is not None
    if not facts or facts.get("stop") is None or not facts.get("counts"):
        return 0, [], "stalled-task not checked: the history has no connector stop or task count"
    _index, since, tasks = facts["counts"][-1]
    if facts.get("heal") is not None:
        since = max(since, facts["heal"])
    stop = facts["stop"][1]
    if stop - since < STALL_S * 1000:
        return 0, [], None  # stopped soon after the heal: every task had no time to stall
    workers = {t: w for t, (_i, w) in (facts.get("workers") or {}).items()}
    cases = []
    for task in range(tasks):
        last = facts["confirmed"].get(str(task))
        quiet = stop - (since if last is None else max(since, last))
        if quiet >= STALL_S * 1000:
            cases.append((task, last, quiet))
    made = [
        kind.make(
            task=task,
            worker=workers.get(str(task)),
            last_confirmed_ms=last,
            quiet_s=round(quiet / 1000, 1),
            since_ms=since,
            stop_ms=stop,
            log=_log_lines(run_dir, workers.get(str(task)), f"{connector}-{task}"),
        )
        for task, last, quiet in cases[:max_examples]
    ]
    return len(cases), made, None


def _log_lines(run_dir: Path, worker_id: str | None, task_name: str) -> list[str]:
    """The last lines of the worker's own log (``logs/worker-N.log``, the one whose herder
    lines carry ``worker_id`` as their client id) that name the task; none when the logs are
    not beside the run."""
    logs = run_dir / "logs"
    if worker_id is None or not logs.is_dir():
        return []
    client = f"[Worker clientId=connect-{worker_id},".encode()  # its own lines, not others
    name = task_name.encode()
    for path in sorted(logs.glob("worker-*.log")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if client not in data:
            continue
        hits = [
            line for line in data.splitlines()
            if name in line and not line[line.find(name) + len(name):][:1].isdigit()
        ]  # fmt: skip
        return [f"{path.name}: {_cut(line, name)}" for line in hits[-LOG_LINES:]]
    return []


def _cut(line: bytes, name: bytes) -> str:
    """The line, or, when long, the part of it around the task's name."""
    if len(line) <= _LINE_MAX:
        return line.decode("utf-8", "replace")
    at = line.find(name)
    start = 0 if at + len(name) <= _LINE_MAX else at - _LINE_MAX // 2
    text = line[start : start + _LINE_MAX].decode("utf-8", "replace")
    return ("..." if start else "") + text + "..."
