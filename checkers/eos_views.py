"""The eos views of a run, joined once and stored as typed Parquet beside the run.

Why: the checks join the same views again and again (drained records mapped back to their
inputs and transactions, transactions with their completions), and the joins over millions of
records cost more than the checks that use them. The first check of a run joins the views from
the typed tables the history scan wrote (:mod:`checkers.eos_extract`, no JSON parsed on Spark)
and stores them under ``<run>/.parquet/eos-views/`` (manifest ``eos-views.json``: the history's
size and mtime, :data:`VIEWS_FORMAT` and the small constants); later checks of the unchanged
history read only the typed columns they use. A run directory that cannot be written is joined
each time, with the views persisted in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel

from checkers import eos_frames as E
from checkers.eos_extract import SCHEMAS
from checkers.eos_results import transaction_timeout_ms
from checkers.load import Loaded, derived_cache, publish_derived

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Bump when a view's columns or meaning change, so stale views are rebuilt, never misread.
VIEWS_FORMAT = 4
NAME = "eos-views"
VIEWS = ("seeds", "poison", "txns", "drain", "committed", "fences", "finals")


def build(spark: SparkSession, loaded: Loaded) -> E.EosFrames:
    """The run's :class:`EosFrames`, from the stored views if they are current."""
    data, meta = derived_cache(loaded.source, NAME)
    if meta is None or meta.get("views_format") != VIEWS_FORMAT:
        done = publish_derived(
            loaded.source,
            NAME,
            lambda d: _write_views(spark, loaded, d),
            {"views_format": VIEWS_FORMAT},
        )
        if done is None:  # read-only run directory: join into memory
            fr = _in_memory(spark, loaded)
            fr.txn_timeout_ms = transaction_timeout_ms(loaded.header)
            return fr
        data, meta = done
    views = {name: spark.read.parquet(str(data / name)) for name in VIEWS}
    fr = _frames(loaded.df, views, meta)
    fr.txn_timeout_ms = transaction_timeout_ms(loaded.header)
    return fr


def _tables(spark: SparkSession, loaded: Loaded) -> dict[str, DataFrame]:
    """The typed tables the history scan wrote (see :mod:`checkers.eos_extract`)."""
    if loaded.tables is None:
        raise ValueError(f"{loaded.source}: loaded without the eos tables")
    return {name: spark.read.parquet(str(loaded.tables / name)) for name in SCHEMAS}


def _write_views(spark: SparkSession, loaded: Loaded, out: Path) -> dict[str, Any]:
    """Join every view, write it as Parquet under ``out``; returns the small constants."""
    t = _tables(spark, loaded)
    out.mkdir(parents=True, exist_ok=True)
    small, info = E.parse_small(t)
    for name, df in small.items():
        df.write.parquet(str(out / name))
    t["seeds"].write.parquet(str(out / "seeds"))
    E.parse_txns(t).write.parquet(str(out / "txns"))
    seeds = spark.read.parquet(str(out / "seeds"))
    txns = spark.read.parquet(str(out / "txns"))
    E.parse_drain(t, seeds, txns).write.parquet(str(out / "drain"))
    return info


def _in_memory(spark: SparkSession, loaded: Loaded) -> E.EosFrames:
    t = _tables(spark, loaded)
    small, info = E.parse_small(t)
    seeds = t["seeds"]
    txns = E.parse_txns(t).persist(StorageLevel.MEMORY_AND_DISK)
    drain = E.parse_drain(t, seeds, txns).persist(StorageLevel.DISK_ONLY)
    views = small | {"seeds": seeds, "txns": txns, "drain": drain}
    fr = _frames(loaded.df, views, info)
    fr.persisted += [txns, drain]
    return fr


def _frames(hist: DataFrame, v: dict[str, DataFrame], meta: dict[str, Any]) -> E.EosFrames:
    return E.EosFrames(
        hist=hist,
        seeds=v["seeds"],
        poison=v["poison"],
        txns=v["txns"],
        drain=v["drain"],
        committed=v["committed"],
        fences=v["fences"],
        finals=v["finals"],
        n_out=int(meta["n_out"]),
        reads=[(int(p), bool(ok)) for p, ok in meta["reads"]],
        committed_map={int(p): int(o) for p, o in meta["committed_map"]},
        offsets_index=meta["offsets_index"],
        output_topic=meta["output_topic"],
        drain_op=meta["drain_op"],
    )
