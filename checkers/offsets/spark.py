"""The offsets check on Spark: the rule of :mod:`checkers.offsets.pyref` as a join of the
acknowledged commits with the reads, so a history of many groups is judged the same way.

Each ``ok`` read is joined with its key's acknowledgements that completed before it was
invoked and keeps the highest offset; a read below it is a loss of that offset. Per lost
commit, the example's read is the smallest struct led by the read's invoke index and its
commit the smallest led by the acknowledgement's ok index, the same choice the reference's
sweep makes, so both engines show the same ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from checkers.offsets import results as R
from checkers.offsets.facts import OffsetsFacts
from checkers.spark import restore_conf, set_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_ACK: Final = "g string, t string, p long, a long, ai long, ad long"
_READ: Final = "g string, t string, p long, r long, ri long, rd long"
_KEY: Final = ["g", "t", "p"]
#: Below this many facts, a query's planning outweighs its data: no adaptive planning and
#: two shuffle partitions (a run of dozens of groups has a few thousand facts).
SMALL_RUN: Final = 200_000
_TUNE_SMALL: Final = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "2"}


def lost(acks: DataFrame, reads: DataFrame) -> DataFrame:
    """One row per lost commit (``g``, ``t``, ``p``, ``a``) with the first read that shows it
    (``x``: ``ri``, ``rd``, ``r``) and its first acknowledgement (``c``: ``ad``, ``ai``)."""
    from pyspark.sql import functions as F

    behind = (
        reads.join(acks, _KEY)
        .where(F.col("ad") < F.col("ri"))
        .groupBy(*_KEY, "ri", "rd", "r")
        .agg(F.max("a").alias("a"))
        .where(F.coalesce(F.col("r"), F.lit(-1)) < F.col("a"))
    )
    shown = behind.groupBy(*_KEY, "a").agg(F.min(F.struct("ri", "rd", "r")).alias("x"))
    first = acks.groupBy(*_KEY, "a").agg(F.min(F.struct("ad", "ai")).alias("c"))
    return shown.join(first, [*_KEY, "a"])


def _case(row: Any) -> R.Case:
    x, c = row["x"], row["c"]
    return (row["g"], row["t"], row["p"], row["a"], x["r"], c["ai"], c["ad"], x["ri"], x["rd"])


def judge(
    spark: SparkSession, facts: OffsetsFacts, max_examples: int
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    acked = facts.acknowledged()
    small = len(acked) + len(facts.reads) < SMALL_RUN
    saved = set_conf(spark, _TUNE_SMALL) if small else {}
    try:
        acks, reads = spark.createDataFrame(acked, _ACK), spark.createDataFrame(facts.reads, _READ)
        cases = lost(acks, reads).cache()  # counted, then its first rows taken
        try:
            count = cases.count()
            top = cases.orderBy(*_KEY, "a").limit(max_examples).collect() if count else []
        finally:
            cases.unpersist()
    finally:
        restore_conf(spark, saved)
    return R.found([_case(r) for r in top], count)
