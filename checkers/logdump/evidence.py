"""The broker log dump prepared for Spark, and each record's place among its producer's
transactions: what the logs family's checks and the other families' joins are built on.

Why shared: the logs family's checks and the eos and connect families' log joins read the same
frames (partitioned by replica partition, reference replicas chosen, the per-producer state
machine as columns). Preparing a dump is the costly part, so it is done once per check run and
dropped with :meth:`Evidence.release`. :mod:`checkers.logdump.pyref` is the plain-Python
twin; the tests demand identical results.

Public API::

    prepare(df) -> Evidence
    log_positions(ev_or_df, topic) -> DataFrame   # rules.Pos per data record; pos_of(row)
    resolve_records(ev, selectors)                # the dump records an example shows
    PositionLog(ev)                               # positions per topic, persisted for a run
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.logdump.rules import (
    MAX_TXN_RECORDS,
    Marker,
    Pos,
    Selector,
    position_evidence,
    position_selectors,
)
from history.logdump import FINGERPRINT_FIELDS
from history.logdump_format import FIELDS, MARKERS, TXN_KINDS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A drained or watched position: (topic, partition, offset).
Where = tuple[str, int, int]

PART = ["kind", "topic", "partition"]


KEY = ["node", "kind", "topic", "partition", "producerId"]


_ORDER = ["offset", "_row"]


@dataclass
class Evidence:
    """A dump prepared for the checks: partitioned by (kind, topic, partition) and cached.

    ``full`` is the dump as loaded (every field, used to show examples); ``base`` keeps only
    what the checks read, plus ``fp`` (a hash of what replicas must agree on) and ``is_ref``
    (this replica is its partition's reference replica, see
    :func:`checkers.logdump.rules.reference_rank`).
    """

    spark: SparkSession
    full: DataFrame
    base: DataFrame
    summary: DataFrame
    _txn: DataFrame | None = None
    _cache: dict[str, Any] = field(default_factory=dict)
    _persisted: list[DataFrame] = field(default_factory=list)
    #: Held while a shared frame or figure is built on first use: checks run in threads.
    lock: threading.RLock = field(default_factory=threading.RLock)

    def txn(self) -> DataFrame:
        """Producer records with the per-producer state machine's columns (see _txn_frame)."""
        with self.lock:
            if self._txn is None:
                self._txn = _txn_frame(self.base).persist(StorageLevel.MEMORY_AND_DISK)
                self._persisted.append(self._txn)
            return self._txn

    def release(self) -> None:
        """Drop cached data (the session may live on, e.g. in tests)."""
        for df in self._persisted:
            df.unpersist()
        self._persisted.clear()
        self._txn = None
        before = self._cache.pop("shuffle_partitions", None)
        if before is not None:
            self.spark.conf.set("spark.sql.shuffle.partitions", before)


def partitions_for(spark: SparkSession, rows: int) -> int:
    """Partitions for a dump of ``rows`` records: one per ~250k, at most the configured number.

    Small dumps (tests, short runs) are dominated by per-task overhead, so they get one.
    """
    limit = int(spark.sparkContext.getConf().get("spark.sql.shuffle.partitions", "8"))
    return max(1, min(limit, rows // 250_000 + 1))


def prepare(df: DataFrame, *, partitions: int | None = None) -> Evidence:
    """Partition and cache a loaded dump once for all checks."""
    spark = df.sparkSession
    fp_cols: list[Column] = []
    for c in FINGERPRINT_FIELDS:
        fp_cols += [F.isnull(c), F.col(c)]
    slim = df.select(
        "node",
        "kind",
        "topic",
        "partition",
        "offset",
        "producerId",
        "producerEpoch",
        "isTransactional",
        "isControl",
        "marker",
        "_row",
        F.coalesce("partitionLeaderEpoch", F.lit(-1)).alias("ple"),
        F.greatest("offset", F.coalesce("lastOffset", "offset")).alias("last"),
        F.xxhash64(*fp_cols).alias("fp"),
    )
    before = spark.conf.get("spark.sql.shuffle.partitions")
    n = partitions or int(before or "8")
    spark.conf.set("spark.sql.shuffle.partitions", str(n))
    slim = slim.repartition(n, *PART)
    ctrl = F.col("isControl")
    summary = (
        slim.groupBy(*PART, "node")
        .agg(
            F.coalesce(F.max(F.when(F.col("ple") >= 0, F.col("ple"))), F.lit(-1)).alias("max_ple"),
            (F.max("last") + 1).alias("log_end"),
            F.sum((~ctrl).cast("long")).alias("data_n"),
            F.sum((ctrl & F.col("marker").isin(*MARKERS)).cast("long")).alias("marker_n"),
            F.sum((~ctrl & (F.col("producerId") < 0)).cast("long")).alias("anon_n"),
        )
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    rank = Window.partitionBy(*PART).orderBy(F.desc("max_ple"), F.desc("log_end"), "node")
    refs = (
        summary.select(
            *PART, F.col("node").alias("ref_node"), F.row_number().over(rank).alias("rk")
        )
        .filter("rk = 1")
        .drop("rk")
    )
    base = (
        slim.join(F.broadcast(refs), PART, "left")
        .withColumn("is_ref", F.col("node") == F.col("ref_node"))
        .drop("ref_node")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    ev = Evidence(spark, df, base, summary)
    ev._persisted += [base, summary]
    ev._cache["shuffle_partitions"] = before
    return ev


def as_evidence(x: Evidence | DataFrame) -> Evidence:
    return x if isinstance(x, Evidence) else prepare(x)


def _txn_frame(base: DataFrame) -> DataFrame:
    """Producer records (data, and COMMIT/ABORT markers) with the state machine as columns.

    Per replica partition and producer id, in offset order:

    * ``prior``: highest epoch of any earlier record, and the earliest offset holding it;
    * ``seg``: how many markers precede the record, so a transaction is (key, seg) and the
      marker with ``seg = s`` ends transaction ``s``;
    * ``prev_marker``: the previous marker (offset, outcome, epoch);
    * per transaction: ``data_n``, ``data_max`` (highest data epoch), ``at_max`` (earliest
      offset at it), ``first_offset``/``last_offset`` of its data, ``end_marker``;
    * ``prev_data_e``: epoch of the previous data record of the same transaction;
    * ``prev_txn``: the last earlier transaction with data that a marker ended.
    """
    ctrl = F.col("isControl")
    p = base.filter(
        F.col("kind").isin(*TXN_KINDS)
        & (F.col("producerId") >= 0)
        & (~ctrl | F.col("marker").isin(*MARKERS))
    )
    txd = ~ctrl & F.col("isTransactional")
    w = Window.partitionBy(*KEY).orderBy(*_ORDER)
    wprev = w.rowsBetween(Window.unboundedPreceding, -1)
    p = p.select(
        "*",
        F.max(F.struct(F.col("producerEpoch").alias("e"), (-F.col("offset")).alias("no")))
        .over(wprev)
        .alias("prior"),
        F.coalesce(F.sum(ctrl.cast("int")).over(wprev), F.lit(0)).alias("seg"),
        F.last(
            F.when(
                ctrl,
                F.struct(
                    F.col("offset").alias("o"),
                    F.col("marker").alias("m"),
                    F.col("producerEpoch").alias("e"),
                ),
            ),
            ignorenulls=True,
        )
        .over(wprev)
        .alias("prev_marker"),
    )
    ws = Window.partitionBy(*KEY, "seg")
    wso = ws.orderBy(*_ORDER).rowsBetween(Window.unboundedPreceding, -1)
    p = p.select(
        "*",
        F.max(F.when(txd, F.col("producerEpoch"))).over(ws).alias("data_max"),
        F.sum(txd.cast("int")).over(ws).alias("data_n"),
        F.min(F.when(txd, F.col("offset"))).over(ws).alias("first_offset"),
        F.max(F.when(txd, F.col("offset"))).over(ws).alias("last_offset"),
        F.max(
            F.when(txd, F.struct(F.col("producerEpoch").alias("e"), (-F.col("offset")).alias("no")))
        )
        .over(ws)
        .alias("at_max"),
        F.max(F.when(ctrl, F.col("marker"))).over(ws).alias("end_marker"),
        F.last(F.when(txd, F.col("producerEpoch")), ignorenulls=True)
        .over(wso)
        .alias("prev_data_e"),
    )
    ended_txn = F.when(
        ctrl & (F.col("data_n") > 0),
        F.struct(
            F.col("first_offset").alias("f"),
            F.col("offset").alias("m"),
            F.col("data_max").alias("e"),
        ),
    )
    p = p.select("*", F.last(ended_txn, ignorenulls=True).over(wprev).alias("prev_txn"))
    p = p.withColumn(
        "regression", F.coalesce(F.col("producerEpoch") < F.col("prior.e"), F.lit(False))
    )
    return p.drop("fp", "ple", "last", "_row")


def rows_to_dicts(rows: list[Any]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        d = r.asDict(recursive=True)
        out.append({k: v for k, v in d.items() if v is not None})
    return out


def _record(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in FIELDS if d.get(k) is not None}


def resolve_records(ev: Evidence, sels: list[Selector]) -> dict[Selector, tuple[list[dict], int]]:
    """The dump records selectors name (:func:`checkers.logdump.rules.position_selectors`,
    :func:`checkers.logs.rules.selectors`), fetched in one Spark job."""
    uniq = sorted(set(sels), key=repr)
    if not uniq:
        return {}
    rows = []
    for i, s in enumerate(uniq):
        if s[0] == "at":
            rows.append((i, s[1], s[2], s[3], s[4], None, s[5], s[5], False))
        else:
            rows.append((i, s[1], s[2], s[3], s[4], s[5], s[6], s[7], True))
    sdf = ev.spark.createDataFrame(
        rows,
        "sel int, s_node int, s_kind string, s_topic string, s_partition int, s_pid long, "
        "lo long, hi long, is_range boolean",
    )
    full = ev.full
    cond = (
        (full["node"] == sdf["s_node"])
        & (full["kind"] == sdf["s_kind"])
        & (full["topic"] == sdf["s_topic"])
        & (full["partition"] == sdf["s_partition"])
        & full["offset"].between(sdf["lo"], sdf["hi"])
        & (~sdf["is_range"] | ((full["producerId"] == sdf["s_pid"]) & ~full["isControl"]))
    )
    j = full.join(F.broadcast(sdf), cond)
    w = Window.partitionBy("sel").orderBy(*_ORDER)
    wd = Window.partitionBy("sel").orderBy(F.desc("offset"), F.desc("_row"))
    j = j.select(
        "*",
        F.row_number().over(w).alias("rn"),
        F.row_number().over(wd).alias("rd"),
        F.count(F.lit(1)).over(Window.partitionBy("sel")).alias("total"),
    ).filter(
        (F.col("rn") == 1)
        | (F.col("is_range") & ((F.col("rn") <= MAX_TXN_RECORDS) | (F.col("rd") == 1)))
    )
    got: dict[int, list[tuple[int, dict[str, Any]]]] = {i: [] for i in range(len(uniq))}
    totals: dict[int, int] = {}
    for r in j.collect():
        d = r.asDict(recursive=True)
        got[d["sel"]].append((d["rn"], _record(d)))
        totals[d["sel"]] = d["total"]
    out: dict[Selector, tuple[list[dict], int]] = {}
    for i, s in enumerate(uniq):
        recs = [rec for _, rec in sorted(got[i], key=lambda t: t[0])]
        omitted = 0
        if s[0] == "range" and totals.get(i, 0) > MAX_TXN_RECORDS + 1:
            omitted = totals[i] - MAX_TXN_RECORDS - 1
        out[s] = (recs, omitted)
    return out


def log_positions(data: Evidence | DataFrame, topic: str, *, kind: str = "data") -> DataFrame:
    """Every data record of ``topic`` on its partition's reference replica, placed among its
    producer's transactions: the columns of :class:`checkers.logs.rules.Pos` plus ``topic``,
    ``partition``, ``offset`` (markers as structs ``o``, ``m``, ``e``).

    The Spark form of :func:`checkers.logs.pyref.log_positions` (same rules as
    :func:`aborted_in_log`), for the eos checks to join with the drained records.
    """
    ev = as_evidence(data)
    ctrl = F.col("isControl")
    t = ev.txn().filter(F.col("is_ref") & (F.col("kind") == kind) & (F.col("topic") == topic))
    marker = F.struct(
        F.col("offset").alias("o"), F.col("marker").alias("m"), F.col("producerEpoch").alias("e")
    )
    ended_by = F.max(F.when(ctrl, marker)).over(Window.partitionBy(*KEY, "seg"))
    t = t.select("*", ended_by.alias("end"))
    txd = F.col("isTransactional")
    outcome = (
        F.when(~txd, F.lit("committed"))
        .when(F.col("end.m") == "COMMIT", F.lit("committed"))
        .when(F.col("end.m") == "ABORT", F.lit("aborted"))
        .otherwise(F.lit("open"))
    )
    producers = t.filter(~ctrl).select(
        "topic",
        "partition",
        "offset",
        "node",
        "producerId",
        F.col("producerEpoch").alias("epoch"),
        txd.alias("transactional"),
        outcome.alias("outcome"),
        F.when(txd, F.col("first_offset")).alias("first_offset"),
        F.when(txd, F.col("prev_marker")).alias("prior_marker"),
        F.when(txd, F.col("end")).alias("end_marker"),
    )
    anonymous = ev.base.filter(
        F.col("is_ref")
        & (F.col("kind") == kind)
        & (F.col("topic") == topic)
        & ~ctrl
        & (F.col("producerId") < 0)
    ).select(
        "topic",
        "partition",
        "offset",
        "node",
        "producerId",
        F.col("producerEpoch").alias("epoch"),
        txd.alias("transactional"),
        F.lit("committed").alias("outcome"),
        F.lit(None).cast("long").alias("first_offset"),
        F.lit(None).cast(producers.schema["prior_marker"].dataType).alias("prior_marker"),
        F.lit(None).cast(producers.schema["end_marker"].dataType).alias("end_marker"),
    )
    return producers.unionByName(anonymous)


def pos_of(row: Any) -> Pos:
    """A :func:`log_positions` row as the :class:`checkers.logs.rules.Pos` both engines share."""

    def m(s: Any) -> Marker | None:
        return None if s is None else (int(s["o"]), str(s["m"]), int(s["e"]))

    first = row["first_offset"]
    return Pos(
        int(row["node"]),
        int(row["producerId"]),
        int(row["epoch"]),
        bool(row["transactional"]),
        str(row["outcome"]),
        None if first is None else int(first),
        m(row["prior_marker"]),
        m(row["end_marker"]),
    )


class PositionLog:
    """The run's prepared dump, its positions per topic, and evidence for a few positions."""

    def __init__(self, ev: Evidence) -> None:
        self.ev = ev
        self._positions: dict[str, DataFrame] = {}
        self._lock = threading.Lock()

    def positions(self, topic: str) -> DataFrame:
        """:func:`checkers.logs.checks.log_positions` of ``topic``, persisted for the run."""

        with self._lock:
            if topic not in self._positions:
                df = log_positions(self.ev, topic).persist(StorageLevel.MEMORY_AND_DISK)
                self.ev._persisted.append(df)
                self._positions[topic] = df
            return self._positions[topic]

    def marker_times(self, topic: str) -> DataFrame:
        """(node, partition, offset, create_time) of every marker of ``topic``: when the
        broker wrote it, for the checks that compare it with the history's clock."""
        full = self.ev.full
        return full.filter(
            (F.col("kind") == "data") & (F.col("topic") == topic) & F.col("isControl")
        ).select("node", "partition", "offset", "create_time")

    def evidence(self, where: list[Where]) -> dict[Where, dict[str, Any]]:
        """The ``log`` evidence of each position the dump holds (absent ones are left out)."""

        found: dict[Where, Pos] = {}
        for topic in sorted({w[0] for w in where}):
            want = sorted({(p, o) for t, p, o in where if t == topic})
            if not want:
                continue
            keys = self.ev.spark.createDataFrame(want, "partition int, offset long")
            hits = self.positions(topic).join(F.broadcast(keys), ["partition", "offset"])
            for r in hits.collect():
                found[(topic, int(r["partition"]), int(r["offset"]))] = pos_of(r)
        sels = [s for w, p in found.items() for s in position_selectors(*w, p)]
        resolved = resolve_records(self.ev, sels)
        return {w: position_evidence(*w, p, resolved) for w, p in found.items()}

    def release(self) -> None:
        self.ev.release()
        self._positions.clear()
