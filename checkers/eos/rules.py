"""eos checks, part 2: torn transactions, order, hanging transactions, progress; shared helpers.

Why split from :mod:`checkers.eos.checks`: keeps each module small; the definitions are in
``docs/anomalies.md`` ("eos workload") and mirrored line by line in :mod:`checkers.eos.pyref`.

How the checks stay cheap at scale: each one *counts* with one Spark job over the typed views
(broadcast joins against small frames, at most one shuffle), and only when the count is not
zero fetches the first few cases and the records and ops that illustrate them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.eos import results as X
from checkers.eos.frames import EosFrames, ops_at
from checkers.eos.log import run_log
from checkers.eos.results import Example, check_result

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def result(fr: EosFrames, name: str, n: int, made: list[Example]) -> dict[str, Any]:
    """A check's result (:func:`checkers.eos.results.check_result`), ops read from the history."""
    return check_result(name, n, made, lambda idx: ops_at(fr, idx))


def finish(
    fr: EosFrames,
    name: str,
    df: DataFrame,
    order: list[Column | str],
    max_examples: int,
    make: Callable[[Any], Example],
) -> dict[str, Any]:
    """Count the anomaly rows and turn the first few into examples with their full ops."""
    n = df.count()
    rows = df.orderBy(*order).limit(max_examples).collect() if n and max_examples else []
    return result(fr, name, n, [make(r) for r in rows])


def readable(fr: EosFrames, p: Column) -> Column:
    """SQL condition: the output partition input partition ``p`` maps to was read fully."""
    parts = fr.readable
    if not parts:
        return F.lit(False)
    return (p % F.lit(fr.n_out)).isin(*parts)


def committed_of(fr: EosFrames, p: Column) -> Column:
    """The group's committed offset of input partition ``p`` (null if it has none)."""
    if not fr.committed_map:
        return F.lit(None).cast("long")
    pairs = [x for k, v in sorted(fr.committed_map.items()) for x in (F.lit(k), F.lit(v))]
    return F.create_map(*pairs)[p.cast("int")].cast("long")


def records_at(fr: EosFrames, keys: list[tuple[int, int]]) -> dict[tuple[int, int], Any]:
    """The drained records (full rows) at these (output partition, offset) positions."""
    if not keys:
        return {}
    want = fr.drain.sparkSession.createDataFrame(
        [(int(p), int(o)) for p, o in set(keys)], "partition int, offset long"
    )
    rows = fr.drain.join(F.broadcast(want), ["partition", "offset"]).collect()
    return {(r["partition"], r["offset"]): r for r in rows}


def txn_idx(r: Any) -> list[int]:
    """History indices of a record's or transaction's txn invoke and completion."""
    return [i for i in (r["inv_index"], r["done_index"]) if i is not None]


#: A position (partition, offset), of an input or an output, packed in one long by :func:`pack`:
#: offsets below 2**40, partitions below 2**23, far beyond any run.
_POS_BITS = 40


def pack(hi: Column, lo: Column) -> Column:
    """Two non-negative ints as one long (``hi`` above bit :data:`_POS_BITS`); null if either is.

    Grouping, joining and taking minima on one long keeps Spark on its fastest paths (hash
    aggregation, narrow shuffle rows); structs and strings as keys or buffers measured 2-3x
    slower at 10M rows.
    """
    return hi.cast("long") * F.lit(1 << _POS_BITS) + lo.cast("long")


def unpack_hi(c: Column) -> Column:
    return F.shiftright(c, _POS_BITS).cast("int")


def unpack_lo(c: Column) -> Column:
    return c.bitwiseAND(F.lit((1 << _POS_BITS) - 1))


def ident_table(fr: EosFrames) -> DataFrame:
    """One row per input identity: seeds claiming it, drained copies, the first copy.

    Shared by ``lost``, ``duplicate`` and ``order`` so the seeds and the drain are shuffled
    once for all three (persisted for the run; :meth:`EosFrames.release` drops it). The
    identity is a known source position (``k_p``, ``k_o``), else the input value (``k_v``,
    for drained records whose source is unknown: few, aggregated apart); :func:`ident_of`
    turns a key back into the ``ident`` text. Positions and the first copy's output position
    are packed longs (:func:`pack`), and the rows are hash-partitioned on the key before the
    aggregation: almost every key occurs twice (a seed and its copy), so a partial
    aggregation before the shuffle would only cost time.
    """
    with fr.lock:
        if fr.idents is None:
            fr.idents = _ident_table(fr)
        return fr.idents


def _ident_table(fr: EosFrames) -> DataFrame:
    placed = F.col("src_p").isNotNull() & F.col("src_o").isNotNull()
    seeds = fr.seeds.filter(placed).select(
        pack(F.col("src_p"), F.col("src_o")).alias("k"),
        F.lit(1).alias("n_seed"),
        F.lit(0).alias("n_copy"),
        F.lit(None).cast("long").alias("first"),
    )
    drain = fr.drain.filter(placed).select(
        pack(F.col("src_p"), F.col("src_o")).alias("k"),
        F.lit(0).alias("n_seed"),
        F.lit(1).alias("n_copy"),
        pack(F.col("partition"), F.col("offset")).alias("first"),
    )
    by_pos = (
        seeds.unionByName(drain)
        .repartition("k")
        .groupBy("k")
        .agg(
            F.sum("n_seed").cast("int").alias("n_seed"),
            F.sum("n_copy").cast("int").alias("copies"),
            F.min("first").alias("first"),
        )
        .select("k", F.lit(None).cast("string").alias("k_v"), "n_seed", "copies", "first")
    )
    by_value = (
        fr.drain.filter(~placed)
        .groupBy(F.coalesce(F.col("in_value"), F.lit("None")).alias("k_v"))
        .agg(
            F.max("src_p").alias("v_p"),
            F.max("src_o").alias("v_o"),
            F.count(F.lit(1)).cast("int").alias("copies"),
            F.min(pack(F.col("partition"), F.col("offset"))).alias("first"),
        )
        .select(
            F.lit(None).cast("long").alias("k"),
            "k_v",
            F.lit(0).alias("n_seed"),
            "copies",
            "first",
            "v_p",
            "v_o",
        )
    )
    # Persisted narrow (packed longs compress well in the columnar cache); the unpacked
    # columns below are computed by each reader.
    stored = (
        by_pos.select(
            "*", F.lit(None).cast("int").alias("v_p"), F.lit(None).cast("long").alias("v_o")
        )
        .unionByName(by_value)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    fr.persisted.append(stored)
    t = stored.select(
        unpack_hi(F.col("k")).alias("k_p"),
        unpack_lo(F.col("k")).alias("k_o"),
        "k_v",
        F.coalesce(unpack_hi(F.col("k")), F.col("v_p")).alias("src_p"),
        F.coalesce(unpack_lo(F.col("k")), F.col("v_o")).alias("src_o"),
        "n_seed",
        "copies",
        F.when(
            F.col("first").isNotNull(),
            F.struct(
                unpack_hi(F.col("first")).alias("partition"),
                unpack_lo(F.col("first")).alias("offset"),
            ),
        ).alias("first"),
    )
    fr.idents = t
    return t


def ident_of() -> Column:
    """The ``ident`` text (as in the drain view) of an :func:`ident_table` row's key."""
    return F.when(
        F.col("k_v").isNull(),
        F.concat_ws("/", F.col("k_p").cast("string"), F.col("k_o").cast("string")),
    ).otherwise(F.concat(F.lit("v:"), F.col("k_v")))


# ------------------------------------------------------------------------------------------


def check_torn(
    fr: EosFrames,
    max_examples: int,
    log_at: Callable[[list[tuple[int, int]]], dict[tuple[int, int], dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Transactions partly visible, or recorded ok with offsets committed but no outputs.

    ``log_at``: broker-log evidence of output positions (the run's dump), for where the
    missing outputs went.

    One shuffle: the transactions' wanted input positions and the drained records' positions,
    both keyed by (instance, txn_seq), are hash-partitioned on that pair; the per-position
    and the per-transaction aggregations then run in the same stage. Counting flags instead
    of collecting position sets keeps every row a few primitives.
    """
    offs_ok = F.size("txn_offsets") > 0
    if fr.committed_map:
        pairs = [x for k, v in sorted(fr.committed_map.items()) for x in (F.lit(k), F.lit(v))]
        cmap = F.create_map(*pairs)
        offs_ok = offs_ok & F.forall(
            "txn_offsets",
            lambda o: F.coalesce(cmap[o[0].cast("int")] >= o[1], F.lit(False)),
        )
    else:
        offs_ok = F.lit(False)
    absent_ok = F.coalesce((F.col("done_type") == "ok") & offs_ok, F.lit(False))
    want = fr.txns.select(
        "instance", "txn_seq", absent_ok.alias("absent_ok"), F.explode("inputs").alias("x")
    ).select(
        "instance",
        "txn_seq",
        F.col("x")[0].cast("int").alias("p"),
        F.col("x")[1].cast("long").alias("o"),
        F.lit(1).alias("w"),
        F.lit(0).alias("h"),
        "absent_ok",
        readable(fr, F.col("x")[0].cast("int")).cast("int").alias("rd"),
    )
    # Only a positioned output can match a wanted input (inputs always have positions).
    have = fr.drain.filter(
        F.col("instance").isNotNull()
        & F.col("txn_seq").isNotNull()
        & F.col("src_p").isNotNull()
        & F.col("src_o").isNotNull()
    ).select(
        "instance",
        "txn_seq",
        F.col("src_p").alias("p"),
        F.col("src_o").alias("o"),
        F.lit(0).alias("w"),
        F.lit(1).alias("h"),
        F.lit(None).cast("boolean").alias("absent_ok"),
        F.lit(None).cast("int").alias("rd"),
    )
    per_pos = (
        want.unionByName(have)
        .repartition("instance", "txn_seq")
        .groupBy("instance", "txn_seq", "p", "o")
        .agg(
            F.max("w").alias("w"),
            F.max("h").alias("h"),
            F.min("rd").alias("rd"),
            F.max("absent_ok").alias("absent_ok"),
        )
    )
    per = (
        per_pos.groupBy("instance", "txn_seq")
        .agg(
            F.sum("w").alias("expected"),
            F.sum(F.col("w") * F.col("h")).alias("present"),
            F.min("rd").alias("all_read"),
            F.max("absent_ok").alias("absent_ok"),
        )
        .filter((F.col("expected") > 0) & (F.col("all_read") == 1))
    )
    partial = (F.col("present") > 0) & (F.col("present") < F.col("expected"))
    absent = (F.col("present") == 0) & F.col("absent_ok")
    bad = per.filter(partial | absent).select(
        "instance",
        "txn_seq",
        "expected",
        "present",
        F.when(partial, F.lit("partial"))
        .otherwise(F.lit("ok-offsets-committed-outputs-absent"))
        .alias("kind"),
    )
    n = bad.count()
    rows = bad.orderBy("instance", "txn_seq").limit(max_examples).collect() if n else []
    made = []
    if rows:
        keys = fr.drain.sparkSession.createDataFrame(
            [(r["instance"], r["txn_seq"]) for r in rows], "instance int, txn_seq long"
        )
        txns = {
            (t["instance"], t["txn_seq"]): t
            for t in fr.txns.join(F.broadcast(keys), ["instance", "txn_seq"]).collect()
        }
        have_sets: dict[tuple[int, int], set[str]] = {k: set() for k in txns}
        for d in (
            fr.drain.join(F.broadcast(keys), ["instance", "txn_seq"])
            .select("instance", "txn_seq", "src_p", "src_o")
            .collect()
        ):
            if d["src_p"] is not None and d["src_o"] is not None:
                have_sets[(d["instance"], d["txn_seq"])].add(f"{d['src_p']}/{d['src_o']}")
        done_at = {k: t["done_index"] for k, t in txns.items() if t["done_index"] is not None}
        ops = ops_at(fr, list(done_at.values()))
        done_ops = {k: ops[i] for k, i in done_at.items() if i in ops}
        ev = log_at(X.torn_output_positions(done_ops.values())) if log_at else {}
        for r in rows:
            key = (r["instance"], r["txn_seq"])
            t = txns[key]
            made.append(
                X.torn_transaction(
                    key,
                    r["kind"],
                    t["inputs"] or [],
                    have_sets[key],
                    txn_idx(t),
                    done=done_ops.get(key),
                    log_of=ev.get,
                )
            )
    return result(fr, "torn-transaction", n, made)


def check_order(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Within an output partition, first outputs of one input partition in input order."""
    first = (
        ident_table(fr)
        .filter(F.col("src_p").isNotNull() & (F.col("copies") > 0))
        .select(
            F.col("first.partition").alias("partition"),
            F.col("first.offset").alias("offset"),
            "src_p",
            "src_o",
        )
    )
    w = Window.partitionBy("partition", "src_p").orderBy("offset")
    d = first.select(
        "*",
        F.lag("src_o").over(w).alias("prev_o"),
        F.lag("offset").over(w).alias("prev_offset"),
    )
    bad = d.filter(F.col("prev_o").isNotNull() & (F.col("src_o") < F.col("prev_o")))
    n = bad.count()
    rows = bad.orderBy("partition", "offset").limit(max_examples).collect() if n else []
    recs = records_at(
        fr, [(r["partition"], o) for r in rows for o in (r["prev_offset"], r["offset"])]
    )
    made = []
    for r in rows:
        prev, cur = recs[(r["partition"], r["prev_offset"])], recs[(r["partition"], r["offset"])]
        made.append(X.order(r["partition"], r["src_p"], prev, cur))
    return result(fr, "order", n, made)


def check_hanging(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, Any]:
    """Partitions with LSO < HWM at the end, and rows reported by find-hanging.

    The cases are a few per partition at most, so they are collected whole and judged by
    :func:`checkers.eos.results.hanging_cases` (the reference does the same); Spark only
    parses the final ops and, when there are cases, finds the last transactional writer's op.
    """
    fin = fr.finals
    wm_ops = fin.filter((F.col("f") == "watermarks") & (F.col("type") == "ok")).select(
        "index",
        F.from_json(
            "value",
            "struct<topic:string,partitions:array<struct<partition:int,lso:long,hwm:long>>>",
        ).alias("v"),
    )
    topics = {r["topic"] for r in wm_ops.select(F.col("v.topic").alias("topic")).collect()}
    wm = wm_ops.select("index", "v.topic", F.posexplode("v.partitions").alias("p1", "w")).filter(
        F.col("w.lso") < F.col("w.hwm")
    )
    fh = fin.filter((F.col("f") == "find-hanging") & (F.col("type") == "ok")).select(
        "index",
        F.from_json(
            "value", "struct<results:array<struct<broker:int,rows:array<map<string,string>>>>>"
        )["results"].alias("results"),
    )
    fh_ops = fh.count()
    rows: list[X.HangingRow] = []
    for r in fh.orderBy("index").collect():
        pos = 0
        for res in r["results"] or []:
            for row in res["rows"] or []:
                rows.append(X.HangingRow(r["index"], pos, res["broker"], dict(row)))
                pos += 1
    times = {
        int(r["index"]): int(r["time"])
        for r in fr.hist.join(wm.select("index").distinct(), ["index"])
        .select("index", "time")
        .distinct()
        .collect()
    }
    watched = [
        X.Watched(r["index"], r["p1"], times[r["index"]], r["topic"], r["w"]["partition"],
                  r["w"]["lso"], r["w"]["hwm"])
        for r in wm.collect()
    ]  # fmt: skip
    last_write = _last_write(fr) if watched else None
    cases = X.hanging_cases(
        watched,
        rows,
        watched_topics=topics,
        find_hanging_ran=fh_ops > 0,
        last_write=last_write,
        timeout_ms=fr.txn_timeout_ms,
    )
    top = cases[:max_examples]
    stuck = [(c.topic, c.partition, c.lso) for _k, c, _f in top if isinstance(c, X.Watched)]
    log = run_log(fr, spark, run_dir) if stuck else None
    ev = log.evidence(stuck) if log is not None else {}
    made = [
        X.lso_below_hwm(c, f, ev.get((c.topic, c.partition, c.lso)))
        if isinstance(c, X.Watched)
        else X.find_hanging_row(c, f)
        for _k, c, f in top
    ]
    return result(fr, "hanging-transaction", len(cases), made)


def _last_write(fr: EosFrames) -> int | None:
    """Monotonic time of the last op of a transactional writer: a processor or the seeder."""
    writers = F.col("process_is_int") | (F.col("process") == "seeder")
    got = fr.hist.filter(writers).agg(F.max("time")).first()
    return None if got is None or got[0] is None else int(got[0])


def check_progress(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Liveness: the drain finished and every acknowledged seed was consumed and read."""
    drain_type = None if fr.drain_op is None else fr.drain_op["type"]
    unread = sorted(p for p, ok in fr.reads if not ok)
    committed = committed_of(fr, F.col("src_p"))
    missing = fr.seeds.select(
        "value", "src_p", "src_o", "send_index", committed.alias("committed")
    ).filter(F.col("committed").isNull() | (F.col("src_o") >= F.col("committed")))
    n = missing.count()
    order = ["src_p", "src_o", "send_index"]
    rows = missing.orderBy(*order).limit(max_examples).collect() if n and max_examples else []
    first = [(r["value"], r["src_p"], r["src_o"], r["committed"]) for r in rows]
    return X.progress_result(drain_type, unread, n, first)


__all__ = [
    "Example",
    "check_hanging",
    "check_order",
    "check_progress",
    "check_torn",
    "committed_of",
    "finish",
    "ident_of",
    "ident_table",
    "readable",
    "records_at",
    "result",
    "txn_idx",
]
