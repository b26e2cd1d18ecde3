"""The eos views of a run, joined once with Arrow and stored as typed Parquet beside the run.

Why Arrow and not Spark: the views are preparation, not judgement. They map every drained
record back to its input and its transaction (two equi-joins on keys the history scan already
typed, :mod:`checkers.eos.extract`) and gather a few small facts. On Spark that was some
fifteen jobs whose planning and JIT warm-up cost more than the joins themselves (22 s of a 1M-op
first check, 82 s at 10M); Arrow's hash joins do the same in a few seconds with no warm-up.
Every check still runs on Spark over these views, and the Python reference
(:mod:`checkers.eos.pyref`) still agrees with it on every history the tests hold.

The views are stored under ``<run>/.parquet/eos-views/`` (manifest ``eos-views.json``: the
history's size and mtime, :data:`VIEWS_FORMAT` and the small constants); later checks of the
unchanged history read only the typed columns they use. A run directory that cannot be
written gets its views in a temporary directory, removed when the frames are released.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers.eos import frames as E
from checkers.eos.extract import SCHEMAS, cast_int
from checkers.eos.results import transaction_timeout_ms
from checkers.load import Loaded, derived_cache, publish_derived
from checkers.spark import scratch_dir

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Bump when a view's columns or meaning change, so stale views are rebuilt, never misread.
VIEWS_FORMAT = 6
NAME = "eos-views"
VIEWS = ("seeds", "poison", "txns", "drain", "committed", "fences", "finals", "rebalances")

_I32: Final = 2**31 - 1
#: Rows per Parquet row group: Spark splits a view's file by row groups across its cores.
_ROW_GROUP: Final = 131_072
_DRAIN_TYPES: Final = ("ok", "info", "fail")


def build(spark: SparkSession, loaded: Loaded) -> E.EosFrames:
    """The run's :class:`EosFrames`, from the stored views if they are current."""
    if loaded.tables is None:
        raise ValueError(f"{loaded.source}: loaded without the eos tables")
    tables = loaded.tables
    scratch: Path | None = None
    data, meta = derived_cache(loaded.source, NAME)
    if meta is None or meta.get("views_format") != VIEWS_FORMAT:
        done = publish_derived(
            loaded.source, NAME, lambda d: write_views(tables, d), {"views_format": VIEWS_FORMAT}
        )
        if done is None:  # read-only run directory: the views live as long as the frames
            scratch = scratch_dir("kh-eos-views-")
            data, meta = scratch, write_views(tables, scratch)
        else:
            data, meta = done
    views = {name: spark.read.parquet(str(data / name)) for name in VIEWS}
    fr = _frames(loaded.df, views, meta)
    fr.txn_timeout_ms = transaction_timeout_ms(loaded.header)
    if scratch is not None:
        fr.extras["views-scratch"] = _Scratch(scratch)
    return fr


class _Scratch:
    """A temporary views directory, removed with the frames that read it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def release(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _frames(hist: DataFrame, v: dict[str, DataFrame], meta: dict[str, Any]) -> E.EosFrames:
    return E.EosFrames(
        hist=hist,
        seeds=v["seeds"],
        poison=v["poison"],
        txns=v["txns"],
        drain=v["drain"],
        committed=v["committed"],
        fences=v["fences"],
        finals=v["finals"],
        rebalances=v["rebalances"],
        n_out=int(meta["n_out"]),
        reads=[(int(p), bool(ok)) for p, ok in meta["reads"]],
        committed_map={int(p): int(o) for p, o in meta["committed_map"]},
        offsets_index=meta["offsets_index"],
        output_topic=meta["output_topic"],
        drain_op=meta["drain_op"],
    )


# ------------------------------------------------------------------------------------------
# Building the views


def write_views(tables: Path, out: Path) -> dict[str, Any]:
    """Join every view from the scan's typed tables, write each as Parquet under ``out``;
    returns the small constants (the manifest keeps them)."""
    names = ("seeds", "poison", "finals", "starts", "reads", "rebalances")
    t = {n: _table(tables / n) for n in names}
    out.mkdir(parents=True, exist_ok=True)
    finals = t["finals"].sort_by([("index", "ascending")])
    committed, offsets_index = _committed(finals.to_pylist())
    txns = _txns(_table(tables / "txn_inv"), _table(tables / "txn_done"))
    views = {
        "seeds": t["seeds"],
        "poison": pa.table({"pv": pc.unique(t["poison"]["pv"])}),
        "committed": committed,
        "fences": _fences(t["starts"].to_pylist()),
        "finals": finals,
        "txns": txns,
        "rebalances": t["rebalances"],
    }
    tx = txns.select(["instance", "txn_seq", "inv_index", "inv_time", "done_index"])
    # Encoding Parquet is most of the time left and releases the GIL: two writers.
    with _Writer(2) as write:
        for name, table in views.items():
            write(out / name / "part-00000.parquet", table)
        del views, txns
        parts = sorted((tables / "records").glob("*.parquet"))
        _write_drain(parts, t["seeds"], tx, out / "drain", write)
    reads = t["reads"].sort_by([("index", "ascending")]).to_pylist()
    drain_op = next(
        (
            {"index": r["index"], "type": r["type"]}
            for r in finals.to_pylist()
            if r["f"] == "drain" and r["type"] in _DRAIN_TYPES
        ),
        None,
    )
    cmap: dict[int, int] = {}
    parts, offsets = committed["src_p"].to_pylist(), committed["committed"].to_pylist()
    for p, o in zip(parts, offsets, strict=True):
        if p is not None and o is not None:
            cmap[p] = o  # last wins, as in eos_pyref
    return {
        "n_out": max(len(reads), 1),
        "reads": [[r["partition"], r["ok"]] for r in reads],
        "output_topic": reads[0]["topic"] if reads else None,
        "committed_map": [[p, o] for p, o in sorted(cmap.items())],
        "offsets_index": offsets_index,
        "drain_op": drain_op,
    }


class _Writer:
    """Writes tables as Parquet files on a few threads, holding at most ``threads`` waiting
    tables (so memory stays bounded); a failed write raises when the writer closes."""

    def __init__(self, threads: int) -> None:
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="eos-views")
        self.pending: list[Future[None]] = []
        self.threads = threads

    def __enter__(self) -> _Writer:
        return self

    def __call__(self, path: Path, table: pa.Table) -> None:
        while len(self.pending) > self.threads:
            self.pending.pop(0).result()
        self.pending.append(self.pool.submit(_write, path, table))

    def __exit__(self, *exc: object) -> None:
        try:
            for f in self.pending:
                f.result()
        finally:
            self.pool.shutdown(cancel_futures=True)


def _write(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=_ROW_GROUP)


def _table(path: Path, name: str | None = None) -> pa.Table:
    """A scan table (a directory of parts, or one part of table ``name``) with its schema."""
    return pq.read_table(path, schema=SCHEMAS[name or path.name])


def _committed(finals: list[dict[str, Any]]) -> tuple[pa.Table, int | None]:
    """The group's final input offsets: every ``group-offsets`` ok op's ``[topic, partition,
    offset]`` items in history order, else the drain's ``[partition, offset]`` items; and the
    index of the first ``group-offsets`` op (None when the drain's were used)."""
    group = [r for r in finals if r["f"] == "group-offsets" and r["type"] == "ok"]
    drains = [r for r in finals if r["f"] == "drain" and r["type"] in _DRAIN_TYPES]
    ops, at = (group, 1) if group else (drains, 0)
    rows: list[tuple[int | None, int | None]] = []
    for r in ops:
        for x in _offset_items(r["value"]):
            part = x[at] if len(x) > at else None
            off = x[at + 1] if len(x) > at + 1 else None
            rows.append((cast_int(part, _I32), cast_int(off)))
    table = pa.table(
        {
            "src_p": pa.array([p for p, _ in rows], pa.int32()),
            "committed": pa.array([o for _, o in rows], pa.int64()),
        }
    )
    return table, (int(group[0]["index"]) if group else None)


def _offset_items(value: str | None) -> list[list[Any]]:
    """The ``offsets`` list of an op's JSON value; nothing for any other shape."""
    try:
        v = json.loads(value) if value is not None else None
    except ValueError:
        return []
    items = v.get("offsets") if isinstance(v, dict) else None
    return [x for x in items if isinstance(x, list)] if isinstance(items, list) else []


def _fences(starts: list[dict[str, Any]]) -> pa.Table:
    """Instance -> first time its transactional id was taken by someone else after its start.

    ``starts`` holds the processors' ``start`` ok ops and the nemesis' (a hijack is the
    nemesis starting a producer with a processor's transactional id).
    """
    own = [s for s in starts if not s["nemesis"]]
    events = defaultdict(list)
    for s in own + [s for s in starts if s["nemesis"] and s["kind"] == "hijack"]:
        if s["tid"] is not None and s["time"] is not None:
            events[s["tid"]].append((s["time"], s["index"], s["process"]))
    first: dict[str, tuple[int, int]] = {}
    for s in own:
        tid, t0, proc = s["tid"], s["time"], s["process"]
        if tid is None or t0 is None:
            continue
        for et, ei, eproc in events.get(tid, ()):
            if et > t0 and eproc != proc and (proc not in first or (et, ei) < first[proc]):
                first[proc] = (et, ei)
    procs = sorted(first)
    return pa.table(
        {
            "instance": pa.array([cast_int(p, _I32) for p in procs], pa.int32()),
            "fence_time": pa.array([first[p][0] for p in procs], pa.int64()),
            "fence_index": pa.array([first[p][1] for p in procs], pa.int64()),
        }
    )


def _txns(inv: pa.Table, done: pa.Table) -> pa.Table:
    """Processor transactions: each invoke with its completion (if any)."""
    return _left_join(inv, done, ["instance", "txn_seq"])


def _left_join(left: pa.Table, right: pa.Table, keys: list[str]) -> pa.Table:
    """``left`` left-outer-joined to ``right`` on ``keys`` (null keys match nothing), keys
    first. Arrow's join carries no list or map columns, so it joins row numbers and takes."""
    lrow = pa.table(
        [*(left[k] for k in keys), pa.array(range(left.num_rows), pa.int64())], names=[*keys, "_l"]
    )
    rrow = pa.table(
        [*(right[k] for k in keys), pa.array(range(right.num_rows), pa.int64())],
        names=[*keys, "_r"],
    )
    j = lrow.join(rrow, keys, join_type="left outer", use_threads=True)
    lt = left.drop_columns(keys).take(j["_l"])
    rt = right.drop_columns(keys).take(j["_r"])
    cols = [j[k] for k in keys] + lt.columns + rt.columns
    return pa.table(cols, names=[*keys, *lt.column_names, *rt.column_names])


#: A drained record's columns as read, and those the joins need.
_WIDE: Final = (
    "topic",
    "partition",
    "offset",
    "key",
    "value",
    "headers",
    "read_index",
    "generation",
)
_LEAN: Final = ("h_p", "h_o", "io", "instance", "txn_seq")
_OWN: Final = ("instance", "txn_seq", "src_p", "src_o", "in_value", "ident")
_TXN: Final = ("inv_index", "inv_time", "done_index")


def _write_drain(
    parts: list[Path], seeds: pa.Table, tx: pa.Table, out: Path, write: _Writer
) -> None:
    """The drain view: every drained record, with what :func:`_resolve` found for it.

    The joins run once over the records' key columns; the wide columns (values, headers) are
    then read and written one scan chunk at a time (a file each, all of the first's schema),
    which bounds the memory (all at once held 7.8 GB at 10M ops) without building the seeds'
    hash tables once per chunk.
    """
    schema = SCHEMAS["records"]
    lean = [pq.read_table(p, columns=list(_LEAN), schema=schema) for p in parts]
    resolved = _resolve(pa.concat_tables(lean), seeds, tx)
    resolved = resolved.take(pc.sort_indices(resolved["_row"]))
    lo, first = 0, None
    for part, table in zip(parts, lean, strict=True):
        hi = lo + table.num_rows
        start = pc.sum(pc.less(resolved["_row"], lo)).as_py() or 0
        stop = pc.sum(pc.less(resolved["_row"], hi)).as_py() or 0
        mine = resolved.slice(start, stop - start)
        wide = pq.read_table(part, columns=list(_WIDE), schema=schema)
        wide = wide.take(pc.subtract(mine["_row"], lo))
        drain = pa.table(
            [*wide.columns, *(mine[c] for c in (*_OWN, *_TXN))], names=[*_WIDE, *_OWN, *_TXN]
        )
        first = first or drain.schema
        write(out / part.name, drain.cast(first))
        lo = hi


def _resolve(records: pa.Table, seeds: pa.Table, txns: pa.Table) -> pa.Table:
    """For each drained record (by row number ``_row``): the input it came from (``src_p``,
    ``src_o``, ``in_value``, ``ident``) and its writer transaction's ``inv_index``,
    ``inv_time``, ``done_index``; its ``instance`` and ``txn_seq`` as its headers say.

    A record with source headers is joined to the seeds by that position, a header-less one
    (the Java copier's) by its value; ``ident`` is ``"p/o"`` when the position is known, else
    ``"v:<input value>"``, as in :func:`checkers.eos.pyref_parse.resolve_record`.
    """
    rows = pa.array(range(records.num_rows), pa.int64())
    lean = pa.table([rows, *(records[c] for c in _LEAN)], names=["_row", *_LEAN])
    has_h = pc.and_(pc.is_valid(lean["h_p"]), pc.is_valid(lean["h_o"]))
    names = ["_row", "instance", "txn_seq", "src_p", "src_o", "in_value"]
    found = []
    headed = lean.filter(has_h)
    if headed.num_rows:
        at = pa.table(
            [seeds["src_p"], seeds["src_o"], seeds["value"]], names=["h_p", "h_o", "at_v"]
        )
        j = headed.join(at, ["h_p", "h_o"], join_type="left outer")
        in_value = pc.coalesce(j["at_v"], j["io"])
        cols = ("_row", "instance", "txn_seq", "h_p", "h_o")
        found.append(pa.table([*(j[c] for c in cols), in_value], names=names))
    bare = lean.filter(pc.invert(has_h))
    if bare.num_rows or not found:
        by_v = pa.table(
            [seeds["value"], seeds["src_p"], seeds["src_o"]], names=["io", "v_p", "v_o"]
        )
        j = bare.join(by_v, ["io"], join_type="left outer")
        cols = ("_row", "instance", "txn_seq", "v_p", "v_o", "io")
        found.append(pa.table([j[c] for c in cols], names=names))
    resolved = pa.concat_tables(found)
    resolved = resolved.join(txns, ["instance", "txn_seq"], join_type="left outer")
    known = pc.and_(pc.is_valid(resolved["src_p"]), pc.is_valid(resolved["src_o"]))
    position = pc.binary_join_element_wise(
        pc.cast(resolved["src_p"], pa.string()), pc.cast(resolved["src_o"], pa.string()), "/"
    )
    by_input = pc.binary_join_element_wise("v:", pc.coalesce(resolved["in_value"], "None"), "")
    return resolved.append_column("ident", pc.if_else(known, position, by_input))
