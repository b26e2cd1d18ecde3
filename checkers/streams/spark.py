"""The streams checks on Spark: the same rules as :mod:`checkers.streams.pyref`, as joins and
windows over the facts, so a history too big for one Python process is judged the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.streams import results as R
from checkers.streams.facts import StreamsFacts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_WRITTEN = (
    "kind string, topic string, p long, off long, key string, value string, "
    "sp long, so long, sv string"
)


def _aggregate(column: str) -> tuple[Any, Any]:
    """The count and sum of a ``count,sum`` text column (``parse_aggregate``), null both for
    anything else."""
    from pyspark.sql import functions as F

    parts = F.split(column, ",")
    ok = (F.size(parts) == 2) & parts[0].rlike("^-?[0-9]+$") & parts[1].rlike("^-?[0-9]+$")
    return F.when(ok, parts[0].cast("long")), F.when(ok, parts[1].cast("long"))


def _frames(spark: SparkSession, facts: StreamsFacts) -> dict[str, DataFrame]:
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    o = facts.options
    inputs = spark.createDataFrame(facts.inputs, "p long, o long, v string")
    n = F.substring("v", 2, 6).cast("long")
    inputs = inputs.withColumn("n", n).withColumn(
        "key",
        F.concat(
            F.lit("p"),
            F.col("p").cast("string"),
            F.lit("-g"),
            (F.floor(F.col("n") / 7) % F.lit(facts.groups)).cast("string"),
        ),
    )
    upto = Window.partitionBy("key").orderBy("o", "p").rowsBetween(Window.unboundedPreceding, 0)
    prefix = inputs.select(
        "p",
        "o",
        "v",
        "key",
        F.count(F.lit(1)).over(upto).alias("want_c"),
        F.sum("n").over(upto).alias("want_s"),
    )
    rows = [("output", o["output_topic"], *r) for r in facts.outputs] + [
        ("aggregate", o["aggregate_topic"], *r) for r in facts.aggregates
    ]
    written = spark.createDataFrame(rows, _WRITTEN)
    got_c, got_s = _aggregate("value")
    written = written.withColumn("got_c", got_c).withColumn("got_s", got_s)
    joined = written.join(
        prefix.withColumnRenamed("key", "want_key"),
        (written.sp == prefix.p) & (written.so == prefix.o),
        "left",
    ).select(written["*"], "v", "want_key", "want_c", "want_s")
    known = F.col("v").isNotNull() & F.col("sv").isNotNull() & (F.col("v") == F.col("sv"))
    return {
        "inputs": inputs,
        "prefix": prefix,
        "joined": joined.withColumn("known", F.coalesce(known, F.lit(False))).cache(),
    }


def _rec(r: Any) -> R.Record:
    return R.record(r["topic"], r["p"], r["off"], r["key"], r["value"])


def judge(
    spark: SparkSession, facts: StreamsFacts, max_examples: int
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    o = facts.options
    fr = _frames(spark, facts)
    joined = fr["joined"]
    counts: dict[str, int] = {}
    examples: dict[str, list[dict[str, Any]]] = {}

    def put(name: str, n: int, found: list[dict[str, Any]]) -> None:
        if n:
            counts[name] = n
            examples[name] = found

    bad = joined.where(~F.col("known"))
    put(
        "aborted-read",
        bad.count(),
        [
            R.aborted_read(r["sv"], r["topic"], _rec(r))
            for r in bad.orderBy("topic", "p", "off").limit(max_examples).collect()
        ],
    )
    good = joined.where(F.col("known"))
    same = (F.col("got_c") == F.col("want_c")) & (F.col("got_s") == F.col("want_s"))
    wrong = good.where((F.col("kind") == "aggregate") & ~F.coalesce(same, F.lit(False)))
    put(
        "wrong-aggregate",
        wrong.count(),
        [
            R.wrong_aggregate(
                r["v"],
                r["want_key"],
                r["sp"],
                r["so"],
                None if r["got_c"] is None else (r["got_c"], r["got_s"]),
                (r["want_c"], r["want_s"]),
                _rec(r),
            )
            for r in wrong.orderBy("sp", "so", "p", "off").limit(max_examples).collect()
        ],
    )
    recs = F.collect_list(F.struct("topic", "p", "off", "key", "value")).alias("recs")
    dups = (
        good.groupBy("kind", "topic", "sp", "so", "v")
        .agg(F.count(F.lit(1)).alias("copies"), recs)
        .where(F.col("copies") > 1)
    )
    extra = dups.agg(F.sum(F.col("copies") - 1)).first()[0] or 0
    put(
        "duplicate",
        int(extra),
        [
            R.duplicate(r["v"], r["sp"], r["so"], r["topic"], [_rec(x) for x in r["recs"]])
            for r in dups.orderBy("topic", "sp", "so").limit(max_examples).collect()
        ],
    )
    committed = spark.createDataFrame(
        sorted(facts.committed.items()) or [(-1, -1)], "cp long, upto long"
    )
    kinds = spark.createDataFrame(
        [("output", o["output_topic"]), ("aggregate", o["aggregate_topic"])],
        "kind string, topic string",
    )
    seen = good.select(F.col("kind").alias("k2"), F.col("sp"), F.col("so")).distinct()
    lost = (
        fr["prefix"]
        .join(committed, F.col("p") == F.col("cp"))
        .where(F.col("o") < F.col("upto"))
        .crossJoin(kinds)
        .join(
            seen,
            (F.col("kind") == F.col("k2"))
            & (F.col("p") == F.col("sp"))
            & (F.col("o") == F.col("so")),
            "left_anti",
        )
    )
    put(
        "lost",
        lost.count(),
        [
            R.lost(r["v"], r["p"], r["o"], r["topic"], r["upto"])
            for r in lost.orderBy("p", "o", "topic").limit(max_examples).collect()
        ],
    )
    if facts.drained:
        totals = (
            fr["inputs"]
            .groupBy("key")
            .agg(F.count(F.lit(1)).alias("want_c"), F.sum("n").alias("want_s"))
        )
        changelog = spark.createDataFrame(
            [(o["changelog_topic"], *r) for r in facts.changelog],
            "topic string, p long, off long, key string, value string",
        )
        aggregates = joined.where(F.col("kind") == "aggregate").select(
            "topic", "p", "off", "key", "value"
        )
        got_c, got_s = _aggregate("value")
        latest = Window.partitionBy("key").orderBy(F.col("p").desc(), F.col("off").desc())
        for name, rows in (
            ("wrong-final-aggregate", aggregates),
            ("changelog-mismatch", changelog),
        ):
            last = (
                rows.where(F.col("key").isNotNull())
                .withColumn("rank", F.row_number().over(latest))
                .where(F.col("rank") == 1)
            )
            last = last.select(
                "topic",
                "p",
                "off",
                "value",
                F.col("key").alias("lkey"),
                got_c.alias("got_c"),
                got_s.alias("got_s"),
            )
            cmp = totals.join(last, totals.key == last.lkey, "left")
            same = (F.col("got_c") == F.col("want_c")) & (F.col("got_s") == F.col("want_s"))
            off = cmp.where(~F.coalesce(same, F.lit(False)))
            put(
                name,
                off.count(),
                [
                    R.wrong_last(
                        name,
                        r["key"],
                        None if r["got_c"] is None else (r["got_c"], r["got_s"]),
                        (r["want_c"], r["want_s"]),
                        None
                        if r["lkey"] is None
                        else R.record(r["topic"], r["p"], r["off"], r["key"], r["value"]),
                    )
                    for r in off.orderBy("key").limit(max_examples).collect()
                ],
            )
    if facts.incomplete:
        put("progress", len(facts.incomplete), [R.progress(list(facts.incomplete))])
    joined.unpersist()
    return counts, examples
