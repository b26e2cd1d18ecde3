"""eos checks, part 2: torn transactions, order, hanging transactions, progress; shared helpers.

Why split from :mod:`checkers.eos_checks`: keeps each module small; the definitions are in
``docs/anomalies.md`` ("eos workload") and mirrored line by line in :mod:`checkers.eos_pyref`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.eos_frames import EosFrames, ops_at, record_dict

Example = tuple[dict[str, Any], list[int]]  # example without ops, op indices to attach


def finish(
    fr: EosFrames,
    df: DataFrame,
    order: list[Column | str],
    max_examples: int,
    make: Callable[[Any], Example],
) -> dict[str, Any]:
    """Count the anomaly rows and turn the first few into examples with their full ops."""
    n = df.count()
    rows = df.orderBy(*order).limit(max_examples).collect() if n else []
    made = [make(r) for r in rows]
    ops = ops_at(fr, [i for _e, idx in made for i in idx])
    examples = []
    for ex, idx in made:
        ex["ops"] = [ops[i] for i in sorted(set(idx)) if i in ops]
        examples.append(ex)
    return {"valid": n == 0, "count": n, "examples": examples}


def readable(fr: EosFrames, p: Column) -> Column:
    """SQL condition: the output partition input partition ``p`` maps to was read fully.

    Needs the frame joined with :func:`readable_parts` (column ``rd_p``).
    """
    return (p % F.lit(fr.n_out)) == F.col("rd_p")


def readable_parts(fr: EosFrames) -> DataFrame:
    """Output partitions whose read_committed read completed (``rd_p``)."""
    return fr.reads.filter(F.col("ok")).select(F.col("partition").alias("rd_p"))


def _txn_idx(r: Any) -> list[int]:
    return [i for i in (r["inv_index"], r["done_index"]) if i is not None]


# ------------------------------------------------------------------------------------------


def check_torn(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Transactions partly visible, or recorded ok with offsets committed but no outputs."""
    inputs = fr.txns.select("instance", "txn_seq", F.explode("inputs").alias("x")).select(
        "instance",
        "txn_seq",
        F.col("x")[0].cast("int").alias("p"),
        F.concat_ws(
            "/", F.col("x")[0].cast("int").cast("string"), F.col("x")[1].cast("long").cast("string")
        ).alias("ident"),
        F.col("x")[2].alias("in_value"),
    )
    rd = readable_parts(fr)
    inputs = inputs.join(F.broadcast(rd), readable(fr, F.col("p")), "left").withColumn(
        "ok_read", F.col("rd_p").isNotNull()
    )
    have = (
        fr.drain.filter(F.col("instance").isNotNull() & F.col("txn_seq").isNotNull())
        .select("instance", "txn_seq", "ident", F.lit(True).alias("seen"))
        .distinct()
    )
    per = (
        inputs.join(have, ["instance", "txn_seq", "ident"], "left")
        .groupBy("instance", "txn_seq")
        .agg(
            F.countDistinct("ident").alias("expected"),
            F.countDistinct(F.when(F.col("seen"), F.col("ident"))).alias("present"),
            F.min(F.col("ok_read").cast("int")).alias("all_read"),
            F.collect_list(F.struct("ident", "in_value", "seen")).alias("items"),
        )
        .filter(F.col("all_read") == 1)
    )
    offs = fr.txns.filter(F.col("done_type") == "ok").select(
        "instance", "txn_seq", F.explode("txn_offsets").alias("o")
    )
    offs = offs.select(
        "instance",
        "txn_seq",
        F.col("o")[0].cast("int").alias("src_p"),
        F.col("o")[1].alias("next"),
    ).join(fr.committed, ["src_p"], "left")
    offs_ok = offs.groupBy("instance", "txn_seq").agg(
        F.min(F.coalesce((F.col("committed") >= F.col("next")).cast("int"), F.lit(0))).alias(
            "offs_committed"
        )
    )
    t = per.join(fr.txns, ["instance", "txn_seq"]).join(offs_ok, ["instance", "txn_seq"], "left")
    partial = (F.col("present") > 0) & (F.col("present") < F.col("expected"))
    absent = (F.col("present") == 0) & (F.col("done_type") == "ok") & (F.col("offs_committed") == 1)
    bad = t.filter(partial | absent).withColumn(
        "kind",
        F.when(partial, F.lit("partial")).otherwise(F.lit("ok-offsets-committed-outputs-absent")),
    )

    def make(r: Any) -> Example:
        items = sorted(r["items"], key=lambda i: tuple(int(x) for x in i["ident"].split("/")))
        ex = {
            "values": [i["in_value"] for i in items],
            "kind": r["kind"],
            "txn": [r["instance"], r["txn_seq"]],
            "expected": r["expected"],
            "present": r["present"],
            "missing": [i["ident"] for i in items if not i["seen"]],
        }
        return ex, _txn_idx(r)

    return finish(fr, bad, ["instance", "txn_seq"], max_examples, make)


def check_order(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Within an output partition, first outputs of one input partition in input order."""
    first = Window.partitionBy("ident").orderBy("partition", "offset")
    d = fr.drain.filter(F.col("src_p").isNotNull())
    d = d.withColumn("rn", F.row_number().over(first)).filter(F.col("rn") == 1)
    w = Window.partitionBy("partition", "src_p").orderBy("offset")
    rec = F.struct("topic", "partition", "offset", "key", "value", "headers", "in_value", "src_o")
    d = d.withColumn("prev", F.lag(rec).over(w)).withColumn("cur", rec)
    bad = d.filter(F.col("prev").isNotNull() & (F.col("src_o") < F.col("prev.src_o")))

    def make(r: Any) -> Example:
        ex = {
            "values": [r["prev"]["in_value"], r["cur"]["in_value"]],
            "output_partition": r["partition"],
            "src_partition": r["src_p"],
            "records": [record_dict(r["prev"]), record_dict(r["cur"])],
        }
        return ex, []

    return finish(fr, bad, ["partition", "offset"], max_examples, make)


def check_hanging(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Partitions with LSO < HWM at the end, and rows reported by find-hanging."""
    fin = fr.hist.filter((F.col("process") == "final") & ~F.col("process_is_int"))
    wm = fin.filter((F.col("f") == "watermarks") & (F.col("type") == "ok")).select(
        "index",
        F.from_json(
            "value",
            "struct<topic:string,partitions:array<struct<partition:int,lso:long,hwm:long>>>",
        ).alias("v"),
    )
    wm = wm.select("index", "v.topic", F.explode("v.partitions").alias("w")).filter(
        F.col("w.lso") < F.col("w.hwm")
    )
    wm = wm.select(
        "index",
        F.lit("lso-below-hwm").alias("kind"),
        "topic",
        F.col("w.partition").alias("partition"),
        F.col("w.lso").alias("lso"),
        F.col("w.hwm").alias("hwm"),
        F.lit(None).cast("int").alias("broker"),
        F.lit(None).cast("map<string,string>").alias("row"),
    )
    fh = fin.filter((F.col("f") == "find-hanging") & (F.col("type") == "ok")).select(
        "index",
        F.explode(
            F.from_json(
                "value", "struct<results:array<struct<broker:int,rows:array<map<string,string>>>>>"
            )["results"]
        ).alias("res"),
    )
    fh = fh.select("index", "res.broker", F.explode("res.rows").alias("row")).select(
        "index",
        F.lit("find-hanging").alias("kind"),
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        F.lit(None).cast("long").alias("lso"),
        F.lit(None).cast("long").alias("hwm"),
        "broker",
        "row",
    )
    bad = wm.unionByName(fh)

    def make(r: Any) -> Example:
        ex: dict[str, Any] = {"values": [], "kind": r["kind"]}
        if r["kind"] == "lso-below-hwm":
            ex |= {"topic": r["topic"], "partition": r["partition"], "lso": r["lso"]}
            ex["hwm"] = r["hwm"]
        else:
            ex |= {"broker": r["broker"], "row": r["row"]}
        return ex, [r["index"]]

    return finish(fr, bad, ["index", "kind", "partition", "broker"], max_examples, make)


def check_progress(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Liveness: the drain finished and every acknowledged seed was consumed and read."""
    drain_type = None if fr.drain_op is None else fr.drain_op["type"]
    unread = sorted(r["partition"] for r in fr.reads.filter(~F.col("ok")).collect())
    missing = fr.seeds.join(fr.committed, ["src_p"], "left").filter(
        F.col("committed").isNull() | (F.col("src_o") >= F.col("committed"))
    )
    n = missing.count()
    rows = missing.orderBy("src_p", "src_o").limit(max_examples).collect() if n else []
    ok = drain_type == "ok" and not unread and n == 0
    return {
        "valid": ok,
        "drain": drain_type,
        "incomplete_reads": unread,
        "unconsumed": n,
        "count": n + len(unread) + (0 if drain_type == "ok" else 1),
        "examples": [
            {
                "values": [r["value"]],
                "input": [r["src_p"], r["src_o"]],
                "committed_offset": r["committed"],
            }
            for r in rows
        ],
    }
