"""What the report shows of a connect run: the journey of a value (one seqno of one task,
named ``"<task>:<seqno>"``), the workers' assignments and task-count changes, and figures of
the seqnos Connect confirmed per task, the task count and the workers' generations.

The ``connect`` workload (docs/history-format.md, "Workload connect") has no value that
travels through ops as a string, as the eos workload's do: a seqno is handed to Connect inside
a task journal's range (``polled``), confirmed inside another (``committed``), and found by
the final reads inside a record's JSON text. So the ops that touched ``"2:417"`` are found by
what they mean, not by string equality: a journal op's ranges are tested by containment (one
op can cover thousands of seqnos), a read's records are parsed only when their key names a
wanted task and their text may name a wanted seqno (a final read can hold millions).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from workloads.spec import Figures, Journeys, MakeStep, ReportSpec, Series

#: A connect value's name: ``<task>:<seqno>``.
VALUE = re.compile(r"(\d+):(\d+)")

#: The key of a record's seqno in its JSON text.
SEQNO_KEY = '"seqno"'


def parse_value(value: str) -> tuple[int, int] | None:
    """``(task, seqno)`` of a connect value's name, None for any other value (an eos value
    never has this shape, so the two workloads' values cannot be confused)."""
    m = VALUE.fullmatch(value)
    return (int(m.group(1)), int(m.group(2))) if m else None


def contains(ranges: Any, seqno: int) -> bool:
    """Is ``seqno`` in one of a journal op's inclusive ``[[first, last], ...]`` ranges
    (ascending, so the scan stops at the first range past it)?"""
    for r in ranges if isinstance(ranges, list) else []:
        if not (isinstance(r, list) and len(r) == 2):
            continue
        first, last = r
        if not (isinstance(first, int) and isinstance(last, int)):
            continue
        if first > seqno:
            return False
        if seqno <= last:
            return True
    return False


def _seqno_pattern(seqnos: Iterable[int]) -> re.Pattern[str]:
    """Finds ``"seqno": <n>`` for a wanted n: one regular expression per task is several
    times cheaper than parsing every record (what it finds is parsed to be sure)."""
    alternatives = "|".join(str(s) for s in sorted(seqnos))
    return re.compile(rf"{re.escape(SEQNO_KEY)}\s*:\s*(?:{alternatives})(?!\d)")


def _json(text: Any) -> Any:
    """A record's JSON text parsed; None if it is not JSON (a malformed record is the
    checker's to flag, not the report's)."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


class ConnectJourneys:
    """The wanted connect values and the rows of their journeys, fed one completed op at a
    time (:meth:`see`) in history order, so the history is read once.

    A task restarts from its committed source offset, so many ``task-start`` ops precede a
    seqno without concerning it. Kept: the last start (with ``from`` <= seqno) before the
    seqno was first polled, the instance that wrote it first, and every start with ``from``
    <= seqno after that, each of which writes it again.
    """

    def __init__(self, values: Iterable[str], make_step: MakeStep) -> None:
        self.make_step = make_step
        #: task -> seqno -> the value's name.
        self.wanted: dict[int, dict[int, str]] = {}
        for v in values:
            if (ts := parse_value(v)) is not None:
                self.wanted.setdefault(ts[0], {})[ts[1]] = v
        #: A data record's key is its task as decimal text: the cheap test of a read record.
        self.keys = {str(t): t for t in self.wanted}
        #: The second cheap test, before parsing: a wanted record's text holds
        #: ``"seqno": <n>`` for a wanted n.
        self.seqno_text = {t: _seqno_pattern(seqnos) for t, seqnos in self.wanted.items()}
        self.journeys: dict[str, list[dict[str, Any]]] = {}
        self.pending_start: dict[str, dict[str, Any]] = {}
        self.polled: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.wanted)

    def see(self, inv: dict[str, Any], op: dict[str, Any] | None) -> None:
        """Add the rows ``inv`` (and its completion ``op``) give the wanted values."""
        proc, f = inv.get("process"), inv.get("f")
        if proc == "tasks":
            self._journal(inv, op)
        elif proc == "final" and op is not None and f == "read":
            self._read(inv, op)
        elif proc == "final" and op is not None and f == "offsets":
            self._offsets(inv, op)

    def finish(self) -> dict[str, list[dict[str, Any]]]:
        """The journeys, with the start of a task that never polled a wanted seqno (it was
        the instance due to write it when the run ended)."""
        for value, step in self.pending_start.items():
            self._add(value, step)
        self.pending_start = {}
        return self.journeys

    def _name(self, task: Any, seqno: Any) -> str | None:
        """The wanted value's name for a record's task and seqno (None: not wanted, or not
        numbers at all)."""
        if not (isinstance(task, int) and isinstance(seqno, int)):
            return None
        return self.wanted.get(task, {}).get(seqno)

    def _add(self, value: str, step: dict[str, Any]) -> None:
        self.journeys.setdefault(value, []).append(step)

    def _journal(self, inv: dict[str, Any], op: dict[str, Any] | None) -> None:
        """A task journal's entry: its invoke and ok carry the same value."""
        v = (op or {}).get("value") or inv.get("value")
        task = v.get("task") if isinstance(v, dict) else None
        seqnos = self.wanted.get(task) if isinstance(task, int) else None
        if not seqnos:
            return
        f, writer = inv.get("f"), v.get("writer")
        if f == "task-start":
            self._start(inv, op, v, seqnos)
            return
        if f not in ("polled", "committed"):
            return
        for seqno, value in seqnos.items():
            if not contains(v.get("seqnos"), seqno):
                continue
            if value in self.pending_start:
                self._add(value, self.pending_start.pop(value))
            self.polled.add(value)
            if f == "polled":
                what = f"task {task} instance {writer} handed {value} to Connect (polled)"
            else:
                what = (
                    f"Connect confirmed {value} to task {task} instance {writer} (committed): "
                    "it must be in the read_committed read"
                )
            self._add(value, self.make_step(value, inv, op, what, v))

    def _start(
        self,
        inv: dict[str, Any],
        op: dict[str, Any] | None,
        v: dict[str, Any],
        seqnos: dict[int, str],
    ) -> None:
        """A task instance started at ``from``: it will write every wanted seqno >= from."""
        start = v.get("from")
        if not isinstance(start, int):
            return
        for seqno, value in seqnos.items():
            if start > seqno:
                continue
            what = f"task {v.get('task')} instance {v.get('writer')} started, writing from {start}"
            if value in self.polled:
                what += f", so it writes {value} again"
                self._add(value, self.make_step(value, inv, op, what, v))
            else:
                self.pending_start[value] = self.make_step(value, inv, op, what, v)

    def _read(self, inv: dict[str, Any], op: dict[str, Any]) -> None:
        """A final read of one data-topic partition at one isolation level."""
        ov = op.get("value") if isinstance(op.get("value"), dict) else {}
        iv = inv.get("value") if isinstance(inv.get("value"), dict) else {}
        where = {k: ov.get(k, iv.get(k)) for k in ("topic", "partition", "isolation")}
        found: dict[str, list[tuple[list[Any], Any]]] = {}
        for rec in ov.get("records") or []:
            if not (isinstance(rec, list) and len(rec) > 2 and isinstance(rec[1], str)):
                continue
            task = self.keys.get(rec[1])
            text = rec[2]
            if task is None or not isinstance(text, str):
                continue
            if self.seqno_text[task].search(text) is None and SEQNO_KEY in text:
                continue  # it names another seqno (a text without one is parsed, to be sure)
            obj = _json(text)
            if not isinstance(obj, dict) or obj.get("task") != task:
                continue
            value = self._name(task, obj.get("seqno"))
            if value is not None:
                found.setdefault(value, []).append((rec, obj.get("writer")))
        for value, hits in found.items():
            what = "; ".join(
                f"{where['isolation']} read found {value} at partition {where['partition']} "
                f"@ {rec[0]} (written by {writer})"
                for rec, writer in hits
            )
            result = {**where, "records": [rec for rec, _ in hits]}
            self._add(value, self.make_step(value, inv, op, what, result))

    def _offsets(self, inv: dict[str, Any], op: dict[str, Any]) -> None:
        """The final read of the offsets topic: a task's committed source offsets."""
        ov = op.get("value") if isinstance(op.get("value"), dict) else {}
        found: dict[str, list[list[Any]]] = {}
        for rec in ov.get("records") or []:
            if not (isinstance(rec, list) and len(rec) > 3 and isinstance(rec[3], str)):
                continue  # a tombstone names no seqno
            key, val = _json(rec[2]), _json(rec[3])
            part = key[1] if isinstance(key, list) and len(key) == 2 else None
            task = part.get("task") if isinstance(part, dict) else None
            seqno = val.get("seqno") if isinstance(val, dict) else None
            value = self._name(task, seqno)
            if value is not None:
                found.setdefault(value, []).append(rec)
        topic = ov.get("topic")
        for value, recs in found.items():
            task, seqno = parse_value(value) or (None, None)
            what = "; ".join(
                f"offsets topic {topic} partition {rec[0]} @ {rec[1]}: task {task}'s committed "
                f"source offset is {seqno} (a restart goes on at {(seqno or 0) + 1})"
                for rec in recs
            )
            self._add(
                value, self.make_step(value, inv, op, what, {"topic": topic, "records": recs})
            )


# --- the report's declaration ---------------------------------------------------------------


def _ranges_size(op: Mapping[str, Any], f: str) -> int | None:
    """Seqnos a task journal's ``f`` op covers (``polled``: handed to Connect; ``committed``:
    confirmed by Connect)."""
    value = op.get("value")
    if op.get("process") != "tasks" or op.get("f") != f or not isinstance(value, dict):
        return None
    return sum(int(b) - int(a) + 1 for a, b in value.get("seqnos") or [])


def _confirmed(op: Mapping[str, Any]) -> int | None:
    return _ranges_size(op, "committed")


def _polled(op: Mapping[str, Any]) -> int | None:
    return _ranges_size(op, "polled")


def _highest_confirmed(op: Mapping[str, Any]) -> list[tuple[str, float]] | None:
    value = op.get("value")
    if op.get("process") != "tasks" or op.get("f") != "committed" or not isinstance(value, dict):
        return None
    ranges = value.get("seqnos") or []
    return [(f"task {value.get('task')}", ranges[-1][1])] if ranges else None


def _task_count(op: Mapping[str, Any]) -> list[tuple[str, float]] | None:
    value = op.get("value")
    if op.get("process") != "connect" or not isinstance(value, dict):
        return None
    if op.get("f") == "reconfigure" and isinstance(value.get("tasks"), int):
        return [("tasks asked for", value["tasks"])]
    if op.get("f") == "status" and isinstance(value.get("tasks"), list):
        running = [t for t in value["tasks"] if t.get("state") == "RUNNING"]
        return [("tasks running", len(running))]
    return None


def _generation(op: Mapping[str, Any]) -> list[tuple[str, float]] | None:
    value = op.get("value")
    if op.get("process") != "tasks" or op.get("f") != "assignment" or not isinstance(value, dict):
        return None
    return [(f"worker {value.get('worker')}", value.get("generation", 0))]


def _assignment(op: Mapping[str, Any]) -> tuple[str, Any] | None:
    """A worker joined a generation with its tasks, or the task count was changed."""
    value = op.get("value")
    if not isinstance(value, dict):
        return None
    if op.get("process") == "tasks" and op.get("f") == "assignment":
        return f"worker {value.get('worker')} given tasks {value.get('tasks')}", value.get(
            "generation"
        )
    if op.get("process") == "connect" and op.get("f") == "reconfigure":
        return f"task count set to {value.get('tasks')}", None
    return None


def _journey_order(value: str) -> tuple[Any, ...]:
    """By task, then seqno as a number (``1:10`` after ``1:9``)."""
    ts = parse_value(value)
    return (ts[0], ts[1], "") if ts else (-1, -1, value)


FIGURES = Figures(
    throughput=lambda: _confirmed,
    fed=lambda: _polled,
    throughput_label="seqnos/s\nconfirmed",
    backlog_label="polled, not yet\nconfirmed",
    title="seqnos Connect confirmed to the tasks, and those polled but not yet confirmed, "
    "with fault bands",
)

REPORT = ReportSpec(
    journeys=Journeys(
        intro="Every operation that touched a seqno an example names (task:seqno): the task "
        "instance that started before writing it (and any later one that wrote it again), the "
        "journal entries where it was polled and where Connect confirmed it (committed), the "
        "final reads' records holding it and the committed source offset naming it.",
        claims=lambda value: parse_value(value) is not None,
        finder=lambda values, make_step: ConnectJourneys(values, make_step),
        order=_journey_order,
    ),
    assignment=_assignment,
    assignments_title="Worker assignments and task-count changes",
    series=(
        Series("seqnos Connect confirmed, per task", "highest seqno", lambda: _highest_confirmed),
        Series("tasks", "task count", lambda: _task_count),
        Series("worker generations", "generation", lambda: _generation),
    ),
)
