"""The broker log dump of an eos run, joined with its history for the Spark eos checks.

Why a module of its own: three eos checks read the dump (``aborted-read``: a drained record
whose transaction the log shows aborted or open; ``committed-in-later-transaction``: which
transaction's marker committed a record; ``hanging-transaction``: what holds a stuck LSO),
and each example that involves a logged position carries that position's evidence
(:func:`checkers.logdump.rules.position_evidence`). Loading and preparing the dump is the costly
part, so it is done once per check run and dropped with the run's frames
(:meth:`checkers.eos.frames.EosFrames.release`). :mod:`checkers.eos.pyref` has the same join
in plain Python (``RunLog``), and the tests demand equal examples.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from checkers.load import load_logdump, logdump_path
from checkers.logdump.evidence import PositionLog, Where, prepare

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from checkers.eos.frames import EosFrames

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


def run_log(fr: EosFrames, spark: SparkSession, run_dir: Path) -> PositionLog | None:
    """The run's :class:`PositionLog` (built on first use), or None if the run has no dump."""
    with fr.lock:
        if fr.extras.get(_DEFERRED):
            raise LogNotYet(str(run_dir))
        if _KEY in fr.extras:
            return fr.extras[_KEY]
        log = None
        if logdump_path(run_dir).is_file():
            log = PositionLog(prepare(load_logdump(spark, run_dir).df))
        fr.extras[_KEY] = log
        return log


__all__ = ["LogNotYet", "PositionLog", "Where", "defer_log", "run_log"]
