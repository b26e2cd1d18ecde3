"""A Spark JVM started and warmed up while a run's load goes on, so its verdict comes fast.

Why: a fresh JVM checks a 60 s run in 25-40 s on two cores, a warm one in 6-8 s; the difference
is starting the JVM and its first queries (class loading, the JIT compiler). None of that needs
the run's data, so :func:`prewarm` does it in a background thread while the run records its
history: it starts the session (at a lower CPU priority, so the cluster under test keeps the
cores it needs) and judges a small synthetic run (:mod:`history.synthetic_eos`,
:mod:`history.synthetic_logdump`) whose verdict is thrown away, round after round until the load
is over (:meth:`Prewarm.stop`): the JIT compiler keeps improving for many rounds, and the rounds
only use what the cluster leaves idle. A process warms its JVM once; a session someone else
started (a campaign's, a test session's) is warmed and left running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Callable

log = logging.getLogger("checkers.warm")

#: Ops of the synthetic history (and records of the dump): enough to run every query of the
#: checks once, small enough to cost a few seconds of a warm JVM.
WARMUP_OPS = 3000
#: Checks of it before the JVM counts as warm: the JIT compiler keeps improving over the first
#: few (measured, the first real check after one round took 8.9 s + 3.6 s of conversion, after
#: three 5.9 s + 2.6 s).
WARMUP_ROUNDS = 3
#: Checks of it at most: the rounds go on until the load is over, and the JIT keeps improving
#: well past three (a 60 s run's checks after its log dump, in rounds of the real check on
#: 2 cores: 8.5 s, 6.9, 7.0, 9.3, 7.3, 5.3, 5.2, 5.0 s). A bound, for a warm-up nobody stops.
MAX_ROUNDS = 12
#: Nice value of the thread that starts the JVM: every JVM thread inherits it.
NICENESS = 10
#: How often a warm-up that waits until Spark is ``needed`` asks again (seconds).
NEEDED_POLL_S = 2.0
#: How long :meth:`Prewarm.finish` waits for the warm-up's current round (a few seconds; the
#: first, cold, up to about twenty) before it ends the session.
FINISH_SECONDS = 60.0

_warmed = threading.Event()  # this process's JVM has been warmed


class Prewarm:
    """The background warm-up; :meth:`finish` before judging, :meth:`close` at the end."""

    def __init__(self, master: str | None = None, needed: Callable[[], bool] | None = None) -> None:
        self.master = master
        self.needed = needed
        self._cancel = threading.Event()
        self._warming = threading.Event()  # the warm-up's queries have started
        self._started_spark = False
        self._thread = threading.Thread(target=self._run, name="spark-prewarm", daemon=True)

    def start(self) -> Prewarm:
        self._thread.start()
        return self

    def _run(self) -> None:
        from checkers.spark import active_session, start_spark

        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
        if self.needed is not None:
            while not self.needed():
                if self._cancel.wait(NEEDED_POLL_S):
                    return  # the load ended before Spark was needed: no JVM at all
        try:
            if active_session() is None:
                start_spark(self.master)
                self._started_spark = True
            if _warmed.is_set() or self._cancel.is_set():
                return
            self._warm_up()
        except Exception as e:  # the verdict starts its own session and says what failed
            log.info("warming Spark up failed: %s", e)

    def _warm_up(self) -> None:
        from checkers.judge import Judgement
        from checkers.spark import active_session, scratch_dir
        from history.synthetic_eos import generate
        from history.synthetic_logdump import generate as generate_dump

        spark = active_session()
        if spark is None:
            return
        self._warming.set()
        tmp = scratch_dir("kh-warmup-")
        try:
            generate(tmp / "history.jsonl", WARMUP_OPS)
            (tmp / "evidence").mkdir()
            generate_dump(tmp / "evidence" / "logdump.jsonl", WARMUP_OPS)
            for done in range(MAX_ROUNDS):
                if self._cancel.is_set():
                    break
                shutil.rmtree(tmp / ".parquet", ignore_errors=True)
                # On Spark whatever its size: a run this small would go to the Python engines.
                Judgement(tmp, engine="spark").result()
                if done + 1 == WARMUP_ROUNDS:
                    _warmed.set()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def stop(self) -> None:
        """The load is over: end the warm-up after its current round, without waiting for it.

        The runner calls it when the faults end, so the last round (5-10 s on a busy machine)
        ends during the drain and the final reads, not in the verdict's time; :meth:`finish`
        then finds the thread done, or waits for it."""
        self._cancel.set()

    def finish(self) -> None:
        """Stop warming up (the real check is next) and wait until the session is there.

        The warm-up stops after its current round; its queries are not cancelled. Cancelling
        them (``cancelAllJobs``) left a check's job hung in the JVM, often enough to fail CI:
        the run then waited on it for ever. A round that still has not ended after
        :data:`FINISH_SECONDS` has its session killed; the check starts its own.
        """
        self._cancel.set()
        if self._thread.ident is None:
            return
        self._thread.join(timeout=FINISH_SECONDS)
        if self._thread.is_alive():
            from checkers.spark import stop_spark

            log.warning("the Spark warm-up did not stop in %ss; ending its session", FINISH_SECONDS)
            stop_spark(kill=True)
            self._started_spark = False
            self._thread.join(timeout=FINISH_SECONDS)

    def close(self) -> None:
        """Stop the session if this warm-up started it (JVM included)."""
        self.finish()
        if self._started_spark:
            from checkers.spark import stop_spark

            stop_spark()
            self._started_spark = False


def prewarm(master: str | None = None, needed: Callable[[], bool] | None = None) -> Prewarm:
    """Start and warm this process's Spark session in the background; with ``needed``, only
    once it answers True (asked every :data:`NEEDED_POLL_S` until the load is over): a run
    small enough for the Python engines (:data:`checkers.judge.PYTHON_MAX_BYTES`) never
    needs the JVM, whose start would only take CPU from the cluster under test."""
    return Prewarm(master, needed).start()


__all__ = [
    "FINISH_SECONDS",
    "MAX_ROUNDS",
    "NEEDED_POLL_S",
    "NICENESS",
    "WARMUP_OPS",
    "WARMUP_ROUNDS",
    "Prewarm",
    "prewarm",
]
