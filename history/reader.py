"""Reading history files, per-process or merged, with the format's crash-tolerance rule.

The rule: a writer crash can only tear the line being written, so a bad *last* line is expected
damage and is skipped with a warning the caller gets back, while a bad line anywhere else means
the file is not what a Recorder writes and reading stops with a hard error. Telling the two apart
needs one line of lookahead, which is all the state the streaming reader keeps.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final, Self, cast

from history.schema import (
    KIND_MERGED,
    KIND_PROCESS,
    Header,
    HistoryError,
    Op,
    Process,
    header_kind,
    validate_header,
    validate_op,
)

_SNIPPET: Final = 60


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    x = float(text)
    if math.isinf(x):
        raise ValueError(f"{text} is out of a double's range")
    return x


def loads_strict(line: bytes | str) -> object:
    """``json.loads`` without Python's extensions to JSON numbers: NaN, Infinity, and numbers
    like 1e400 that Python reads as infinity. A Recorder never writes them (``allow_nan=False``),
    so a line holding one is not a Recorder's line, and the parallel scan's decoder (msgspec)
    and Spark's readers need not agree with Python on them."""
    return json.loads(line, parse_constant=_no_constant, parse_float=_finite)


def _snippet(line: bytes) -> str:
    text = line[:_SNIPPET].decode("utf-8", "replace").rstrip("\r\n")
    return repr(text) + ("..." if len(line) > _SNIPPET else "")


def torn_line_note(path: Path, lineno: int, line: bytes) -> str:
    """The note for a torn last line, the one wording every history consumer reports."""
    return f"{path}:{lineno}: torn last line skipped (writer crashed mid-write): {_snippet(line)}"


class HistoryReader:
    """Streaming reader for one history file; holds one op in memory, not the file.

    ``header`` is None only when the file is empty or its header line was itself torn, i.e. the
    writer died before recording anything; ``warnings`` says so. Warnings about a torn last line
    are appended while iterating, so read them after the iteration finishes.

    Besides validating each op it checks the invariants merge and checkers rely on: ``index``
    runs 0, 1, 2, ... in file order, ``time`` never decreases, and (per-process files) every op
    carries the header's process id. Merged files must also have per-process ``pindex`` runs.
    """

    def __init__(self, path: str | os.PathLike[str], *, kind: str | None = None) -> None:
        self.path = Path(path)
        self.warnings: list[str] = []
        self.header: Header | None = None
        #: Byte offset of the first op line (where the header line ends).
        self.body_offset = 0
        self._lineno = 0
        self._file: IO[bytes] = open(self.path, "rb")  # noqa: SIM115 - closed by close()/__exit__
        self._started = False
        try:
            self._read_header(kind)
        except BaseException:
            self._file.close()
            raise

    def _where(self, lineno: int) -> str:
        return f"{self.path}:{lineno}"

    def _read_header(self, expected_kind: str | None) -> None:
        line = self._file.readline()
        self._lineno = 1
        self.body_offset = self._file.tell()
        if not line:
            self.warnings.append(f"{self._where(1)}: empty history file (writer died at start)")
            return
        try:
            raw = loads_strict(line)
        except ValueError:
            if self._file.readline():
                raise HistoryError(
                    f"{self._where(1)}: header line is not valid JSON: {_snippet(line)}"
                ) from None
            self.warnings.append(
                f"{self._where(1)}: torn header line skipped, no ops (writer died at start)"
            )
            return
        try:
            header = validate_header(raw)
        except HistoryError as exc:
            raise type(exc)(f"{self._where(1)}: {exc}") from None
        kind = header_kind(header)
        if expected_kind is not None and kind != expected_kind:
            raise HistoryError(
                f"{self._where(1)}: expected a {expected_kind!r} history file, found {kind!r}"
            )
        self.header = header

    @property
    def kind(self) -> str | None:
        return None if self.header is None else header_kind(self.header)

    def __iter__(self) -> Iterator[Op]:
        if self._started:
            raise RuntimeError(f"{self.path}: a HistoryReader can only be iterated once")
        self._started = True
        if self.header is None:
            return iter(())
        return self._ops(self.header)

    def _ops(self, header: Header) -> Iterator[Op]:
        f = self._file
        merged = header_kind(header) == KIND_MERGED
        header_process = header.get("process")
        next_pindex: dict[Process, int] = {}
        last_time = -1
        first = self._lineno + 1
        # Every line before this one was yielded (anything else raised or stopped), so the
        # expected index is just the distance from the first op line.
        for lineno, line in enumerate(f, start=first):
            expect_index = lineno - first
            try:
                op = loads_strict(line)
                if not isinstance(op, dict):
                    raise ValueError("not an object")
            except ValueError:
                if f.readline():
                    raise HistoryError(
                        f"{self._where(lineno)}: line is not a JSON object: {_snippet(line)}"
                    ) from None
                self.warnings.append(torn_line_note(self.path, lineno, line))
                break
            try:
                validate_op(op)
                if op["index"] != expect_index:
                    raise HistoryError(
                        f"index {op['index']} out of sequence, expected {expect_index}"
                    )
                if op["time"] < last_time:
                    raise HistoryError(f"time {op['time']} goes backwards (previous {last_time})")
                if merged:
                    process = op["process"]
                    if "pindex" not in op:
                        raise HistoryError("merged op is missing field 'pindex'")
                    want = next_pindex.get(process, 0)
                    if op["pindex"] != want:
                        raise HistoryError(
                            f"pindex {op['pindex']} of process {process!r} out of sequence, "
                            f"expected {want}"
                        )
                    next_pindex[process] = want + 1
                elif op["process"] != header_process:
                    raise HistoryError(
                        f"op process {op['process']!r} differs from header process "
                        f"{header_process!r}"
                    )
            except HistoryError as exc:
                raise HistoryError(f"{self._where(lineno)}: {exc}") from None
            last_time = op["time"]
            self._lineno = lineno
            yield cast(Op, op)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_process_file(path: str | os.PathLike[str]) -> HistoryReader:
    """Streaming variant of :func:`read_process_file`; use as ``with iter_process_file(p) as r``
    and read ``r.header`` before and ``r.warnings`` after iterating ``r``."""
    return HistoryReader(path, kind=KIND_PROCESS)


def read_process_file(path: str | os.PathLike[str]) -> tuple[Header | None, list[Op], list[str]]:
    """Whole per-process file in memory, for tests and small runs."""
    with iter_process_file(path) as reader:
        ops = list(reader)
        return reader.header, ops, reader.warnings


def iter_history(path: str | os.PathLike[str]) -> HistoryReader:
    """Streaming reader for a merged history, for checkers that must not load 10M ops."""
    return HistoryReader(path, kind=KIND_MERGED)


class HistoryWarning(UserWarning):
    """Raised through :mod:`warnings` where an API has no return value to carry notes in."""


def load_history(path: str | os.PathLike[str]) -> list[Op]:
    """Merged history as a list, for small histories.

    A merge writes its output atomically, so a torn last line here means the file was produced
    some other way; the op is still skipped (the tolerance rule holds for every reader), and the
    note is issued as a :class:`HistoryWarning` because this function returns only ops. Use
    :func:`iter_history` to get the notes as data.
    """
    with iter_history(path) as reader:
        ops = list(reader)
    for note in reader.warnings:
        warnings.warn(note, HistoryWarning, stacklevel=2)
    return ops
