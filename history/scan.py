"""Validating a merged history in parallel, with the reader's verdict on anything it cannot prove.

Why: :class:`history.reader.HistoryReader` checks one op at a time in Python, about 28 s per
million ops on this project's machines, and every Spark check waits for it. Here the file is cut
at line boundaries into chunks; worker processes decode each chunk's lines with msgspec's typed
decoder (an op's ``value`` and ``error`` stay raw JSON bytes, so megabyte reads are skipped over,
not built), check each op against the rules of :func:`history.schema.validate_op`, and hand the
op to a *sink* that writes the chunk's output. The order rules (``index`` in file order, ``time``
never decreasing, each process's ``pindex`` 0, 1, 2, ...) are proved inside a chunk by the worker
and across chunks by the parent from each chunk's first and last values.

The typed decoder is stricter than the reader (it refuses NaN, non-UTF-8 text, integers past
64 bits), never looser. So whenever a chunk fails, the whole file goes to the reader: its
rejections and its one-line errors are the only ones a user sees, and a file it accepts after
all is fed to the same sink in this process. A torn last line is the one failure proved here,
by the reader's own rule and with its wording, because a crashed run's history has one.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Protocol

import msgspec

from history.reader import HistoryReader, loads_strict, torn_line_note
from history.schema import KIND_MERGED, Header, _check_wall, encode_json

__all__ = ["OpSink", "Scanned", "line_spans", "no_cyclic_gc", "scan_history", "span_lines"]

#: Bytes per chunk. Small enough that both cores stay busy to the end of a 60 s run's history
#: and a worker's buffers stay small; a line longer than this (a final read) is a chunk alone.
CHUNK_BYTES: Final = 16 << 20
#: Below this many bytes of ops the file is scanned in this process: starting workers costs more.
INLINE_BYTES: Final = 24 << 20

_I64: Final = 2**63 - 1
_NonNeg = Annotated[int, msgspec.Meta(ge=0, le=_I64)]
_NO_ERROR: Final = msgspec.Raw(b"")


class _Op(msgspec.Struct):
    """An op line as the format defines it; keys it does not name are ignored, as readers must."""

    index: _NonNeg
    time: _NonNeg
    wall: str
    process: _NonNeg | Annotated[str, msgspec.Meta(min_length=1)]
    type: Literal["invoke", "ok", "fail", "info"]
    f: Annotated[str, msgspec.Meta(min_length=1)]
    value: msgspec.Raw
    pindex: _NonNeg | None = None  # required in a merged file; None when absent (then refused)
    error: msgspec.Raw = _NO_ERROR


class OpSink(Protocol):
    """Where a chunk's validated ops go. ``value`` and ``error`` are the op's JSON text as bytes
    (``error`` None when the op has none); ``close`` returns a picklable summary."""

    def add(
        self,
        index: int,
        pindex: int,
        time: int,
        wall: str,
        process: int | str,
        type_: str,
        f: str,
        value: bytes,
        error: bytes | None,
    ) -> None: ...

    def close(self) -> Any: ...


#: Builds the sink of chunk ``n`` (chunks are numbered in file order). Must pickle: workers
#: receive it. Called again for the reader's fallback with ``n = 0`` after outputs are discarded.
SinkFactory = Callable[[int], OpSink]


@dataclass
class Scanned:
    """What a scan found: the header, the reader-style notes, the op count, the sinks' summaries
    in chunk order, and whether the reader had to judge the file (``fallback``)."""

    header: Header | None
    notes: list[str] = field(default_factory=list)
    ops: int = 0
    sinks: list[Any] = field(default_factory=list)
    fallback: bool = False


@dataclass
class _Chunk:
    path: Path
    no: int
    start: int
    end: int
    at_eof: bool
    make_sink: SinkFactory


@dataclass
class _Result:
    no: int
    ok: bool
    count: int = 0
    first_index: int = 0
    first_time: int = 0
    last_time: int = -1
    #: process -> (first pindex, last pindex) within the chunk
    pindex: dict[int | str, tuple[int, int]] = field(default_factory=dict)
    torn: bytes | None = None
    sink: Any = None


_decode = msgspec.json.Decoder(_Op).decode


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block or the decorated call (as it was
    after it).

    Why: converting a chunk makes millions of small acyclic objects (ops, rows, lists) that
    live until the chunk is written, so every collection walked all of them again for
    nothing: 30 % of a history scan (1M ops on one core: 19.7 s, 13.8 s without).
    Reference counting still frees them when the chunk is done.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@no_cyclic_gc()
def _scan_chunk(chunk: _Chunk) -> _Result:
    """Decode and check one chunk; ``ok=False`` at the first op the rules cannot prove good."""
    sink = chunk.make_sink(chunk.no)
    res = _Result(chunk.no, True)
    first_pindex: dict[int | str, int] = {}
    next_pindex: dict[int | str, int] = {}
    last_time = -1
    expect = -1
    lines = span_lines(chunk.path, chunk.start, chunk.end)
    n_lines = len(lines)
    add = sink.add
    for i, line in enumerate(lines):
        try:
            op = _decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            if chunk.at_eof and i == n_lines - 1 and _is_torn(line):
                res.torn = line
                break
            res.ok = False
            return res
        index, t, proc, pindex = op.index, op.time, op.process, op.pindex
        if expect < 0:
            res.first_index, res.first_time, expect = index, t, index
        err = op.error
        has_error = err is not _NO_ERROR
        if (
            index != expect
            or t < last_time
            or pindex is None
            or _check_wall(op.wall) is not None
            or (has_error and (op.type in ("invoke", "ok") or bytes(err) == b"null"))
            or (not has_error and op.type == "fail")
        ):
            res.ok = False
            return res
        want = next_pindex.get(proc)
        if want is None:
            first_pindex[proc] = pindex
        elif pindex != want:
            res.ok = False
            return res
        next_pindex[proc] = pindex + 1
        expect += 1
        last_time = t
        add(index, pindex, t, op.wall, proc, op.type, op.f, bytes(op.value),
            bytes(err) if has_error else None)  # fmt: skip
    res.count = 0 if expect < 0 else expect - res.first_index
    res.last_time = last_time
    res.pindex = {p: (first_pindex[p], next_pindex[p] - 1) for p in next_pindex}
    res.sink = sink.close()
    return res


def _is_torn(line: bytes) -> bool:
    """The reader's test for a torn line: not a JSON object at all."""
    try:
        return not isinstance(loads_strict(line), dict)
    except ValueError:
        return True


def line_spans(path: Path, start: int, size: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """Byte spans of about ``chunk_bytes`` from ``start`` to ``size``, each cut after a newline
    (a line longer than that is a span alone); one empty span for an empty range."""
    cuts = [start]
    with open(path, "rb") as fh:
        pos = start
        while pos + chunk_bytes < size:
            fh.seek(pos + chunk_bytes)
            fh.readline()
            pos = fh.tell()
            if pos >= size:
                break
            cuts.append(pos)
    cuts.append(size)
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a] or [(start, start)]


def span_lines(path: Path | str, start: int, end: int) -> list[bytes]:
    """The lines of one :func:`line_spans` span, without their newlines."""
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _chunks(path: Path, start: int, size: int, make_sink: SinkFactory) -> list[_Chunk]:
    spans = line_spans(path, start, size, CHUNK_BYTES)
    return [_Chunk(path, n, a, b, b >= size, make_sink) for n, (a, b) in enumerate(spans)]


def _stitch(results: list[_Result]) -> bool:
    """Whether the chunks' order facts join up: indexes run on, time never goes back, and every
    process's pindex continues where its previous chunk left it."""
    expect, last_time = 0, -1
    next_pindex: dict[int | str, int] = {}
    for r in results:
        if not r.ok:
            return False
        if r.count == 0:
            continue
        if r.first_index != expect or r.first_time < last_time:
            return False
        for proc, (first, last) in r.pindex.items():
            if first != next_pindex.get(proc, 0):
                return False
            next_pindex[proc] = last + 1
        expect += r.count
        last_time = r.last_time
    return True


def scan_history(
    path: str | os.PathLike[str],
    make_sink: SinkFactory,
    *,
    workers: int | None = None,
    discard: Callable[[], None] | None = None,
) -> Scanned:
    """Validate the merged history at ``path`` and feed every op to the sinks ``make_sink`` makes.

    Raises :class:`history.HistoryError` with the reader's own one-line message for a file the
    reader rejects. ``discard`` is called before the reader's fallback so the caller can throw
    away what the chunk sinks already wrote.
    """
    path = Path(path)
    with HistoryReader(path, kind=KIND_MERGED) as probe:
        header, notes, body = probe.header, list(probe.warnings), probe.body_offset
    out = Scanned(header, notes)
    if header is None:
        return out
    size = path.stat().st_size
    chunks = _chunks(path, body, size, make_sink)
    n_workers = min(workers or os.cpu_count() or 1, len(chunks))
    if size - body < INLINE_BYTES or n_workers < 2:
        results = [_scan_chunk(c) for c in chunks]
    else:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        with ctx.Pool(n_workers) as pool:
            results = pool.map(_scan_chunk, chunks, chunksize=1)
    if _stitch(results):
        out.ops = sum(r.count for r in results)
        out.sinks = [r.sink for r in results]
        torn = results[-1].torn if results else None
        if torn is not None:
            out.notes.append(torn_line_note(path, 1 + out.ops + 1, torn))
        return out
    if discard is not None:
        discard()
    return _by_reader(path, make_sink, out)


def _by_reader(path: Path, make_sink: SinkFactory, out: Scanned) -> Scanned:
    """The reader judges the file; an op it accepts goes to one sink, as the recorder wrote it."""
    sink = make_sink(0)
    n = 0
    with HistoryReader(path, kind=KIND_MERGED) as reader:
        for op in reader:
            err = op.get("error")
            sink.add(
                op["index"],
                op["pindex"],  # type: ignore[typeddict-item]  # the reader checked it is there
                op["time"],
                op["wall"],
                op["process"],
                op["type"],
                op["f"],
                encode_json(op["value"]).encode(),
                None if "error" not in op else encode_json(err).encode(),
            )
            n += 1
        out.notes = list(reader.warnings)
    out.ops, out.sinks, out.fallback = n, [sink.close()], True
    return out
