"""Merging per-process files into the single, globally indexed history checkers read.

Each per-process file is already sorted by ``time`` (one writer, monotonic clock), so a k-way
``heapq.merge`` produces the global order while holding one op per input file in memory; a
10M-op history streams through in constant memory. The cost is one open descriptor per input,
so a run with more process files than the descriptor limit must raise ``ulimit -n``.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from history.reader import HistoryReader
from history.recorder import wall_now
from history.schema import (
    FORMAT_VERSION,
    KIND_MERGED,
    KIND_PROCESS,
    VERSION_KEY,
    Header,
    HistoryError,
    Op,
    Process,
    encode_json,
    process_sort_key,
)

_WRITE_BUFFER: Final = 1 << 20


@dataclass(frozen=True)
class MergeSummary:
    """What a merge produced, so the harness can log it and fail fast on empty runs."""

    path: Path
    ops: int
    ops_per_process: dict[Process, int]
    sources: tuple[Path, ...]
    #: Inputs with no header (writer died before its first line); they contribute no ops.
    skipped: tuple[Path, ...]
    #: Notes about tolerated damage (torn last lines, empty files), one line each.
    warnings: tuple[str, ...]


def merge_key(op: Op) -> tuple[int, tuple[int, int, str], int]:
    """Global order: time, then process, then per-process index. The tie-breaks make the output
    independent of the order input paths were given in, so re-merging is byte-reproducible
    apart from the header's timestamp."""
    return (op["time"], process_sort_key(op["process"]), op["index"])


def _renumbered(ops: Iterator[Op]) -> Iterator[Op]:
    # index first, pindex second: a human reading the file sees the global position first.
    for index, op in enumerate(ops):
        out: dict[str, Any] = {"index": index, "pindex": op["index"]}
        for key, value in op.items():
            if key != "index":
                out[key] = value
        yield cast(Op, out)


def _check_sources(opened: list[tuple[HistoryReader, Header]]) -> None:
    owner: dict[Process, Path] = {}
    boots: dict[str, Path] = {}
    for reader, header in opened:
        process = header["process"]
        if process in owner:
            raise HistoryError(
                f"process {process!r} appears in both {owner[process]} and {reader.path}; "
                "every writer needs its own process id"
            )
        owner[process] = reader.path
        clock = header.get("clock")
        boot = clock.get("boot_id") if isinstance(clock, dict) else None
        if isinstance(boot, str):
            boots.setdefault(boot, reader.path)
    if len(boots) > 1:
        a, b = list(boots.values())[:2]
        raise HistoryError(
            f"{a} and {b} were recorded under different kernel boots, so their monotonic "
            "times are not comparable; merge per machine instead"
        )


def merge_histories(
    paths: Iterable[str | os.PathLike[str]],
    out_path: str | os.PathLike[str],
    *,
    meta: dict[str, Any] | None = None,
) -> MergeSummary:
    """Merge per-process files into ``out_path`` (replacing it atomically).

    The output is written to a temporary sibling and renamed into place only when complete, so a
    merged history on disk is never a partial one. ``meta`` describes the run as a whole and goes
    into the merged header next to each source's own header.
    """
    out = Path(out_path)
    sources = tuple(Path(p) for p in paths)
    if out.resolve() in {p.resolve() for p in sources}:
        raise HistoryError(f"merge output {out} is also one of its inputs")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")

    with ExitStack() as stack:
        opened: list[tuple[HistoryReader, Header]] = []
        skipped: list[Path] = []
        notes: list[str] = []
        for path in sources:
            reader = stack.enter_context(HistoryReader(path, kind=KIND_PROCESS))
            if reader.header is None:
                skipped.append(path)
                notes.extend(reader.warnings)
            else:
                opened.append((reader, reader.header))
        opened.sort(key=lambda pair: process_sort_key(pair[1]["process"]))
        _check_sources(opened)

        header: Header = {
            VERSION_KEY: FORMAT_VERSION,
            "kind": KIND_MERGED,
            "meta": dict(meta) if meta is not None else {},
            "merged_wall": wall_now(),
            "sources": [
                {
                    "file": str(reader.path),
                    "process": source["process"],
                    "meta": source.get("meta", {}),
                    "clock": source.get("clock"),
                }
                for reader, source in opened
            ],
        }
        counts: dict[Process, int] = {source["process"]: 0 for _, source in opened}
        total = 0
        try:
            with open(tmp, "w", encoding="ascii", newline="\n", buffering=_WRITE_BUFFER) as fh:
                fh.write(encode_json(header) + "\n")
                merged = heapq.merge(*(iter(r) for r, _ in opened), key=merge_key)
                for op in _renumbered(merged):
                    fh.write(encode_json(op) + "\n")
                    counts[op["process"]] += 1
                    total += 1
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        for reader, _ in opened:
            notes.extend(reader.warnings)

    return MergeSummary(
        path=out,
        ops=total,
        ops_per_process=counts,
        sources=sources,
        skipped=tuple(skipped),
        warnings=tuple(notes),
    )
