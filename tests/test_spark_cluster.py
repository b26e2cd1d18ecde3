"""The checks on a real standalone Spark cluster (``python -m harness spark-lab``: a master
and two workers in containers, the store shared at the same path) give the same result as
the embedded ``local[*]`` session. Skipped without a Docker engine."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.substrate.backends import docker_engine_available

ROOT = Path(__file__).resolve().parent.parent
KEPT = ROOT / "tests" / "data" / "eos" / "eos-alo-607d3c.history.jsonl.gz"

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(not docker_engine_available(), reason="no Docker engine answers"),
]


@pytest.fixture(scope="module")
def spark_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    from harness.substrate.docker.engine import connect_engine
    from harness.substrate.sparklab import LABEL, lab_down, lab_up

    store = tmp_path_factory.mktemp("shared-store")
    url = lab_up(store, workers=2)
    yield url, store
    lab_down()
    assert not connect_engine().containers.list(all=True, filters={"label": LABEL})


def _judging(run_dir: Path, *extra: str) -> subprocess.Popen[str]:
    """``python -m checkers RUN_DIR`` started; :func:`_verdict_of` waits for its verdict."""
    return subprocess.Popen(
        [sys.executable, "-m", "checkers", str(run_dir), *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _verdict_of(proc: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode in (0, 1), err[-2000:]
    return dict(json.loads(out))


def _without_timings(value: Any) -> Any:
    """The result with what differs between any two checks of one history removed: wall
    times, and where the Spark session ran."""
    if isinstance(value, dict):
        return {
            k: _without_timings(v)
            for k, v in value.items()
            if not any(t in k for t in ("seconds", "_s", "elapsed", "engine", "spark_master"))
        }
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def test_a_spark_cluster_judges_a_stored_run_as_the_embedded_session_does(
    spark_lab: tuple[str, Path], spark: object
) -> None:
    """The check on the cluster (``python -m checkers RUN_DIR --spark-master URL``, as a
    user runs it) and the embedded one (the worker's session, in this process) go side by
    side: the cluster's executors wait on their containers most of the time."""
    from checkers.judge import judge_run_dir

    url, store = spark_lab
    runs = {}
    for where in ("embedded", "cluster"):
        run_dir = store / where
        run_dir.mkdir()
        with gzip.open(KEPT, "rb") as src, open(run_dir / "history.jsonl", "wb") as dst:
            shutil.copyfileobj(src, dst)
        runs[where] = run_dir
    judging = _judging(runs["cluster"], "--spark-master", url)
    try:
        embedded = judge_run_dir(runs["embedded"], engine="spark")  # not the Python engines
    finally:
        on_cluster = _verdict_of(judging)  # waited for (or killed) whatever happened here
    embedded = json.loads(json.dumps(embedded, default=str))
    assert embedded["valid"] is False  # at-least-once: duplicates to find, on both
    assert _without_timings(on_cluster) == _without_timings(embedded)
