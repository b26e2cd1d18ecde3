"""The share checks on Spark: the same rules as :mod:`checkers.share.pyref`, as joins over the
facts, so a history too big for one Python process is judged the same way.

Each rule is a DataFrame of its cases (:func:`cases`); every count comes from one job over
their union, and only the types found are asked for examples (a short run's checks are
dominated by per-job overhead, as in the connect and eos checks). Deliveries carry ``row``,
their place in the facts, so that two equal deliveries (one poll listing a record twice) stay
two, as they do in the reference. Ties in an example's choice (which acknowledgement, which
earlier delivery) are broken by the smallest struct of the columns the reference sorts by, so
both engines pick the same one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from checkers.share import results as R
from checkers.share.facts import ShareFacts
from checkers.share.pyref import POISON
from checkers.spark import restore_conf, set_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_DELIVERY = "row long, p long, o long, v string, c long, m long, pi long, po long"
_ACK = (
    "p long, o long, v string, kind string, m long, ai long, ad long, status string, "
    "error string, dpo long"
)
_COLUMNS: Final = ("row", "p", "o", "v", "c", "m", "pi", "po")
#: Below this many facts, per-query overhead dominates: no adaptive planning, no generated
#: code, two shuffle partitions (the settings the eos and connect checks measured; measured
#: here too, about a third off a test history's judgement in a warm JVM).
SMALL_RUN: Final = 200_000
_TUNE_SMALL: Final = {
    "spark.sql.adaptive.enabled": "false", "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN", "spark.sql.shuffle.partitions": "2",
}  # fmt: skip


def _frames(spark: SparkSession, facts: ShareFacts) -> dict[str, DataFrame]:
    from pyspark.sql import functions as F

    deliveries = spark.createDataFrame([(i, *d) for i, d in enumerate(facts.deliveries)], _DELIVERY)
    acks = spark.createDataFrame(facts.acks, _ACK)
    acks = acks.withColumn("idx", F.coalesce("ad", "ai")).withColumn(
        "taken", (F.col("status") == "ok") & F.col("error").isNull()
    )
    d, k = deliveries.alias("d"), acks.alias("k")
    on = [F.col(f"d.{c}") == F.col(f"k.{c}") for c in ("m", "p", "o")]
    answered = d.join(k, [*on, F.col("d.po") == F.col("k.dpo")]).select(
        "d.*", "k.ai", "k.kind", "k.idx", "k.status", "k.error", "k.taken"
    )
    return {
        "deliveries": deliveries,
        "acks": acks,
        "answered": answered,
        "inputs": spark.createDataFrame(facts.inputs, "v string, p long, o long, op long"),
        "sent": spark.createDataFrame(facts.sent, "v string, kind string, op long"),
        "outputs": spark.createDataFrame(facts.outputs, "p long, o long, k string, v string").where(
            F.col("v").isNotNull()
        ),
        "starts": spark.createDataFrame(sorted(facts.starts.items()), "p long, start long"),
    }


def _seen(r: Any, pre: str = "") -> R.Seen:
    return (r[pre + "po"], r[pre + "m"], r[pre + "p"], r[pre + "o"], r[pre + "c"])


def archived(fr: dict[str, DataFrame], limit: int) -> DataFrame:
    """(p, o) of the records the broker archived (the reference's :func:`archived`)."""
    from pyspark.sql import functions as F

    maybe = F.col("taken") | (F.col("status") != "ok")  # an unknown answer may be taken
    rejected = fr["acks"].where(maybe & (F.col("kind") == "reject")).select("p", "o")
    accepted = fr["answered"].where(F.col("taken") & (F.col("kind") == "accept")).select("row")
    at_limit = fr["deliveries"].where(F.col("c") == limit).join(accepted, "row", "left_anti")
    return rejected.union(at_limit.select("p", "o")).distinct()


def cases(fr: dict[str, DataFrame], facts: ShareFacts) -> dict[str, DataFrame]:
    """Each type's cases, one row a count (``undelivered``'s one for the drain aside)."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    d, limit = fr["deliveries"], facts.limit
    left = (
        fr["inputs"]
        .join(fr["outputs"].select("v"), "v", "left_anti")
        .join(archived(fr, limit), ["p", "o"], "left_anti")
        .join(fr["starts"], "p", "left")
    )
    gone = F.lit(facts.drained) | (F.col("start").isNotNull() & (F.col("o") < F.col("start")))
    # Redelivered: the first taken accept or reject that completed before the poll was
    # invoked, with the count of the delivery it answered (the smallest, for a poll that
    # listed the record twice).
    answered_count = d.groupBy("m", "p", "o", F.col("po").alias("dpo")).agg(F.min("c").alias("ac"))
    taken_final = (
        fr["acks"]
        .where(F.col("taken") & F.col("kind").isin("accept", "reject"))
        .join(answered_count, ["m", "p", "o", "dpo"], "left")
    )
    final = taken_final.select("p", "o", F.struct("ad", "m", "kind", "idx", "dpo", "ac").alias("a"))
    again = d.join(final, ["p", "o"]).where(F.col("a.ad") < F.col("pi"))
    # Acknowledged twice: each later taken accept or reject answering another delivery than
    # the first to complete.
    by_done = Window.partitionBy("p", "o").orderBy("ad", "m", "kind")
    took = F.struct("m", "ac", "kind", "idx", "dpo")
    twice = (
        taken_final.withColumn("rank", F.row_number().over(by_done))
        .withColumn("f", F.first(took).over(by_done))
        .where(F.col("rank") > 1)
        .where(~((F.col("m") == F.col("f.m")) & F.col("dpo").eqNullSafe(F.col("f.dpo"))))
        .select("p", "o", "v", "ad", "m", "kind", took.alias("s"), "f")
    )
    # Concurrent: a higher count handed out after the holder's poll began and before the
    # holder acknowledged, the acknowledgement then taken.
    holder = fr["answered"].where(F.col("taken"))
    holder = holder.select(
        *[F.col(c).alias(f"h{c}") for c in _COLUMNS], F.struct("ai", "kind", "idx").alias("a")
    )
    other = d.select(*[F.col(c).alias(f"x{c}") for c in _COLUMNS])
    pairs = (
        holder.join(other, (F.col("hp") == F.col("xp")) & (F.col("ho") == F.col("xo")))
        .where(F.col("xc") > F.col("hc"))
        .where((F.col("xpo") > F.col("hpi")) & (F.col("xpo") < F.col("a.ai")))
    )
    # Delivery counts: the earlier delivery each bad one is judged against.
    earlier = F.struct(*[F.col(c).alias(f"e{c}") for c in ("po", "m", "c", "row", "p", "o")])
    group = Window.partitionBy("p", "o", "c").orderBy("po", "m", "row")
    repeated = (
        d.withColumn("rank", F.row_number().over(group))
        .withColumn("e", F.first(earlier).over(group))
        .where(F.col("rank") > 1)
        .select(*_COLUMNS, F.lit("repeated").alias("kind"), "e")
    )
    back = (
        d.join(d.select(earlier.alias("e")), (F.col("e.ep") == F.col("p")))
        .where(F.col("e.eo") == F.col("o"))
        .where((F.col("e.epo") < F.col("pi")) & (F.col("e.ec") > F.col("c")))
        .groupBy(*_COLUMNS)
        .agg(F.min("e").alias("e"))
        .select(*_COLUMNS, F.lit("skipped-back").alias("kind"), "e")
    )
    over = d.where(F.col("c") > limit).select(*_COLUMNS, F.lit("over-limit").alias("kind"))
    values = d.select("v").union(fr["outputs"].select("v")).distinct().join(fr["sent"], "v", "left")
    committed = F.lit(facts.isolation == "read_committed")
    aborted = committed & ((F.col("kind") == "aborted") | F.col("v").rlike(POISON.pattern))
    return {
        "lost": left.where(gone),
        "undelivered": left.where(~gone),
        "redelivered-after-ack": again.groupBy(*_COLUMNS).agg(F.min("a").alias("a")),
        "acknowledged-twice": twice,
        "concurrent-acquisition": pairs.groupBy(*holder.columns[:-1], *other.columns).agg(
            F.min("a").alias("a")
        ),
        "delivery-count": over,
        "delivery-count-reset": repeated.unionByName(back),
        "aborted-read": values.where(aborted),
        "unknown-value": values.where(F.col("kind").isNull() & ~F.coalesce(aborted, F.lit(False))),
    }


def judge(
    spark: SparkSession, facts: ShareFacts, max_examples: int
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    from pyspark.sql import functions as F

    size = len(facts.deliveries) + len(facts.acks) + len(facts.inputs) + len(facts.outputs)
    saved = set_conf(spark, _TUNE_SMALL) if size < SMALL_RUN else {}
    try:
        fr = _frames(spark, facts)
        found = cases(fr, facts)
        tally = [df.select(F.lit(name).alias("t")) for name, df in found.items()]
        union = tally[0]
        for df in tally[1:]:
            union = union.union(df)
        tallied = union.groupBy("t").agg(F.count("*").alias("n")).collect()
        counts = {r["t"]: int(r["n"]) for r in tallied}
        if not facts.drained:
            counts["undelivered"] = counts.get("undelivered", 0) + 1
        examples = {
            name: _EXAMPLES[name](fr, found[name], facts, max_examples) if max_examples else []
            for name in counts
        }
    finally:
        restore_conf(spark, saved)
    return counts, examples


def _lost(fr: dict[str, DataFrame], lost: DataFrame, facts: ShareFacts, n: int) -> list[Any]:
    from pyspark.sql import functions as F

    top = lost.orderBy("p", "o").limit(n)
    first = F.min(F.struct("ai", "kind", "status", "error", "idx")).alias("a")
    acked = fr["answered"].groupBy("row").agg(first)
    wanted = fr["deliveries"].join(top.select("p", "o"), ["p", "o"])
    history: dict[tuple[int, int], list[Any]] = {}
    for r in wanted.join(acked, "row", "left").collect():
        a = r["a"]
        how = (None, None, None)
        if a is not None:
            how = (a["kind"], R.outcome(a["status"], a["error"]), a["idx"])
        history.setdefault((r["p"], r["o"]), []).append((_seen(r), *how))
    found = []
    for r in top.collect():
        seen = history.get((r["p"], r["o"]), [])
        found.append(R.lost(r["v"], r["p"], r["o"], r["start"], facts.drained, seen, r["op"]))
    return found


def _undelivered(
    fr: dict[str, DataFrame], stuck: DataFrame, facts: ShareFacts, n: int
) -> list[Any]:
    why = (facts.state_op, facts.state_error, facts.starts, facts.ends)
    found = [] if facts.drained else [R.not_drained(*why)]
    for r in stuck.orderBy("p", "o").limit(n).collect():
        found.append(R.undelivered(r["v"], r["p"], r["o"], r["start"], r["op"]))
    return found[:n]


def _redelivered(
    fr: dict[str, DataFrame], again: DataFrame, facts: ShareFacts, n: int
) -> list[Any]:
    found = []
    for r in again.orderBy("p", "o", "po", "m", "c").limit(n).collect():
        a = r["a"]
        ack = (a["m"], a["ac"], a["kind"], a["idx"], a["dpo"])
        found.append(R.redelivered(r["v"], r["p"], r["o"], ack, _seen(r)))
    return found


def _twice(fr: dict[str, DataFrame], twice: DataFrame, facts: ShareFacts, n: int) -> list[Any]:
    def took(a: Any) -> R.Taken:
        return (a["m"], a["ac"], a["kind"], a["idx"], a["dpo"])

    return [
        R.twice(r["v"], r["p"], r["o"], took(r["f"]), took(r["s"]))
        for r in twice.orderBy("p", "o", "ad", "m", "kind").limit(n).collect()
    ]


def _concurrent(fr: dict[str, DataFrame], pairs: DataFrame, facts: ShareFacts, n: int) -> list[Any]:
    order = ("hp", "ho", "hpo", "hm", "hc", "xpo", "xm", "xc")
    return [
        R.concurrent(r["hv"], _seen(r, "h"), (r["a"]["kind"], r["a"]["idx"]), _seen(r, "x"))
        for r in pairs.orderBy(*order).limit(n).collect()
    ]


def _delivery_count(
    fr: dict[str, DataFrame], bad: DataFrame, facts: ShareFacts, n: int
) -> list[Any]:
    found = []
    for r in bad.orderBy("p", "o", "po", "m", "c", "kind").limit(n).collect():
        x = r.asDict().get("e")  # the earlier delivery (none for over-limit)
        pair = (_seen(r),)
        if x is not None:
            pair = ((x["epo"], x["em"], x["ep"], x["eo"], x["ec"]), _seen(r))
        found.append(R.delivery_count(r["v"], r["kind"], facts.limit, *pair))
    return found


def _values(name: str) -> Any:
    def build(fr: dict[str, DataFrame], bad: DataFrame, facts: ShareFacts, n: int) -> list[Any]:
        from pyspark.sql import functions as F

        top = bad.orderBy("v").limit(n).collect()
        wanted = [r["v"] for r in top]
        seen: dict[str, list[R.Seen]] = {}
        for r in fr["deliveries"].where(F.col("v").isin(wanted)).collect():
            seen.setdefault(r["v"], []).append(_seen(r))
        written: dict[str, list[Any]] = {}
        for r in fr["outputs"].where(F.col("v").isin(wanted)).collect():
            written.setdefault(r["v"], []).append((r["p"], r["o"], r["k"]))
        topic = facts.options["output_topic"]
        return [
            R.bad_value(name, v, seen.get(v, []), written.get(v, []), topic, r["op"])
            for v, r in zip(wanted, top, strict=True)
        ]

    return build


#: How each type's examples are built from its cases (only for the types found).
_EXAMPLES: Final = {
    "lost": _lost,
    "undelivered": _undelivered,
    "redelivered-after-ack": _redelivered,
    "acknowledged-twice": _twice,
    "concurrent-acquisition": _concurrent,
    "delivery-count": _delivery_count,
    "delivery-count-reset": _delivery_count,
    "aborted-read": _values("aborted-read"),
    "unknown-value": _values("unknown-value"),
}
