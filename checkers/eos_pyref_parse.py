"""Parsing an eos history for the pure-Python checks (:mod:`checkers.eos_pyref`).

Why separate: the reference checks stay short loops over these indexed views; the parsing
rules (which ops count, how a drained record is mapped back to its input) live in one place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.pyref import CheckerInputError
from workloads.eos_config import (
    H_GENERATION,
    H_INSTANCE,
    H_SRC_OFFSET,
    H_SRC_PARTITION,
    H_TXN_SEQ,
    input_of,
)

__all__ = ["EosRun", "Op", "parse_run", "resolve_record"]

Op = dict[str, Any]


@dataclass
class EosRun:
    """The parts of an eos history the checks look at, indexed for lookups."""

    ops: list[Op]
    seeds: list[tuple[str, int, int]] = field(default_factory=list)  # value, partition, offset
    seed_at: dict[tuple[int, int], str] = field(default_factory=dict)
    seed_op: dict[str, int] = field(default_factory=dict)  # value -> send op index
    poison: set[str] = field(default_factory=set)
    txn_invoke: dict[tuple[int, int], Op] = field(default_factory=dict)  # (instance, seq)
    txn_done: dict[tuple[int, int], Op] = field(default_factory=dict)
    starts: list[Op] = field(default_factory=list)  # start ok ops
    hijacks: list[Op] = field(default_factory=list)  # nemesis start ok, kind hijack
    drain: list[dict[str, Any]] = field(default_factory=list)  # read_committed records
    reads_ok: dict[int, bool] = field(default_factory=dict)  # out partition -> read complete
    drain_op: Op | None = None
    committed: dict[int, int] = field(default_factory=dict)  # group's final input offsets
    offsets_op: Op | None = None
    watermarks: list[Op] = field(default_factory=list)
    find_hanging: list[Op] = field(default_factory=list)
    output_topic: str | None = None
    run_dir: Path | None = None


def _int(x: Any) -> int | None:
    try:
        return None if x is None else int(x)
    except (TypeError, ValueError):
        return None


def resolve_record(
    rec: dict[str, Any], seed_at: dict[tuple[int, int], str], seed_pos: dict[str, tuple[int, int]]
) -> dict[str, Any]:
    """Add the input a drained output came from: ``src_p``, ``src_o``, ``in_value``, ``ident``.

    Source headers win; a header-less output (the Java copier) is mapped back by its value.
    ``ident`` is the input's identity for duplicates: ``"p/o"`` when the source position is
    known, else ``"v:<input value>"``.
    """
    h = rec["headers"] or {}
    sp, so = _int(h.get(H_SRC_PARTITION)), _int(h.get(H_SRC_OFFSET))
    value = rec["value"]
    in_value = input_of(value) if isinstance(value, str) else None
    if sp is not None and so is not None:
        in_value = seed_at.get((sp, so), in_value)
    elif in_value is not None and in_value in seed_pos:
        sp, so = seed_pos[in_value]
    rec["src_p"], rec["src_o"], rec["in_value"] = sp, so, in_value
    rec["ident"] = f"{sp}/{so}" if sp is not None and so is not None else f"v:{in_value}"
    rec["instance"] = _int(h.get(H_INSTANCE))
    rec["generation"] = _int(h.get(H_GENERATION))
    rec["txn_seq"] = _int(h.get(H_TXN_SEQ))
    return rec


def parse_run(run_dir: str | os.PathLike[str]) -> EosRun:
    """Read ``<run>/history.jsonl`` with the project's reader; bad input is one-line error."""
    from history import HistoryError, iter_history

    p = Path(run_dir)
    path = p if p.is_file() else p / "history.jsonl"
    if not path.is_file():
        raise CheckerInputError(f"{path}: no such history")
    try:
        with iter_history(path) as reader:
            ops = list(reader)
    except HistoryError as e:
        raise CheckerInputError(str(e)) from None
    run = EosRun(ops=ops, run_dir=path.parent)
    for op in ops:
        _parse_op(run, op)
    seed_pos = {v: (pp, o) for v, pp, o in run.seeds}
    run.drain = [resolve_record(r, run.seed_at, seed_pos) for r in run.drain]
    run.drain.sort(key=lambda r: (r["partition"], r["offset"]))
    return run


def _parse_op(run: EosRun, op: Op) -> None:
    f, t, v, proc = op["f"], op["type"], op.get("value"), op["process"]
    try:
        if proc == "seeder":
            if f == "send" and t in ("ok", "info"):
                for val, part, off in v["values"]:
                    if off is not None:
                        run.seeds.append((val, int(part), int(off)))
                        run.seed_at[(int(part), int(off))] = val
                        run.seed_op[val] = op["index"]
            elif f == "send-aborted" and t == "invoke":
                run.poison.update(x[0] for x in v["values"])
        elif isinstance(proc, int):
            if f == "txn":
                key = (proc, int(v["txn"]))
                (run.txn_invoke if t == "invoke" else run.txn_done)[key] = op
            elif f == "start" and t == "ok":
                run.starts.append(op)
        elif proc == "nemesis":
            if f == "start" and t == "ok" and isinstance(v, dict) and v.get("kind") == "hijack":
                run.hijacks.append(op)
        elif proc == "final":
            _parse_final(run, op, f, t, v)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise CheckerInputError(
            f"history op {op.get('index')} ({proc} {f} {t}): malformed eos value ({e!r})"
        ) from None


def _parse_final(run: EosRun, op: Op, f: str, t: str, v: Any) -> None:
    if f == "drain" and t != "invoke":
        run.drain_op = op
        if not run.committed:
            run.committed = {int(p): int(o) for p, o in v.get("offsets") or []}
    elif f == "group-offsets" and t == "ok":
        run.offsets_op = op
        run.committed = {int(p): int(o) for _tp, p, o in v["offsets"]}
    elif f == "read" and t != "invoke" and v["isolation"] == "read_committed":
        part = int(v["partition"])
        run.output_topic = v["topic"]
        run.reads_ok[part] = t == "ok"
        for off, key, value, headers in v.get("records") or []:
            run.drain.append(
                {
                    "topic": v["topic"],
                    "partition": part,
                    "offset": int(off),
                    "key": key,
                    "value": value,
                    "headers": headers or {},
                    "read_index": op["index"],
                }
            )
    elif f == "watermarks" and t == "ok":
        run.watermarks.append(op)
    elif f == "find-hanging" and t == "ok":
        run.find_hanging.append(op)
