"""The eos history as Spark DataFrames: seeds, poison, transactions, the drained outputs.

Why a module of its own: every eos check (:mod:`checkers.eos_checks`, :mod:`checkers.eos_rules`)
joins the same few views of the history, and the history loader (:mod:`checkers.load`) keeps
each op's ``value`` as JSON text. Parsing that text once here, with explicit schemas, keeps
the checks to joins and aggregations and gives both modules the same column names.

Column conventions: input partitions/offsets are ``src_p``/``src_o``; a drained output record
is ``(topic, partition, offset)`` with ``key``, ``value``, ``headers`` (map), ``in_value`` (the
input it came from), ``ident`` (the input's identity, as in :mod:`checkers.eos_pyref`),
``instance``, ``generation``, ``txn_seq`` from its headers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.eos_results import RECORD_COLS
from history.eos_records import (
    H_GENERATION,
    H_INSTANCE,
    H_SRC_OFFSET,
    H_SRC_PARTITION,
    H_TXN_SEQ,
    OUTPUT_PREFIX,
    SEED_PATTERN,
)

_GROUP = "struct<offsets:array<array<string>>>"
_DRAIN = "struct<offsets:array<array<long>>>"


@dataclass
class EosFrames:
    """The views of one run every check needs.

    The DataFrames are read from the typed Parquet views :mod:`checkers.eos_views` stores
    beside the run (or, for a read-only run, parsed and persisted in memory); the plain
    Python fields are the few small facts the checks need as constants.
    """

    hist: DataFrame  # the loaded history, for the full ops shown in examples
    seeds: DataFrame  # value, src_p, src_o, send_index
    poison: DataFrame  # pv
    txns: DataFrame  # instance, txn_seq, inv_index, inv_time, inputs, done_index, done_type, ...
    drain: DataFrame  # see the module docstring; plus inv_index/done_index/inv_time
    committed: DataFrame  # src_p, committed
    fences: DataFrame  # instance, fence_time, fence_index
    finals: DataFrame  # the final process's ops except reads: index, f, type, value
    n_out: int
    reads: list[tuple[int, bool]]  # read_committed reads of the output topic: partition, ok
    committed_map: dict[int, int]
    offsets_index: int | None
    output_topic: str | None
    drain_op: dict[str, Any] | None
    persisted: list[DataFrame] = field(default_factory=list)
    idents: DataFrame | None = None  # built on first use by eos_rules.ident_table
    #: The run's transaction.timeout.ms as the history header records it (None if it does not).
    txn_timeout_ms: int | None = None
    #: Per-run helpers built on first use (the broker log join, :mod:`checkers.eos_log`);
    #: anything with a ``release`` method is released with the frames.
    extras: dict[str, Any] = field(default_factory=dict)
    #: Held while a per-run helper is built on first use: the checks run in threads.
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def readable(self) -> list[int]:
        """Output partitions whose read_committed read completed."""
        return sorted({p for p, ok in self.reads if ok})

    def release(self) -> None:
        """Drop frames persisted for this run (the session outlives one check run)."""
        for df in self.persisted:
            df.unpersist()
        self.persisted.clear()
        self.idents = None
        for extra in self.extras.values():
            if hasattr(extra, "release"):
                extra.release()
        self.extras.clear()


def _op(df: DataFrame, f: str, types: tuple[str, ...], proc: str | None = None) -> DataFrame:
    cond = (F.col("f") == f) & F.col("type").isin(*types)
    if proc is None:
        cond = cond & F.col("process_is_int")
    else:
        cond = cond & (F.col("process") == proc) & ~F.col("process_is_int")
    return df.filter(cond)


def input_of_col(value: Column) -> Column:
    """Spark form of :func:`history.eos_records.input_of`."""
    return F.when(
        value.startswith(OUTPUT_PREFIX), F.substring(value, len(OUTPUT_PREFIX) + 1, 1 << 20)
    ).when(value.rlike(SEED_PATTERN), value)


def parse_small(t: dict[str, DataFrame]) -> tuple[dict[str, DataFrame], dict[str, Any]]:
    """The small views and constants: poison, reads, committed offsets, fences, final ops."""
    reads = [
        (int(r["partition"]), bool(r["ok"]), r["topic"])
        for r in t["reads"].orderBy("index").collect()
    ]
    finals = t["finals"]
    committed, offsets_index = _committed(finals)
    drain_row = (
        _final(finals, "drain", ("ok", "info", "fail")).orderBy("index").select("index", "type")
    ).first()
    drain_op = None
    if drain_row is not None:
        drain_op = {"index": drain_row["index"], "type": drain_row["type"]}
    cmap: dict[int, int] = {}
    for r in committed.collect():
        if r["src_p"] is not None and r["committed"] is not None:
            cmap[int(r["src_p"])] = int(r["committed"])  # last wins, as in eos_pyref
    info = {
        "n_out": max(len(reads), 1),
        "reads": [[p, ok] for p, ok, _t in reads],
        "output_topic": reads[0][2] if reads else None,
        "committed_map": [[p, o] for p, o in sorted(cmap.items())],
        "offsets_index": offsets_index,
        "drain_op": drain_op,
    }
    frames = {
        "poison": t["poison"].distinct(),
        "committed": committed,
        "fences": _fences(t["starts"]),
        "finals": finals,
    }
    return frames, info


def parse_txns(t: dict[str, DataFrame]) -> DataFrame:
    """Processor transactions: invoke joined with its completion (if any)."""
    return t["txn_inv"].join(t["txn_done"], ["instance", "txn_seq"], "left")


def parse_drain(t: dict[str, DataFrame], seeds: DataFrame, txns: DataFrame) -> DataFrame:
    """The drained records (read_committed final reads), mapped back to inputs and transactions."""
    recs = t["records"]
    h = F.col("headers")
    recs = recs.select(
        "*",
        h[H_SRC_PARTITION].cast("int").alias("h_p"),
        h[H_SRC_OFFSET].cast("long").alias("h_o"),
        h[H_INSTANCE].cast("int").alias("instance"),
        h[H_GENERATION].cast("long").alias("generation"),
        h[H_TXN_SEQ].cast("long").alias("txn_seq"),
        input_of_col(F.col("value")).alias("io"),
    )
    has_h = F.col("h_p").isNotNull() & F.col("h_o").isNotNull()
    at = seeds.select(
        F.col("src_p").alias("h_p"), F.col("src_o").alias("h_o"), F.col("value").alias("at_v")
    )
    by_v = seeds.select(
        F.col("value").alias("io"), F.col("src_p").alias("v_p"), F.col("src_o").alias("v_o")
    )
    keep = (*RECORD_COLS, "read_index", "instance", "generation", "txn_seq")
    # Each side joins the seeds only by what it has: a record with source headers by its
    # position, a header-less one (the Java copier's) by its value. One join of every record
    # with the seeds by value cost as much as the rest of the view.
    by_header = (
        recs.filter(has_h)
        .join(at, ["h_p", "h_o"], "left")
        .select(
            *keep,
            F.col("h_p").alias("src_p"),
            F.col("h_o").alias("src_o"),
            F.coalesce("at_v", "io").alias("in_value"),
        )
    )
    by_value = (
        recs.filter(~has_h)
        .join(by_v, ["io"], "left")
        .select(*keep, F.col("v_p").alias("src_p"), F.col("v_o").alias("src_o"), "io")
    )
    recs = by_header.unionByName(by_value.withColumnRenamed("io", "in_value"))
    ident = F.when(
        F.col("src_p").isNotNull() & F.col("src_o").isNotNull(),
        F.concat_ws("/", F.col("src_p").cast("string"), F.col("src_o").cast("string")),
    ).otherwise(F.concat(F.lit("v:"), F.coalesce(F.col("in_value"), F.lit("None"))))
    tx = txns.select("instance", "txn_seq", "inv_index", "inv_time", "done_index")
    return recs.withColumn("ident", ident).join(tx, ["instance", "txn_seq"], "left")


def _final(finals: DataFrame, f: str, types: tuple[str, ...]) -> DataFrame:
    return finals.filter((F.col("f") == f) & F.col("type").isin(*types))


def _committed(finals: DataFrame) -> tuple[DataFrame, int | None]:
    """The group's final input offsets: ``group-offsets`` ok, else the drain's ``offsets``."""
    go = _final(finals, "group-offsets", ("ok",)).orderBy("index")  # the scan's parts: any order
    first = go.select("index").first()
    if first is not None:
        out = go.select(F.explode(F.from_json("value", _GROUP)["offsets"]).alias("x")).select(
            F.col("x")[1].cast("int").alias("src_p"), F.col("x")[2].cast("long").alias("committed")
        )
        return out, int(first["index"])
    dr = _final(finals, "drain", ("ok", "info", "fail")).orderBy("index")
    out = dr.select(F.explode(F.from_json("value", _DRAIN)["offsets"]).alias("x")).select(
        F.col("x")[0].cast("int").alias("src_p"), F.col("x")[1].alias("committed")
    )
    return out, None


def _fences(starts: DataFrame) -> DataFrame:
    """Instance -> first time its transactional id was fenced by someone else after its start.

    ``starts`` holds the processors' ``start`` ok ops and the nemesis' (a hijack is the
    nemesis starting a producer with a processor's transactional id).
    """
    own = starts.filter(~F.col("nemesis"))
    begun = own.filter(F.col("tid").isNotNull()).select(
        F.col("process").alias("proc"), F.col("time").alias("t0"), "tid"
    )
    events = own.unionByName(starts.filter(F.col("nemesis") & (F.col("kind") == "hijack"))).select(
        F.col("process").alias("eproc"),
        F.col("time").alias("et"),
        F.col("index").alias("eindex"),
        F.col("tid").alias("etid"),
    )
    j = begun.join(
        events,
        (F.col("etid") == F.col("tid"))
        & (F.col("et") > F.col("t0"))
        & (F.col("eproc") != F.col("proc")),
    )
    return (
        j.groupBy("proc")
        .agg(F.min(F.struct("et", "eindex")).alias("m"))
        .select(
            F.col("proc").cast("int").alias("instance"),
            F.col("m.et").alias("fence_time"),
            F.col("m.eindex").alias("fence_index"),
        )
    )


# ------------------------------------------------------------------------------------------
# Turning rows into example dicts


def ops_at(fr: EosFrames, indices: list[int]) -> dict[int, dict[str, Any]]:
    """The full ops at these history indices, as they were recorded (value/error decoded)."""
    want = sorted({int(i) for i in indices if i is not None})
    if not want:
        return {}
    rows = fr.hist.filter(F.col("index").isin(want)).orderBy("index", "part").collect()
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r["part"] and int(r["index"]) in out:  # a further slice of a big read's records
            out[int(r["index"])]["value"]["records"] += json.loads(r["value"])["records"]
            continue
        op: dict[str, Any] = {
            "index": r["index"],
            "pindex": r["pindex"],
            "time": r["time"],
            "wall": r["wall"],
            "process": int(r["process"]) if r["process_is_int"] else r["process"],
            "type": r["type"],
            "f": r["f"],
            "value": None if r["value"] is None else json.loads(r["value"]),
        }
        if r["error_json"] is not None:
            op["error"] = json.loads(r["error_json"])
        out[int(r["index"])] = op
    return out
