"""What every checker family does alike around its judgement: find the run's history,
refuse a bad example limit, and judge by the engine asked for.

A family judges its facts twice over, on Spark and by a Python reference, and the two must
agree (the tests hold them equal). How a failure of each is taken differs on purpose: a
Spark failure (a JVM that would not start, a job that died) says nothing about the run, so
the verdict is unknown; a failure of the reference is a bug in this project, raised so the
caller (:mod:`checkers.judge`) can ask Spark instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from checkers.spark import spark_error, spark_session
from history.logdump import CheckerInputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

F = TypeVar("F")
T = TypeVar("T")

#: The engines a family judges with, Spark and the Python reference: the names a part
#: records for the one that judged it (``engine``) and ``--engine`` takes
#: (:data:`checkers.judge.ENGINES`).
SPARK, PYTHON = "spark", "python"
ENGINES = (SPARK, PYTHON)


def history_of(run_dir: str | Path) -> Path:
    """A stored run's merged history, or a one-line :class:`CheckerInputError`."""
    source = Path(run_dir) / "history.jsonl"
    if not source.is_file():
        raise CheckerInputError(f"{source}: no such history")
    return source


def check_max_examples(max_examples: int) -> None:
    """Refuse a limit that is not a whole number >= 0 (both engines, alike)."""
    if type(max_examples) is not int or max_examples < 0:
        raise ValueError("max_examples must be a non-negative integer")


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise ValueError(f"no engine named {engine!r}")


def judge_with(
    engine: str,
    facts: F,
    max_examples: int,
    python: Callable[[F, int], T],
    on_spark: Callable[[SparkSession, F, int], T],
    spark: SparkSession | None = None,
) -> tuple[T | None, str | None]:
    """``(found, None)`` by ``engine`` (on ``spark``, else in a session of its own), or
    ``(None, error)`` when Spark failed; a failure of the reference is raised."""
    check_engine(engine)
    if engine == PYTHON:
        return python(facts, max_examples), None
    try:
        if spark is not None:
            return on_spark(spark, facts, max_examples), None
        with spark_session() as session:
            return on_spark(session, facts, max_examples), None
    except Exception as e:
        return None, str(spark_error(e))
