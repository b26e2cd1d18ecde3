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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from workloads.eos_config import (
    H_GENERATION,
    H_INSTANCE,
    H_SRC_OFFSET,
    H_SRC_PARTITION,
    H_TXN_SEQ,
    OUTPUT_PREFIX,
)

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

_VALUES = "struct<values:array<array<string>>>"
_TXN_INVOKE = (
    "struct<txn:long,transactional_id:string,generation:long,member_id:string,"
    "inputs:array<array<string>>>"
)
_TXN_DONE = "struct<txn:long,outputs:array<array<string>>,offsets:array<array<long>>>"
_READ = "struct<topic:string,partition:int,isolation:string,records:array<array<string>>>"
_GROUP = "struct<offsets:array<array<string>>>"
_DRAIN = "struct<offsets:array<array<long>>>"
_WATERMARKS = "struct<topic:string,partitions:array<struct<partition:int,lso:long,hwm:long>>>"
_HANGING = "struct<results:array<struct<broker:int,rows:array<map<string,string>>>>>"

#: Columns of a drained record shown in examples, in this order.
RECORD_COLS = ("topic", "partition", "offset", "key", "value", "headers")


@dataclass
class EosFrames:
    """The views of one run every check needs (all small enough to cache)."""

    hist: DataFrame
    seeds: DataFrame  # value, src_p, src_o, send_index
    poison: DataFrame  # pv
    txns: DataFrame  # instance, txn_seq, inv_index, inv_time, inputs, done_index, done_type, ...
    reads: DataFrame  # partition, ok (read_committed reads of the output topic)
    n_out: int
    drain: DataFrame  # see the module docstring; plus inv_index/done_index/inv_time
    committed: DataFrame  # src_p, committed
    offsets_index: int | None
    fences: DataFrame  # instance, fence_time, fence_index
    output_topic: str | None
    drain_op: dict[str, Any] | None

    def release(self) -> None:
        """Drop the cached frames (the session outlives one check run)."""
        for df in (self.seeds, self.txns, self.drain, self.committed):
            df.unpersist()


def _op(df: DataFrame, f: str, types: tuple[str, ...], proc: str | None = None) -> DataFrame:
    cond = (F.col("f") == f) & F.col("type").isin(*types)
    if proc is None:
        cond = cond & F.col("process_is_int")
    else:
        cond = cond & (F.col("process") == proc) & ~F.col("process_is_int")
    return df.filter(cond)


def input_of_col(value: Column) -> Column:
    """Spark form of :func:`workloads.eos_config.input_of`."""
    return F.when(
        value.startswith(OUTPUT_PREFIX), F.substring(value, len(OUTPUT_PREFIX) + 1, 1 << 20)
    ).when(value.rlike(r"^v[0-9]{6}$"), value)


def build(spark: SparkSession, hist: DataFrame, run_dir: Path) -> EosFrames:
    """Parse the history's eos ops into the frames the checks join."""
    hist = hist.cache()
    seeds = (
        _op(hist, "send", ("ok", "info"), "seeder")
        .select(
            F.col("index").alias("send_index"),
            F.explode(F.from_json("value", _VALUES)["values"]).alias("x"),
        )
        .select(
            F.col("x")[0].alias("value"),
            F.col("x")[1].cast("int").alias("src_p"),
            F.col("x")[2].cast("long").alias("src_o"),
            "send_index",
        )
        .filter(F.col("src_o").isNotNull())
        .cache()
    )
    poison = (
        _op(hist, "send-aborted", ("invoke",), "seeder")
        .select(F.explode(F.from_json("value", _VALUES)["values"]).alias("x"))
        .select(F.col("x")[0].alias("pv"))
        .distinct()
    )
    txns = _txns(hist).cache()
    reads_raw = _op(hist, "read", ("ok", "info"), "final").withColumn(
        "r", F.from_json("value", _READ)
    )
    reads_raw = reads_raw.filter(F.col("r.isolation") == "read_committed")
    reads = reads_raw.select(
        F.col("r.partition").alias("partition"), (F.col("type") == "ok").alias("ok")
    )
    meta = reads_raw.agg(F.count(F.lit(1)).alias("n"), F.first("r.topic").alias("topic")).first()
    n_out = max(int(meta["n"] or 0), 1)
    drain = _drain(reads_raw, seeds, txns).cache()
    committed, offsets_index = _committed(hist)
    drain_row = (
        _op(hist, "drain", ("ok", "info", "fail"), "final").select("index", "type", "value").first()
    )
    drain_op = None
    if drain_row is not None:
        drain_op = {"index": drain_row["index"], "type": drain_row["type"]}
    return EosFrames(
        hist=hist,
        seeds=seeds,
        poison=poison,
        txns=txns,
        reads=reads,
        n_out=n_out,
        drain=drain,
        committed=committed.cache(),
        offsets_index=offsets_index,
        fences=_fences(hist),
        output_topic=meta["topic"],
        drain_op=drain_op,
    )


def _txns(hist: DataFrame) -> DataFrame:
    inv = _op(hist, "txn", ("invoke",)).select(
        F.col("process").cast("int").alias("instance"),
        F.col("index").alias("inv_index"),
        F.col("time").alias("inv_time"),
        F.from_json("value", _TXN_INVOKE).alias("v"),
    )
    inv = inv.select(
        "instance",
        F.col("v.txn").alias("txn_seq"),
        "inv_index",
        "inv_time",
        F.col("v.generation").alias("txn_generation"),
        F.col("v.inputs").alias("inputs"),
    )
    done = _op(hist, "txn", ("ok", "fail", "info")).select(
        F.col("process").cast("int").alias("instance"),
        F.col("index").alias("done_index"),
        F.col("type").alias("done_type"),
        F.from_json("value", _TXN_DONE).alias("d"),
    )
    done = done.select(
        "instance",
        F.col("d.txn").alias("txn_seq"),
        "done_index",
        "done_type",
        F.col("d.offsets").alias("txn_offsets"),
    )
    return inv.join(done, ["instance", "txn_seq"], "left")


def _drain(reads_raw: DataFrame, seeds: DataFrame, txns: DataFrame) -> DataFrame:
    recs = reads_raw.select(
        F.col("r.topic").alias("topic"),
        F.col("r.partition").alias("partition"),
        F.col("index").alias("read_index"),
        F.explode(F.col("r.records")).alias("x"),
    ).select(
        "topic",
        "partition",
        F.col("x")[0].cast("long").alias("offset"),
        F.col("x")[1].alias("key"),
        F.col("x")[2].alias("value"),
        F.coalesce(F.from_json(F.col("x")[3], "map<string,string>"), F.create_map()).alias(
            "headers"
        ),
        "read_index",
    )
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
    recs = recs.join(F.broadcast(at), ["h_p", "h_o"], "left").join(
        F.broadcast(by_v), ["io"], "left"
    )
    src_p = F.when(has_h, F.col("h_p")).otherwise(F.col("v_p"))
    src_o = F.when(has_h, F.col("h_o")).otherwise(F.col("v_o"))
    recs = recs.select(
        *RECORD_COLS,
        "read_index",
        "instance",
        "generation",
        "txn_seq",
        src_p.alias("src_p"),
        src_o.alias("src_o"),
        F.when(has_h, F.coalesce("at_v", "io")).otherwise(F.col("io")).alias("in_value"),
    )
    ident = F.when(
        F.col("src_p").isNotNull() & F.col("src_o").isNotNull(),
        F.concat_ws("/", F.col("src_p").cast("string"), F.col("src_o").cast("string")),
    ).otherwise(F.concat(F.lit("v:"), F.coalesce(F.col("in_value"), F.lit("None"))))
    t = txns.select("instance", "txn_seq", "inv_index", "inv_time", "done_index")
    return recs.withColumn("ident", ident).join(t, ["instance", "txn_seq"], "left")


def _committed(hist: DataFrame) -> tuple[DataFrame, int | None]:
    """The group's final input offsets: ``group-offsets`` ok, else the drain's ``offsets``."""
    go = _op(hist, "group-offsets", ("ok",), "final")
    first = go.select("index").first()
    if first is not None:
        out = go.select(F.explode(F.from_json("value", _GROUP)["offsets"]).alias("x")).select(
            F.col("x")[1].cast("int").alias("src_p"), F.col("x")[2].cast("long").alias("committed")
        )
        return out, int(first["index"])
    dr = _op(hist, "drain", ("ok", "info", "fail"), "final")
    out = dr.select(F.explode(F.from_json("value", _DRAIN)["offsets"]).alias("x")).select(
        F.col("x")[0].cast("int").alias("src_p"), F.col("x")[1].alias("committed")
    )
    return out, None


def _fences(hist: DataFrame) -> DataFrame:
    """Instance -> first time its transactional id was fenced by someone else after its start."""
    tid = F.get_json_object("value", "$.transactional_id")
    starts = _op(hist, "start", ("ok",)).select(
        F.col("process").alias("proc"), F.col("time").alias("t0"), tid.alias("tid")
    )
    hij = _op(hist, "start", ("ok",), "nemesis").filter(
        F.get_json_object("value", "$.kind") == "hijack"
    )
    events = (
        _op(hist, "start", ("ok",))
        .unionByName(hij)
        .select(
            F.col("process").alias("eproc"),
            F.col("time").alias("et"),
            F.col("index").alias("eindex"),
            tid.alias("etid"),
        )
    )
    j = starts.filter(F.col("tid").isNotNull()).join(
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
    rows = fr.hist.filter(F.col("index").isin(want)).collect()
    out = {}
    for r in rows:
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


def record_dict(row: Any) -> dict[str, Any]:
    """A drained record (a Row or struct) in the example shape shared with the reference."""
    d = row.asDict(recursive=True) if hasattr(row, "asDict") else dict(row)
    return {k: d[k] for k in RECORD_COLS}
