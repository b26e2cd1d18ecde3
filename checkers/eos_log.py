"""The broker log dump of an eos run, joined with its history for the Spark eos checks.

Why a module of its own: three eos checks read the dump (``aborted-read``: a drained record
whose transaction the log shows aborted or open; ``committed-in-later-transaction``: which
transaction's marker committed a record; ``hanging-transaction``: what holds a stuck LSO),
and each example that involves a logged position carries that position's evidence
(:func:`checkers.log_rules.position_evidence`). Loading and preparing the dump is the costly
part, so it is done once per check run and dropped with the run's frames
(:meth:`checkers.eos_frames.EosFrames.release`). :mod:`checkers.eos_pyref` has the same join
in plain Python (``RunLog``), and the tests demand equal examples.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel

from checkers import log_rules as R
from checkers.load import load_logdump, logdump_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from checkers.eos_frames import EosFrames
    from checkers.log_evidence import Evidence

#: Where an eos run's log join is kept among the frames' per-run extras.
_KEY = "log"
#: Set among the extras of frames checked before the dump exists (:func:`defer_log`).
_DEFERRED = "log-deferred"


class LogNotYet(Exception):
    """A check asked for the broker log dump while it is still being written."""


def defer_log(fr: EosFrames) -> None:
    """Make every later :func:`run_log` on ``fr`` raise :class:`LogNotYet`: the checks that
    need no dump can then run while the cluster is still stopping, and the ones that do are
    told so instead of judging without it."""
    fr.extras[_DEFERRED] = True


#: A drained or watched position: (topic, partition, offset).
Where = tuple[str, int, int]


class EosLog:
    """The run's prepared dump, its positions per topic, and evidence for a few positions."""

    def __init__(self, ev: Evidence) -> None:
        self.ev = ev
        self._positions: dict[str, DataFrame] = {}
        self._lock = threading.Lock()

    def positions(self, topic: str) -> DataFrame:
        """:func:`checkers.log_evidence.log_positions` of ``topic``, persisted for the run."""
        from checkers.log_evidence import log_positions

        with self._lock:
            if topic not in self._positions:
                df = log_positions(self.ev, topic).persist(StorageLevel.MEMORY_AND_DISK)
                self.ev._persisted.append(df)
                self._positions[topic] = df
            return self._positions[topic]

    def marker_times(self, topic: str) -> DataFrame:
        """(node, partition, offset, create_time) of every marker of ``topic``: when the
        broker wrote it, for the checks that compare it with the history's clock."""
        from pyspark.sql import functions as F

        full = self.ev.full
        return full.filter(
            (F.col("kind") == "data") & (F.col("topic") == topic) & F.col("isControl")
        ).select("node", "partition", "offset", "create_time")

    def evidence(self, where: list[Where]) -> dict[Where, dict[str, Any]]:
        """The ``log`` evidence of each position the dump holds (absent ones are left out)."""
        from pyspark.sql import functions as F

        from checkers.log_evidence import pos_of, resolve_records

        found: dict[Where, R.Pos] = {}
        for topic in sorted({w[0] for w in where}):
            want = sorted({(p, o) for t, p, o in where if t == topic})
            if not want:
                continue
            keys = self.ev.spark.createDataFrame(want, "partition int, offset long")
            hits = self.positions(topic).join(F.broadcast(keys), ["partition", "offset"])
            for r in hits.collect():
                found[(topic, int(r["partition"]), int(r["offset"]))] = pos_of(r)
        sels = [s for w, p in found.items() for s in R.position_selectors(*w, p)]
        resolved = resolve_records(self.ev, sels)
        return {w: R.position_evidence(*w, p, resolved) for w, p in found.items()}

    def release(self) -> None:
        self.ev.release()
        self._positions.clear()


def run_log(fr: EosFrames, spark: SparkSession, run_dir: Path) -> EosLog | None:
    """The run's :class:`EosLog` (built on first use), or None if the run has no dump."""
    with fr.lock:
        if fr.extras.get(_DEFERRED):
            raise LogNotYet(str(run_dir))
        if _KEY in fr.extras:
            return fr.extras[_KEY]
        from checkers.log_evidence import prepare

        log = None
        if logdump_path(run_dir).is_file():
            log = EosLog(prepare(load_logdump(spark, run_dir).df))
        fr.extras[_KEY] = log
        return log


__all__ = ["EosLog", "LogNotYet", "Where", "defer_log", "run_log"]
