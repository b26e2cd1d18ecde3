"""The source tasks' journals, tailed into the history (process ``"tasks"``).

Why a journal at all: Connect tells a task which of its records are safe
(``SourceTask.commitRecord``: after the transaction that carried them committed, or, when
exactly-once is off, after the brokers acknowledged them). That confirmation is a claim a
checker can hold Kafka to, and only the task hears it. Each task instance of
``kafkaharness.SeqSourceTask`` appends JSON lines to a file of its own in the worker JVM;
this module reads what is new in every file about twice a second and records it, merged, as
``invoke``/``ok`` pairs (docs/history-format.md, "Task journals"). The workers' own logs are
tailed the same way for the one line that says, per generation of the Connect group, who
leads and which tasks a worker was given: the tasks' generations, which no REST call shows.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history import Recorder

log = logging.getLogger("workloads.connect.supervisor")

#: Seconds between two looks at the journals.
TAIL_INTERVAL_S = 0.5

Ranges = list[list[int]]

#: A worker's log line when it joined a generation: the leader's REST port, its tasks.
_JOINED = re.compile(
    r"Joined group at generation (\d+) .*?leaderUrl='http://[^:/]+:(\d+)/?'"
    r".*?, taskIds=\[([^\]]*)\]"
)
_WORKER_LOG = re.compile(r"worker-(\d+)\.log")


def merge_ranges(ranges: Ranges) -> Ranges:
    """Inclusive ``[first, last]`` ranges, sorted, with touching and overlapping ones joined."""
    out: Ranges = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return out


@dataclass
class _Tail:
    """One file being tailed: how far it was read, and whose it is (a journal's task and
    writer, from its first line; a worker log's instance id)."""

    path: Path
    offset: int = 0
    partial: bytes = b""
    task: int | None = None
    writer: str | None = None
    worker: int | None = None
    pending: dict[str, Any] = field(default_factory=dict)


class TaskJournals:
    """Tails every journal under ``directory`` into a ``"tasks"`` recorder.

    One thread owns the recorder (a Recorder has one writer); :meth:`stop` takes a last look
    after the workers have stopped, so a task's final confirmations are in the history.
    """

    def __init__(self, directory: Path, processes_dir: Path, logs_dir: Path) -> None:
        self.directory = directory
        self.logs_dir = logs_dir
        self._logs: dict[Path, _Tail] = {}
        #: (generation, leader's REST port) of the newest generation any worker joined.
        self._leader: tuple[int, int | None] = (-1, None)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._recorder = Recorder(
            processes_dir / "tasks.jsonl",
            "tasks",
            meta={"workload": "connect", "role": "task-journals", "directory": str(directory)},
        )
        self._journals: dict[Path, _Tail] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: Each task's latest confirmation (its journal's clock, ms), as recorded.
        self._confirmed: dict[int, int] = {}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="connect-journals", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(TAIL_INTERVAL_S):
            self.look()

    def stop(self) -> None:
        """Stop tailing, take a last look, close the recorder. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if not self._recorder.closed:
            self.look()
            self._recorder.close()

    @property
    def leader_port(self) -> int | None:
        """The REST port of the group's leader as of the newest generation seen (Connect
        says who leads only in its workers' logs)."""
        return self._leader[1]

    def confirmed_since(self, ms: int) -> set[int]:
        """The tasks Connect confirmed a record to at ``ms`` (epoch ms) or later."""
        with self._lock:
            return {task for task, at in self._confirmed.items() if at >= ms}

    def look(self) -> None:
        """Record what is new in every journal (files appear as task instances start)."""
        with self._lock:
            if self._recorder.closed:
                return
            for path in sorted(self.directory.glob("*.jsonl")):
                journal = self._journals.setdefault(path, _Tail(path))
                try:
                    self._read(journal)
                except OSError as exc:  # a file we cannot read is skipped, not fatal
                    log.warning("connect: journal %s: %s", path, exc)
            for path in sorted(self.logs_dir.glob("worker-*.log")):
                match = _WORKER_LOG.fullmatch(path.name)
                if match is not None:
                    worker_log = self._logs.setdefault(path, _Tail(path, worker=int(match[1])))
                    with contextlib.suppress(OSError):
                        self._read_log(worker_log)

    def _read_log(self, worker_log: _Tail) -> None:
        """``assignment`` ops from the lines of a worker's log that are new."""
        for line in _new_lines(worker_log):
            match = _JOINED.search(line.decode("utf-8", "replace"))
            if match is None:
                continue
            tasks = sorted(
                int(t.rsplit("-", 1)[1])
                for t in match[3].split(",")
                if t.strip() and t.rsplit("-", 1)[-1].isdigit()
            )
            value = {
                "worker": worker_log.worker,
                "generation": int(match[1]),
                "leader_port": int(match[2]),
                "tasks": tasks,
            }
            self._leader = max(self._leader, (value["generation"], value["leader_port"]))
            self._recorder.invoke("assignment", value)
            self._recorder.ok("assignment", value)

    def _read(self, journal: _Tail) -> None:
        batch: dict[str, Any] = {}
        for raw in _new_lines(journal):
            entry = _parse(raw)
            if entry is None:
                continue  # torn by a kill, or not ours
            event = entry.get("e")
            if event == "start":
                self._flush(journal, batch)
                journal.task, journal.writer = int(entry["task"]), str(entry["writer"])
                self._record(journal, "task-start", {"from": entry.get("from"), "ms": entry["ms"]})
            elif event in ("polled", "committed"):
                ranges = [[int(a), int(b)] for a, b in entry.get("seqnos") or []]
                held = batch.setdefault(event, {"seqnos": [], "ms": 0})
                held["seqnos"] += ranges
                held["ms"] = entry["ms"]
            elif event == "stop":
                self._flush(journal, batch)
                self._record(journal, "task-stop", {"ms": entry["ms"]})
        self._flush(journal, batch)

    def _flush(self, journal: _Tail, batch: dict[str, Any]) -> None:
        for event in ("polled", "committed"):
            held = batch.pop(event, None)
            if held and held["seqnos"]:
                self._record(
                    journal, event, {"seqnos": merge_ranges(held["seqnos"]), "ms": held["ms"]}
                )

    def _record(self, journal: _Tail, f: str, fields: dict[str, Any]) -> None:
        if journal.task is None:
            return  # a journal whose start line was lost names no task: nothing to claim
        value = {"task": journal.task, "writer": journal.writer, **fields}
        if f == "committed":
            self._confirmed[journal.task] = max(fields["ms"], self._confirmed.get(journal.task, 0))
        self._recorder.invoke(f, value)
        self._recorder.ok(f, value)


def _new_lines(journal: _Tail) -> list[bytes]:
    """The whole lines appended to a file since the last look (an unfinished last line is
    kept for the next)."""
    with journal.path.open("rb") as fh:
        fh.seek(journal.offset)
        data = fh.read()
    if not data:
        return []
    journal.offset += len(data)
    lines = (journal.partial + data).split(b"\n")
    journal.partial = lines.pop()
    return lines


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict) or "e" not in entry or "ms" not in entry:
        return None
    return entry
