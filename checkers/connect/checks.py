"""The ``connect`` checker in Spark: Kafka Connect exactly-once source anomalies (KIP-618).

Why Spark: a long run commits millions of records; every rule here is an aggregation or a
window over the committed records, so it scales past one machine's memory.
:mod:`checkers.connect.pyref` is the same set of definitions in plain Python, and the tests
require whole results (examples included) to be equal. Definitions: ``docs/anomalies.md``,
"connect workload". The history is taken apart by :mod:`checkers.connect.extract` (validation,
the final ops, the records' JSON decoded, the task journals' confirmed ranges) into Parquet
beside the run (``.parquet/connect``, reused while the history is unchanged); every rule runs
on that here; :mod:`checkers.connect.run` runs it on a run directory.

Public API::

    judge(spark, input, plan, dump, max_examples) -> (counts, examples, stats)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from checkers.connect import results as X
from checkers.connect.extract import ConnectMeta, spark_schema
from checkers.connect.views import ConnectInput, Plan
from checkers.spark import restore_conf, set_conf

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row, SparkSession

    from checkers.logdump.evidence import PositionLog

__all__ = ["judge"]

#: The largest seqno a long holds: the open end of the range above a task's highest one.
_MAX_SEQNO: Final = 2**63 - 1

#: Session settings for a run of fewer committed records than :data:`SMALL_RUN`: per-query
#: overhead dominates there, and adaptive planning and code generation cost more than they
#: save (as in :mod:`checkers.eos.checks`).
SMALL_RUN: Final = 200_000
_TUNE_SMALL: Final = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.shuffle.partitions": "2",
}
_TUNE_BIG: Final = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
}


# ------------------------------------------------------------------------------------------
# The rules
#
# Each rule is a DataFrame of its cases with a ``w`` column (what the case adds to the count);
# every count, and the stats, come from one job over their union (a short run's checks are
# dominated by per-job overhead), and only the types found are asked for examples.


class _Judge:
    """Every rule over one run's committed records (``data``), offsets records and, when the
    history has task journals, the seqno ranges Connect confirmed (``confirmed``, else None)."""

    def __init__(
        self,
        spark: SparkSession,
        meta: ConnectMeta,
        data: DataFrame,
        offs: DataFrame,
        confirmed: DataFrame | None,
        k: int,
    ) -> None:
        from pyspark.sql import functions as F

        self.spark, self.meta, self.data, self.offs, self.k = spark, meta, data, offs, k
        self.confirmed = confirmed
        self.good = data.filter(F.col("bad").isNull())
        self._tasks: DataFrame | None = None

    def rec(self, r: Row | dict[str, Any]) -> dict[str, Any]:
        return X.record(self.meta.data_topic, r["partition"], r["offset"], r["key"], r["value"])

    def _keys(self, keys: list[tuple[int, int]]) -> DataFrame:
        return self.spark.createDataFrame(sorted(set(keys)), "task long, seqno long")

    def first_copies(self, keys: list[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
        """The first copy (by partition, offset) of each of a few (task, seqno)."""
        from pyspark.sql import functions as F

        if not keys:
            return {}
        first = F.min(F.struct("partition", "offset", "key", "value")).alias("r")
        rows = (
            self.good.join(F.broadcast(self._keys(keys)), ["task", "seqno"])
            .groupBy("task", "seqno")
            .agg(first)
            .collect()
        )
        return {(r["task"], r["seqno"]): self.rec(r["r"]) for r in rows}

    def _top(self, df: DataFrame, *order: str | Column) -> list[Row]:
        return df.orderBy(*order).limit(self.k).collect() if self.k else []

    def max_seqnos(self, tasks: list[int]) -> dict[int, int]:
        """The highest committed seqno of each of a few tasks (absent: no records)."""
        from pyspark.sql import functions as F

        if not tasks:
            return {}
        rows = (
            self.good.filter(F.col("task").isin(tasks))
            .groupBy("task")
            .agg(F.max("seqno").alias("m"))
            .collect()
        )
        return {r["task"]: r["m"] for r in rows}

    # -- cases ---------------------------------------------------------------------------

    def duplicate(self) -> DataFrame:
        """(task, seqno) with more than one copy; ``w``: the copies beyond the first."""
        from pyspark.sql import functions as F

        g = self.good.groupBy("task", "seqno").agg(F.count(F.lit(1)).alias("copies"))
        return g.filter(F.col("copies") > 1).withColumn("w", F.col("copies") - 1)

    def lost(self) -> DataFrame:
        """Runs of missing seqnos ``first..last``: the gaps between a task's consecutive
        distinct seqnos, and below its lowest one; ``w``: the run's length."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        d = self.good.select("task", "seqno").distinct()
        w = Window.partitionBy("task").orderBy("seqno")
        runs = d.select(
            "task",
            (F.coalesce(F.lag("seqno").over(w), F.lit(-1)) + 1).alias("first"),
            (F.col("seqno") - 1).alias("last"),
        ).filter(F.col("first") <= F.col("last"))
        return runs.withColumn("w", F.col("last") - F.col("first") + 1)

    def _merged(self) -> DataFrame:
        """Each task's confirmed ranges merged where they overlap or touch (``first``,
        ``last``): a range starts a new one when it begins past the reach of those before."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        assert self.confirmed is not None
        w = Window.partitionBy("task").orderBy("first", "last")
        reach = F.max("last").over(w.rowsBetween(Window.unboundedPreceding, -1))
        starts = F.when(reach.isNull() | (F.col("first") - 1 > reach), 1).otherwise(0)
        c = self.confirmed.select("task", "first", "last", starts.alias("s"))
        upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        c = c.select("*", F.sum("s").over(upto).alias("g"))
        span = (F.min("first").alias("first"), F.max("last").alias("last"))
        return c.groupBy("task", "g").agg(*span)

    def _holes(self) -> DataFrame:
        """Per task, the ranges of seqnos with no copy (``first``, ``last``): ``lost``'s gaps,
        the open range above its highest seqno, and everything for a task with none."""
        from pyspark.sql import functions as F

        assert self.confirmed is not None
        top = F.lit(_MAX_SEQNO).cast("long").alias("last")
        maxs = self.good.groupBy("task").agg(F.max("seqno").alias("m"))
        above = maxs.filter(F.col("m") < _MAX_SEQNO).select(
            "task", (F.col("m") + 1).alias("first"), top
        )
        none = (
            self.confirmed.select("task")
            .distinct()
            .join(maxs, ["task"], "left_anti")
            .select("task", F.lit(0).cast("long").alias("first"), top)
        )
        return self.lost().select("task", "first", "last").unionByName(above).unionByName(none)

    def acknowledged(self) -> DataFrame:
        """Runs ``first..last`` of confirmed seqnos with no copy: the merged ranges meet the
        holes. Two runs never touch (merged ranges do not, holes are apart by a committed
        seqno), so each is maximal. ``w``: the run's length."""
        from pyspark.sql import functions as F

        m, h = self._merged().alias("m"), self._holes().alias("h")
        on = (
            (F.col("m.task") == F.col("h.task"))
            & (F.col("m.first") <= F.col("h.last"))
            & (F.col("h.first") <= F.col("m.last"))
        )
        runs = m.join(h, on).select(
            F.col("m.task").alias("task"),
            F.greatest("m.first", "h.first").alias("first"),
            F.least("m.last", "h.last").alias("last"),
        )
        return runs.withColumn("w", F.col("last") - F.col("first") + 1)

    def order(self) -> DataFrame:
        """A task's record not above its previous one in the partition (``prev``)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        w = Window.partitionBy("partition", "task").orderBy("offset")
        prev = F.lag(F.struct("partition", "offset", "key", "value", "seqno")).over(w)
        return self.good.select("*", prev.alias("prev"), F.lit(1).alias("w")).filter(
            F.col("prev").isNotNull() & (F.col("seqno") <= F.col("prev.seqno"))
        )

    def zombie(self) -> DataFrame:
        """A record whose writer is not the one that started last before it (``latest``: that
        writer's first record; a writer starts at its first record of the task in the
        partition), and that is not its own writer's first record."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        first = F.min("offset").over(Window.partitionBy("partition", "task", "writer"))
        z = self.good.select("*", first.alias("f"))
        is_first = F.col("offset") == F.col("f")
        upto = (
            Window.partitionBy("partition", "task")
            .orderBy("offset")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        latest = F.max(F.when(is_first, F.struct("partition", "offset", "writer", "key", "value")))
        z = z.select("*", latest.over(upto).alias("latest"), F.lit(1).alias("w"))
        return z.filter(~is_first & (F.col("latest.offset") > F.col("f")))

    def tasks(self) -> DataFrame:
        """Per task: its committed source offset (``last``, a struct: the record with the
        highest partition, offset among this connector's records of the task that hold a
        seqno) and its highest committed seqno (``max_seqno``)."""
        from pyspark.sql import functions as F

        if self._tasks is None:
            last = (
                self.offs.filter(F.col("seqno").isNotNull())
                .groupBy("task")
                .agg(F.max(F.struct("partition", "offset", "key", "value", "seqno")).alias("last"))
            )
            maxs = self.good.groupBy("task").agg(F.max("seqno").alias("max_seqno"))
            self._tasks = last.join(maxs, ["task"], "full")
        return self._tasks

    def offsets_case(self, name: str) -> DataFrame:
        from pyspark.sql import functions as F

        so, top = F.col("last.seqno"), F.col("max_seqno")
        if name == "offset-ahead":
            cond = F.col("last").isNotNull() & (top.isNull() | (so > top))
        else:
            cond = top.isNotNull() & (F.col("last").isNull() | (top > so))
        return self.tasks().filter(cond).withColumn("w", F.lit(1))

    def malformed(self) -> DataFrame:
        from pyspark.sql import functions as F

        return self.data.filter(F.col("bad").isNotNull()).withColumn("w", F.lit(1))

    def aborted(self, log: PositionLog) -> DataFrame:
        """Committed records (malformed ones too) whose place in the broker log (on the
        partition's reference replica) is inside a transaction an ABORT marker ended."""
        from pyspark.sql import functions as F

        aborted = (
            log.positions(self.meta.data_topic)
            .filter(F.col("outcome") == "aborted")
            .select("partition", "offset")
        )
        return self.data.join(aborted, ["partition", "offset"]).withColumn("w", F.lit(1))

    # -- examples ------------------------------------------------------------------------

    def duplicate_examples(self, cases: DataFrame) -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        top = [(r["task"], r["seqno"]) for r in self._top(cases, "task", "seqno")]
        copies: dict[tuple[int, int], list[dict[str, Any]]] = {t: [] for t in top}
        if top:
            for r in self.good.join(F.broadcast(self._keys(top)), ["task", "seqno"]).collect():
                copies[(r["task"], r["seqno"])].append(self.rec(r))
        return [X.duplicate(t, s, copies[(t, s)]) for t, s in top]

    def lost_examples(self, cases: DataFrame) -> list[dict[str, Any]]:
        top = self._top(cases, "task", "first")
        maxs = self.max_seqnos(sorted({r["task"] for r in top}))
        want = [(r["task"], r["first"] - 1) for r in top if r["first"] > 0]
        want += [(r["task"], r["last"] + 1) for r in top]
        firsts = self.first_copies(want)
        return [
            X.lost(
                r["task"],
                r["first"],
                r["last"],
                maxs[r["task"]],
                firsts.get((r["task"], r["first"] - 1)) if r["first"] > 0 else None,
                firsts.get((r["task"], r["last"] + 1)),
            )
            for r in top
        ]

    def claimants(self, keys: list[tuple[int, int]]) -> dict[tuple[int, int], tuple[str, int]]:
        """``(writer, ms)`` of the earliest (by history index) committed op confirming each
        of a few (task, seqno)."""
        from pyspark.sql import functions as F

        assert self.confirmed is not None
        if not keys:
            return {}
        first = F.min(F.struct("op", "writer", "ms")).alias("c")
        inside = F.col("seqno").between(F.col("first"), F.col("last"))
        rows = (
            self.confirmed.join(F.broadcast(self._keys(keys)), ["task"])
            .filter(inside)
            .groupBy("task", "seqno")
            .agg(first)
            .collect()
        )
        return {(r["task"], r["seqno"]): (r["c"]["writer"], r["c"]["ms"]) for r in rows}

    def acknowledged_examples(self, cases: DataFrame) -> list[dict[str, Any]]:
        top = self._top(cases, "task", "first")
        maxs = self.max_seqnos(sorted({r["task"] for r in top}))
        who = self.claimants([(r["task"], r["first"]) for r in top])
        return [
            X.acknowledged_lost(
                r["task"], r["first"], r["last"], *who[(r["task"], r["first"])],
                maxs.get(r["task"]),
            )
            for r in top
        ]  # fmt: skip

    def order_examples(self, cases: DataFrame) -> list[dict[str, Any]]:
        return [
            X.order(
                r["task"], r["partition"], r["seqno"], r["prev"]["seqno"],
                self.rec(r["prev"]), self.rec(r),
            )
            for r in self._top(cases, "task", "partition", "offset")
        ]  # fmt: skip

    def zombie_examples(self, cases: DataFrame) -> list[dict[str, Any]]:
        return [
            X.zombie(
                r["task"], r["partition"], r["seqno"], r["writer"], r["latest"]["writer"],
                self.rec(r["latest"]), self.rec(r),
            )
            for r in self._top(cases, "task", "partition", "offset")
        ]  # fmt: skip

    def offsets_examples(self, name: str, cases: DataFrame) -> list[dict[str, Any]]:
        top = self._top(cases, "task")
        firsts = self.first_copies(
            [(r["task"], r["max_seqno"]) for r in top if r["max_seqno"] is not None]
        )
        made = []
        for r in top:
            last, m = r["last"], r["max_seqno"]
            orec = None
            if last is not None:
                orec = X.record(
                    self.meta.offsets_topic,
                    last["partition"],
                    last["offset"],
                    last["key"],
                    last["value"],
                )
            made.append(
                X.offset_case(
                    name,
                    r["task"],
                    None if last is None else last["seqno"],
                    m,
                    orec,
                    None if m is None else firsts.get((r["task"], m)),
                )
            )
        return made

    def malformed_examples(self, cases: DataFrame) -> list[dict[str, Any]]:
        return [X.malformed(r["bad"], self.rec(r)) for r in self._top(cases, "partition", "offset")]

    def aborted_examples(self, cases: DataFrame, log: PositionLog) -> list[dict[str, Any]]:
        topic = self.meta.data_topic
        top = self._top(cases, "partition", "offset")
        ev = log.evidence([(topic, r["partition"], r["offset"]) for r in top])
        return [
            X.aborted_read(
                r["task"], r["seqno"], self.rec(r), ev.get((topic, r["partition"], r["offset"]))
            )
            for r in top
        ]

    # -- all of it -----------------------------------------------------------------------

    def run(
        self, log: PositionLog | None
    ) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]], dict[str, Any]]:
        """Counts and stats in one job, then the examples of the types found."""
        from pyspark.sql import functions as F

        cases: dict[str, DataFrame] = {
            "duplicate": self.duplicate(),
            "lost": self.lost(),
            "order": self.order(),
            "offset-ahead": self.offsets_case("offset-ahead"),
            "offset-behind": self.offsets_case("offset-behind"),
            "zombie-task-write": self.zombie(),
            "malformed-record": self.malformed(),
        }
        if self.confirmed is not None:
            cases["acknowledged-lost"] = self.acknowledged()
        if log is not None:
            cases["aborted-read"] = self.aborted(log)
        one = F.lit(1).cast("long").alias("w")
        parts = [
            df.select(F.lit(name).alias("type"), F.col("w").cast("long").alias("w"))
            for name, df in cases.items()
        ]
        parts += [
            self.data.select(F.lit("#records").alias("type"), one),
            self.offs.select(F.lit("#offsets").alias("type"), one),
            self.offs.filter(F.col("unreadable")).select(F.lit("#unreadable").alias("type"), one),
            self.tasks().select(F.lit("#tasks").alias("type"), one),
        ]
        union = parts[0]
        for df in parts[1:]:
            union = union.unionByName(df)
        totals = union.groupBy("type").agg(F.sum("w").alias("n")).collect()
        got = {r["type"]: int(r["n"]) for r in totals}
        counts = {name: got.get(name, 0) for name in cases}
        examples: dict[str, list[dict[str, Any]]] = {}
        build = {
            "duplicate": self.duplicate_examples,
            "lost": self.lost_examples,
            "acknowledged-lost": self.acknowledged_examples,
            "order": self.order_examples,
            "offset-ahead": lambda c: self.offsets_examples("offset-ahead", c),
            "offset-behind": lambda c: self.offsets_examples("offset-behind", c),
            "zombie-task-write": self.zombie_examples,
            "malformed-record": self.malformed_examples,
            "aborted-read": lambda c: self.aborted_examples(c, log),  # type: ignore[arg-type]
        }
        for name, n in counts.items():
            examples[name] = build[name](cases[name]) if n and self.k else []
        stats = {
            "committed_records": got.get("#records", 0),
            "tasks": got.get("#tasks", 0),
            "offsets_records": got.get("#offsets", 0),
            "offsets_unreadable": got.get("#unreadable", 0),
        }
        return counts, examples, stats


def _tune(spark: SparkSession, rows: int) -> dict[str, str | None]:
    return set_conf(spark, _TUNE_SMALL if rows < SMALL_RUN else _TUNE_BIG)


def _parquet_rows(d: Path) -> int:
    """Rows under a Parquet directory, from the files' footers (sizes the session settings)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in sorted(d.glob("*.parquet")))


def judge(
    spark: SparkSession, got: ConnectInput, p: Plan, dump: Path | None, k: int
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Counts, examples and stats of a run whose final reads are complete."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    assert got.meta is not None and got.parquet is not None
    rows = _parquet_rows(got.parquet / "data")
    saved = _tune(spark, rows)
    data: DataFrame | None = None
    log = None
    try:
        data = spark.read.schema(spark_schema("data")).parquet(str(got.parquet / "data"))
        data = data.filter(F.col("op").isin(sorted(p.data_ops.values())))
        if rows >= SMALL_RUN:  # read by every rule: worth keeping once it is big
            data = data.persist(StorageLevel.MEMORY_AND_DISK)
        offs = (
            spark.read.schema(spark_schema("offsets"))
            .parquet(str(got.parquet / "offsets"))
            .filter(F.col("op") == F.lit(p.offsets_op))
        )
        confirmed = None
        if got.journal_ops:
            confirmed = spark.read.schema(spark_schema("confirmed")).parquet(
                str(got.parquet / "confirmed")
            )
        if dump is not None:
            from checkers.load import load_logdump
            from checkers.logdump.evidence import PositionLog, prepare

            log = PositionLog(prepare(load_logdump(spark, dump.parent.parent).df))
        return _Judge(spark, got.meta, data, offs, confirmed, k).run(log)
    finally:
        if log is not None:
            log.release()
        if data is not None:
            data.unpersist()
        restore_conf(spark, saved)
