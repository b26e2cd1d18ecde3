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

_VALUES = "struct<values:array<array<string>>>"
_TXN_INVOKE = (
    "struct<txn:long,transactional_id:string,generation:long,member_id:string,"
    "inputs:array<array<string>>>"
)
_TXN_DONE = "struct<txn:long,outputs:array<array<string>>,offsets:array<array<long>>>"
_READ = "struct<topic:string,partition:int,isolation:string,records:array<array<string>>>"
_READ_HEAD = "struct<topic:string,partition:int,isolation:string>"
_GROUP = "struct<offsets:array<array<string>>>"
_DRAIN = "struct<offsets:array<array<long>>>"
_WATERMARKS = "struct<topic:string,partitions:array<struct<partition:int,lso:long,hwm:long>>>"
_HANGING = "struct<results:array<struct<broker:int,rows:array<map<string,string>>>>>"


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


#: Only these ops feed the views; the rest of the history is never parsed.
PARSED_FS = ("send", "send-aborted", "txn", "start", "read", "drain", "group-offsets")


def parse_small(hist: DataFrame) -> tuple[dict[str, DataFrame], dict[str, Any]]:
    """The small views and constants: poison, reads, committed offsets, fences, final ops."""
    poison = (
        _op(hist, "send-aborted", ("invoke",), "seeder")
        .select(F.explode(F.from_json("value", _VALUES)["values"]).alias("x"))
        .select(F.col("x")[0].alias("pv"))
        .distinct()
    )
    reads_raw = _reads_raw(hist, records=False)
    reads = [
        (int(r["partition"]), bool(r["ok"]), r["topic"])
        for r in reads_raw.select(
            F.col("r.partition").alias("partition"),
            (F.col("type") == "ok").alias("ok"),
            F.col("r.topic").alias("topic"),
            "index",
        )
        .dropDuplicates(["index"])  # a big read is stored as several rows (checkers.load)
        .orderBy("index")
        .collect()
    ]
    committed, offsets_index = _committed(hist)
    drain_row = (
        _op(hist, "drain", ("ok", "info", "fail"), "final").select("index", "type", "value").first()
    )
    drain_op = None
    if drain_row is not None:
        drain_op = {"index": drain_row["index"], "type": drain_row["type"]}
    finals = hist.filter(
        (F.col("process") == "final") & ~F.col("process_is_int") & (F.col("f") != "read")
    ).select("index", "f", "type", "value")
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
        "poison": poison,
        "committed": committed,
        "fences": _fences(hist),
        "finals": finals,
    }
    return frames, info


def parse_seeds(hist: DataFrame) -> DataFrame:
    """Acknowledged seeds: value, src_p, src_o, send_index."""
    return (
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
    )


def parse_txns(hist: DataFrame) -> DataFrame:
    """Processor transactions: invoke joined with its completion (if any)."""
    return _txns(hist)


def parse_drain(hist: DataFrame, seeds: DataFrame, txns: DataFrame, parallelism: int) -> DataFrame:
    """The drained records, mapped back to their inputs and transactions.

    The final reads are a handful of very large ops (every record of an output partition), so
    they are spread over ``parallelism`` tasks before their JSON is parsed; otherwise one core
    parses them all.
    """
    reads_raw = _reads_raw(hist, parallelism)
    return _drain(reads_raw, seeds, txns)


def _reads_raw(
    hist: DataFrame, parallelism: int | None = None, *, records: bool = True
) -> DataFrame:
    # A substring test first, so read_uncommitted reads (as large) are never JSON-parsed;
    # the exact isolation test follows the parse. Without ``records`` the parser skips them
    # (they are most of the bytes) instead of building their arrays.
    raw = _op(hist, "read", ("ok", "info"), "final").filter(
        F.col("value").contains("read_committed")
    )
    if parallelism:
        raw = raw.repartition(parallelism, "index")
    raw = raw.withColumn("r", F.from_json("value", _READ if records else _READ_HEAD))
    return raw.filter(F.col("r.isolation") == "read_committed")


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
        F.col("wall").alias("done_wall"),
        F.from_json("value", _TXN_DONE).alias("d"),
    )
    done = done.select(
        "instance",
        F.col("d.txn").alias("txn_seq"),
        "done_index",
        "done_type",
        "done_wall",
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
    recs = recs.join(at, ["h_p", "h_o"], "left").join(by_v, ["io"], "left")
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
