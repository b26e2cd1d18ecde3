"""``python -m harness trends``: what many nightly matrix runs say, computed on Spark.

Why Spark: the matrix store grows by one ``matrix.json`` per night (and its cells); the same
session helpers the checkers use (``checkers.spark``, embedded ``local[*]`` by default or a real
cluster via ``$KAFKA_HARNESS_SPARK_MASTER``) read them as one DataFrame, so a year of nights
costs no more code than two.

Per client and Kafka version: the pass rate of its correct scenarios and the anomaly types its
cells showed (the client axis). Per Kafka version and scenario (scenario = name + transaction
version): pass rate, every
anomaly type seen, throughput (median and latest records/s) and recovery time (seconds from a
healed fault to the next committed transaction; "not recorded" for runs without faults or from
before it was measured). "What's new tonight" compares the latest matrix run with all earlier
ones: a version+scenario's first failure, an anomaly type it never showed before, a throughput
drop of more than 20% against the earlier runs' median, and versions or scenarios never run.

Writes ``<store>/trends.json`` and ``<store>/trends.html``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from common.errors import HarnessError
from harness.kafka.versions import KafkaVersion
from harness.nightly.output import TEMPLATES, write_json_atomic
from harness.nightly.trends_data import load_matrix, matrix_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: A throughput below this fraction of the earlier runs' median is reported as a drop.
DROP_FRACTION = 0.8


def cell_schema():  # type: ignore[no-untyped-def]
    """The part of ``matrix.json`` trends read; explicit, so that an anomaly map is a map and
    not a struct inferred from whichever types happened to occur."""
    from pyspark.sql import types as T

    cell = T.StructType(
        [
            T.StructField("id", T.StringType()),
            T.StructField("version", T.StringType()),
            T.StructField("scenario", T.StringType()),
            T.StructField("client", T.StringType()),
            T.StructField("expected", T.StringType()),
            T.StructField("verdict", T.StringType()),
            T.StructField("outcome", T.StringType()),
            T.StructField("anomalies", T.MapType(T.StringType(), T.LongType())),
            T.StructField("safety_anomaly_types", T.ArrayType(T.StringType())),
            T.StructField("records_per_s", T.DoubleType()),
            T.StructField("txns_per_s", T.DoubleType()),
            T.StructField("recovery_s", T.DoubleType()),
            T.StructField("report", T.StringType()),
        ]
    )
    return T.StructType(
        [
            T.StructField("id", T.StringType()),
            T.StructField("started", T.StringType()),
            T.StructField("complete", T.BooleanType()),
            T.StructField("cells", T.ArrayType(cell)),
        ]
    )


def load_cells(spark: SparkSession, paths: list[Path]) -> DataFrame:
    """One row per cell of every matrix run: run id and start time plus the cell's fields."""
    from pyspark.sql import functions as F

    runs = (
        spark.read.schema(cell_schema())
        .option("multiLine", True)
        .option("mode", "DROPMALFORMED")
        .json([str(p) for p in paths])
    )
    return (
        runs.where(F.col("id").isNotNull())
        .select(F.col("id").alias("run"), F.col("started"), F.explode("cells").alias("c"))
        .select("run", "started", "c.*")
        .withColumn(
            "anomaly_types",
            F.array_sort(F.map_keys(F.map_filter("anomalies", lambda _k, v: v > 0))),
        )
        .withColumn("safety_types", F.coalesce("safety_anomaly_types", F.array()))
    )


def _series(cells: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return cells.groupBy("version", "scenario").agg(
        F.count("*").alias("runs"),
        F.sum(F.when(F.col("outcome") == "pass", 1).otherwise(0)).alias("passes"),
        F.sum(F.when(F.col("outcome") == "fail", 1).otherwise(0)).alias("fails"),
        F.sum(F.when(F.col("outcome") == "error", 1).otherwise(0)).alias("errors"),
        F.first("expected").alias("expected"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("anomaly_types")))).alias(
            "anomaly_types"
        ),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("safety_types")))).alias(
            "safety_types"
        ),
        F.expr("percentile(records_per_s, 0.5)").alias("records_per_s_median"),
        F.max_by("records_per_s", "run").alias("records_per_s_latest"),
        F.expr("percentile(recovery_s, 0.5)").alias("recovery_s_median"),
        F.max("recovery_s").alias("recovery_s_max"),
        F.array_sort(
            F.collect_list(F.struct("run", "outcome", "verdict", "records_per_s", "report"))
        ).alias("history"),
    )


def _clients(cells: DataFrame) -> DataFrame:
    """The client axis: per client and version, how its correct scenarios fared (a broken
    variant or a known bug's cell says nothing of the client's own soundness) and the anomaly
    types its cells showed, whatever their scenario."""
    from pyspark.sql import functions as F

    correct = F.col("expected") == "valid"
    return (
        cells.withColumn("client", F.coalesce("client", F.lit("not recorded")))
        .groupBy("client", "version")
        .agg(
            F.count("*").alias("cells"),
            F.sum(F.when(correct, 1).otherwise(0)).alias("correct_cells"),
            F.sum(F.when(correct & (F.col("outcome") == "pass"), 1).otherwise(0)).alias(
                "correct_passes"
            ),
            F.sum(F.when(F.col("outcome") == "error", 1).otherwise(0)).alias("errors"),
            F.array_sort(F.collect_set("scenario")).alias("scenarios"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("anomaly_types")))).alias(
                "anomaly_types"
            ),
        )
    )


def _tonight(cells: DataFrame, latest: str) -> DataFrame:
    """The latest run's cells joined with what all earlier runs said about the same key."""
    from pyspark.sql import functions as F

    earlier = (
        cells.where(F.col("run") < latest)
        .groupBy("version", "scenario")
        .agg(
            F.count("*").alias("prev_runs"),
            F.sum(F.when(F.col("outcome") == "fail", 1).otherwise(0)).alias("prev_fails"),
            F.array_distinct(F.flatten(F.collect_list("anomaly_types"))).alias("prev_types"),
            F.expr("percentile(records_per_s, 0.5)").alias("prev_rps_median"),
        )
    )
    known_versions = cells.where(F.col("run") < latest).select("version").distinct()
    known_versions = known_versions.withColumn("version_known", F.lit(True))
    return (
        cells.where(F.col("run") == latest)
        .join(earlier, ["version", "scenario"], "left")
        .join(known_versions, ["version"], "left")
        .select(
            "version",
            "scenario",
            "expected",
            "outcome",
            "verdict",
            "report",
            "records_per_s",
            F.coalesce("prev_runs", F.lit(0)).alias("prev_runs"),
            F.coalesce("prev_fails", F.lit(0)).alias("prev_fails"),
            F.coalesce(F.col("version_known"), F.lit(False)).alias("version_known"),
            F.array_except(
                "anomaly_types", F.coalesce("prev_types", F.array().cast("array<string>"))
            ).alias("new_types"),
            F.array_intersect(
                "safety_types",
                F.array_except(
                    "anomaly_types", F.coalesce("prev_types", F.array().cast("array<string>"))
                ),
            ).alias("new_safety_types"),
            "prev_rps_median",
        )
    )


def whats_new(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events of tonight's run from the joined rows (plain Python: a handful of rows)."""
    events: list[dict[str, Any]] = []
    first_seen: set[str] = set()
    for r in rows:
        key = {"version": r["version"], "scenario": r["scenario"], "report": r["report"]}
        if not r["version_known"] and r["version"] not in first_seen:
            first_seen.add(r["version"])
            events.append(
                {**key, "kind": "new-version", "text": f"Kafka {r['version']}: first matrix run"}
            )
        if r["prev_runs"] == 0 and r["version_known"]:
            events.append(
                {
                    **key,
                    "kind": "new-scenario",
                    "text": f"{r['scenario']}: first run on Kafka {r['version']}",
                }
            )
        if r["outcome"] == "fail" and r["prev_fails"] == 0:
            events.append(
                {
                    **key,
                    "kind": "first-failure",
                    "text": f"first failure of Kafka {r['version']} {r['scenario']}: "
                    f"expected {r['expected']}, got {r['verdict']}",
                }
            )
        if r["new_types"]:
            expected = " (expected: broken on purpose)" if r["expected"] == "invalid" else ""
            events.append(
                {
                    **key,
                    "kind": "new-anomaly-type",
                    "types": list(r["new_types"]),
                    "safety": list(r["new_safety_types"]),
                    "text": f"Kafka {r['version']} {r['scenario']}: anomaly type(s) never seen "
                    f"before: {', '.join(r['new_types'])}{expected}",
                }
            )
        prev, now = r["prev_rps_median"], r["records_per_s"]
        if prev and now is not None and now < DROP_FRACTION * prev:
            events.append(
                {
                    **key,
                    "kind": "throughput-drop",
                    "records_per_s": now,
                    "previous_median": prev,
                    "text": f"Kafka {r['version']} {r['scenario']}: {now:.0f} records/s, "
                    f"{100 * (1 - now / prev):.0f}% below the earlier median {prev:.0f}",
                }
            )
    return events


def _sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
    v = KafkaVersion(row["version"])
    return (tuple(-x for x in v.key[:3]), row["scenario"])


def compute_trends(spark: SparkSession, paths: list[Path]) -> dict[str, Any]:
    """The trends of the matrix runs in ``paths`` (each a ``matrix.json``)."""
    from pyspark.sql import functions as F

    cells = load_cells(spark, paths).cache()
    runs_df = cells.groupBy("run", "started").agg(
        F.count("*").alias("cells"),
        F.sum(F.when(F.col("outcome") == "pass", 1).otherwise(0)).alias("pass"),
        F.sum(F.when(F.col("outcome") == "fail", 1).otherwise(0)).alias("fail"),
        F.sum(F.when(F.col("outcome") == "error", 1).otherwise(0)).alias("error"),
        F.array_sort(F.collect_set("version")).alias("versions"),
    )
    runs = [r.asDict(recursive=True) for r in runs_df.orderBy("run").collect()]
    if not runs:
        raise HarnessError("no readable matrix.json under the store; run the matrix first")
    latest = runs[-1]["run"]
    series = [r.asDict(recursive=True) for r in _series(cells).collect()]
    for s in series:
        s["pass_rate"] = round(s["passes"] / s["runs"], 3) if s["runs"] else None
        s["recovery"] = (
            "not recorded (no healed fault in these runs)"
            if s["recovery_s_max"] is None
            else f"median {s['recovery_s_median']:.1f} s, worst {s['recovery_s_max']:.1f} s"
        )
    series.sort(key=_sort_key)
    clients = [r.asDict(recursive=True) for r in _clients(cells).collect()]
    for c in clients:
        n = c["correct_cells"]
        c["correct_pass_rate"] = round(c["correct_passes"] / n, 3) if n else None
    clients.sort(key=lambda c: (c["client"], tuple(-x for x in KafkaVersion(c["version"]).key[:3])))
    tonight = [r.asDict(recursive=True) for r in _tonight(cells, latest).collect()]
    tonight.sort(key=_sort_key)
    cells.unpersist()
    return {
        "trends_format": 1,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "matrix_runs": len(runs),
        "latest_run": latest,
        "runs": runs,
        "series": series,
        "clients": clients,
        "whats_new": whats_new(tonight),
    }


def write_trends(trends: dict[str, Any], store: Path) -> tuple[Path, Path]:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape())
    base = store.resolve()
    env.filters["rel"] = lambda p: os.path.relpath(p, base) if p else None
    html = env.get_template("trends.html.j2").render(t=trends)
    out_json, out_html = store / "trends.json", store / "trends.html"
    write_json_atomic(out_json, trends)
    out_html.write_text(html)
    return out_json, out_html


def trends_command(args: argparse.Namespace) -> int:
    from checkers.spark import SparkUnavailable, spark_error, spark_session

    store = Path(args.store)
    paths = [p for p in matrix_files(store) if load_matrix(p) is not None]
    if not paths:
        raise HarnessError(f"no matrix runs under {store / 'matrix'}; run the matrix first")
    try:
        with spark_session() as spark:
            trends = compute_trends(spark, paths)
    except HarnessError:
        raise
    except SparkUnavailable as exc:
        raise HarnessError(str(exc)) from None
    except Exception as exc:
        raise HarnessError(str(spark_error(exc))) from None
    out_json, out_html = write_trends(trends, store)
    print(f"trends over {trends['matrix_runs']} matrix runs: {out_html} ({out_json.name})")
    for e in trends["whats_new"]:
        print(f"new: {e['text']}")
    return 0


def add_trends_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default="store", metavar="DIR")
