"""The Spark engine of ``started-below-committed``: where each processor started a partition
it was given, against what the group had committed before (:mod:`checkers.eos.assignments`
has the definition, the reference and the examples both engines build)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.eos import assignments as A
from checkers.eos.frames import EosFrames
from checkers.eos.rules import result


def check_started_below(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Assignments whose first read started below the offset the group had committed before
    them (:mod:`checkers.eos.assignments`). Cases are at most one per assignment callback and
    partition, so they are collected whole; only their few facts beyond the first read are
    looked up in the transactions again."""
    assigns = (
        fr.rebalances.filter(F.col("event") == "assign")
        .select(
            "instance",
            F.col("index").alias("a_index"),
            "generation",
            F.explode("partitions").alias("p"),
        )
        .withColumn(
            "next_a", F.lead("a_index").over(Window.partitionBy("instance", "p").orderBy("a_index"))
        )
    )
    reads = _reads(fr)
    per_txn = reads.groupBy("instance", "txn_seq", "inv_index", "p").agg(F.min("o").alias("o"))
    first = (
        F.broadcast(assigns)
        .join(per_txn, ["instance", "p"])
        .filter(
            (F.col("inv_index") > F.col("a_index"))
            & (F.col("next_a").isNull() | (F.col("inv_index") < F.col("next_a")))
        )
        .withColumn(
            "rn",
            F.row_number().over(
                Window.partitionBy("instance", "p", "a_index").orderBy("inv_index")
            ),
        )
        .filter(F.col("rn") == 1)
        .drop("rn", "next_a")
    )
    commits = fr.txns.filter(F.col("done_type") == "ok").select(
        F.col("instance").alias("ci"),
        F.col("txn_seq").alias("cs"),
        F.col("inv_index").alias("c_inv"),
        "done_index",
        F.explode("txn_offsets").alias("y"),
    )
    commits = commits.select(
        "ci",
        "cs",
        "c_inv",
        "done_index",
        F.col("y")[0].cast("int").alias("p"),
        F.col("y")[1].alias("nxt"),
    ).filter(F.col("p").isNotNull() & F.col("nxt").isNotNull())
    case = Window.partitionBy("instance", "p", "a_index")
    # The commits before the assignment that may be its last (none followed them for
    # certain), the lowest of them (see StartFacts.committed).
    best = (
        F.broadcast(first)
        .join(commits, "p")
        .filter(F.col("done_index") < F.col("a_index"))
        .withColumn("last_inv", F.max("c_inv").over(case))
        .filter(F.col("done_index") > F.col("last_inv"))
        .withColumn("rn", F.row_number().over(case.orderBy("nxt", "done_index")))
        .filter((F.col("rn") == 1) & (F.col("o") < F.col("nxt")))
    )
    rows = best.collect()
    facts = _start_facts(fr, reads, rows) if rows else []
    rebalances = [
        (r["instance"], r["index"], r["event"], r["generation"], list(r["partitions"]))
        for r in fr.rebalances.collect()
    ] if facts else []  # fmt: skip
    return result(
        fr, "started-below-committed", len(facts), A.examples(facts, rebalances, max_examples)
    )


def _reads(fr: EosFrames) -> DataFrame:
    """Every input a transaction read: instance, seq, invoke index, partition, offset, value."""
    x = fr.txns.select("instance", "txn_seq", "inv_index", F.explode("inputs").alias("x"))
    return x.select(
        "instance",
        "txn_seq",
        "inv_index",
        F.col("x")[0].cast("int").alias("p"),
        F.col("x")[1].cast("long").alias("o"),
        F.col("x")[2].alias("v"),
    ).filter(F.col("p").isNotNull() & F.col("o").isNotNull())


def _start_facts(fr: EosFrames, reads: DataFrame, rows: list[Any]) -> list[A.StartFacts]:
    """The rest of each case's facts, in one job over the reads: the first read's lowest
    inputs, the instance's previous read of the partition, and the pending transaction."""
    spark = fr.txns.sparkSession
    cases = spark.createDataFrame(
        [(r["instance"], r["p"], r["a_index"], r["txn_seq"]) for r in rows],
        "c_instance int, p int, a_index long, c_seq long",
    )
    done = fr.txns.select("instance", "txn_seq", "done_index")
    j = F.broadcast(cases).join(reads, "p").join(done, ["instance", "txn_seq"], "left")
    own = F.col("instance") == F.col("c_instance")
    pending = (
        ~own
        & (F.col("inv_index") < F.col("a_index"))
        & (F.col("done_index").isNull() | (F.col("done_index") > F.col("a_index")))
    )
    picked = j.filter(
        (own & (F.col("txn_seq") == F.col("c_seq")))
        | (own & (F.col("inv_index") < F.col("a_index")))
        | pending
    ).select(
        "c_instance", "p", "a_index", "instance", "txn_seq", "inv_index", "o", "v", "done_index",
        F.when(own & (F.col("txn_seq") == F.col("c_seq")), "read")
        .when(own, "prev")
        .otherwise("pending")
        .alias("role"),
    )  # fmt: skip
    got: dict[tuple[int, int, int], dict[str, Any]] = {}
    for r in picked.collect():
        g = got.setdefault((r["c_instance"], r["p"], r["a_index"]), {"read": [], "prev": -1})
        if r["role"] == "read":
            g["read"].append((r["o"], r["v"]))
        elif r["role"] == "prev":
            g["prev"] = max(g["prev"], r["inv_index"])
        else:
            key = (r["inv_index"], r["instance"], r["txn_seq"])
            pend = g.get("pending")
            if pend is None or key > pend[0]:
                g["pending"] = (key, r["o"], r["done_index"])
            elif key == pend[0]:
                g["pending"] = (key, max(pend[1], r["o"]), pend[2])
    out = []
    for r in rows:
        g = got.get((r["instance"], r["p"], r["a_index"]), {"read": [], "prev": -1})
        pend = g.get("pending")
        out.append(
            A.StartFacts(
                r["instance"],
                r["p"],
                r["a_index"],
                r["generation"],
                r["inv_index"],
                r["txn_seq"],
                r["o"],
                tuple(sorted(g["read"], key=lambda x: x[0])[: A.SHOWN_VALUES]),
                r["nxt"],
                (r["ci"], r["cs"], r["done_index"]),
                g["prev"],
                None
                if pend is None
                else (pend[0][1], pend[0][2], pend[0][0], pend[1] + 1, pend[2]),
            )
        )
    return out
