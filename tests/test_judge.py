"""Judging a run directory side by side, prepared early, in a JVM warmed during the load.

The verdict must not depend on how it was computed: prepared while the logs are dumped or
from scratch, checks one after the other or side by side. And a warm-up must leave nothing
running, however it ends. These runs are small enough for the Python engines
(``tests/test_check_engines.py``): the tests of Spark's judgement ask for it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.judge import Judgement, RunDirUnusable, judge_run_dir
from history.synthetic_eos import generate
from history.synthetic_logdump import generate as generate_dump

ROOT = Path(__file__).resolve().parent.parent


def _synthetic_run(d: Path, ops: int = 2000) -> Path:
    d.mkdir(parents=True)
    generate(d / "history.jsonl", ops)
    (d / "evidence").mkdir()
    generate_dump(d / "evidence" / "logdump.jsonl", ops)
    return d


def _without_volatile(result: dict) -> dict:
    """The verdict without what says how it was computed (cache reuse)."""
    out = json.loads(json.dumps(result))
    for stats in (out.get("stats") or {}).values():
        stats.pop("parquet_cache_reused", None)
    return out


def test_a_prepared_judgement_gives_the_verdict_of_a_check_from_scratch(
    spark: object, tmp_path: Path
) -> None:
    run = _synthetic_run(tmp_path / "run")
    held = run / "evidence" / "held.jsonl"
    (run / "evidence" / "logdump.jsonl").rename(held)  # as while the cluster dumps its logs
    judgement = Judgement(run, engine="spark")
    judgement.prepare()
    assert judgement._prepared is not None
    judgement._prepared.join(timeout=300)
    views = json.loads((run / ".parquet" / "eos-views.json").read_text())
    assert views["views_format"]
    assert not (run / ".parquet" / "logdump").exists()  # the dump was not there yet
    held.rename(run / "evidence" / "logdump.jsonl")
    prepared = judgement.result()

    fresh = tmp_path / "fresh"
    shutil.copytree(run, fresh, ignore=shutil.ignore_patterns(".parquet", "results.json"))
    scratch = judge_run_dir(fresh, engine="spark")
    assert prepared["valid"] is True, prepared.get("errors")
    assert set(prepared["checkers"]) >= {"epoch_violation", "lost", "duplicate", "order"}
    assert _without_volatile(prepared) == _without_volatile(scratch)
    assert json.loads((run / "results.json").read_text()) == prepared


def test_a_planted_duplicate_is_found_by_the_concurrent_checks(
    spark: object, tmp_path: Path
) -> None:
    run = _synthetic_run(tmp_path / "run")
    lines = (run / "history.jsonl").read_text().splitlines()
    # The final read_committed read of one output partition shows its first record twice.
    for i, line in enumerate(lines):
        op = json.loads(line) if i else None
        if (
            op
            and op["f"] == "read"
            and op["type"] == "ok"
            and op["value"]["isolation"] == "read_committed"
            and len(op["value"]["records"]) > 1
        ):
            first = op["value"]["records"][0]
            op["value"]["records"].insert(1, first)
            lines[i] = json.dumps(op)
            break
    else:
        pytest.fail("the synthetic history has no final read")
    (run / "history.jsonl").write_text("\n".join(lines) + "\n")
    result = judge_run_dir(run, engine="spark")
    assert result["valid"] is False
    assert "duplicate" in result["bad_anomaly_types"], result["bad_anomaly_types"]


def test_unusable_input_is_one_line_and_recorded(spark: object, tmp_path: Path) -> None:
    run = _synthetic_run(tmp_path / "run")
    with open(run / "history.jsonl", "a") as fh:
        fh.write("not json\n")
        fh.write('{"index": 1}\n')  # not the last line: not a torn write
    with pytest.raises(RunDirUnusable, match=r"history.jsonl:\d+: line is not a JSON object"):
        Judgement(run, engine="spark").result()
    assert json.loads((run / "results.json").read_text())["valid"] == "unknown"


_WARM = """
import json, os, sys, time
from checkers import spark as S, warm as W
mode = sys.argv[1]
W.NICENESS = 0  # what is checked is the JVM's end, not the warm-up's yielding to a run
if mode == "complete":  # one round is a whole warm-up; "cancel" needs the rounds it cuts short
    W.WARMUP_ROUNDS = 1
else:  # finish() must wait out the round it stops, however long a loaded machine makes it
    W.FINISH_SECONDS = 500.0  # (the kill after FINISH_SECONDS has a test of its own below)
W.MAX_ROUNDS = W.WARMUP_ROUNDS  # "complete": nobody calls stop() here
w = W.prewarm()
deadline = time.monotonic() + 400
if mode == "cancel":
    while not w._warming.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)  # polling: the warm-up's queries have begun
    t0 = time.monotonic()
    w.finish()
    waited = time.monotonic() - t0
else:
    w._thread.join(timeout=400)
    waited = None
pid = S.jvm_pid()
alive = pid is not None and os.path.exists(f"/proc/{pid}")
w.close()
gone = pid is not None and not os.path.exists(f"/proc/{pid}")
print(json.dumps({"warmed": W._warmed.is_set(), "alive": alive, "gone": gone,
    "waited": waited, "session_after": S.active_session() is not None}))
"""


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["complete", "cancel"])
def test_a_warm_up_leaves_no_jvm_behind(mode: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", _WARM, mode],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["alive"] and got["gone"] and not got["session_after"], got
    if mode == "complete":
        assert got["warmed"], got
    else:
        # Stopped as soon as its queries began: finish() ended it after the round it was in,
        # before the three a warm-up takes, and the session it started is still there to use.
        assert not got["warmed"], got
    assert not list(tmp_path.glob("kh-warmup-*")), "the synthetic run was removed"


def test_a_warm_up_that_will_not_stop_has_its_session_ended(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A warm-up round that does not end must not hang the run (Ctrl-C once waited for ever on
    a hung query): after FINISH_SECONDS the session is killed, which frees the thread.
    Logic only: the hang and the kill are stand-ins here; test_nemesis_runs' Ctrl-C test met the
    real hang."""
    import threading

    from checkers import spark as S
    from checkers import warm as W

    freed = threading.Event()
    killed: list[bool] = []
    monkeypatch.setattr(W, "FINISH_SECONDS", 0.5)
    monkeypatch.setattr(S, "stop_spark", lambda kill: (killed.append(kill), freed.set()))
    w = W.Prewarm()
    w._thread = threading.Thread(target=freed.wait, daemon=True)
    w._thread.start()
    w.finish()
    assert killed == [True]
    assert not w._thread.is_alive()


def test_the_warm_up_goes_on_until_the_load_is_over(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Rounds go on past WARMUP_ROUNDS (the JIT keeps improving) until stop(); the process
    counts as warm after WARMUP_ROUNDS. Logic only: the session and the checks are stand-ins."""
    from checkers import judge as J
    from checkers import spark as S
    from checkers import warm as W

    rounds: list[Path] = []
    w = W.Prewarm()

    class Round:
        def __init__(self, run: Path, *, engine: str) -> None:
            assert engine == "spark"  # a warm-up on the Python engines would warm nothing
            self.run = run

        def result(self) -> dict[str, object]:
            rounds.append(self.run)
            if len(rounds) == W.WARMUP_ROUNDS + 2:
                w.stop()  # the load ends during this round
            return {"valid": True}

    monkeypatch.setattr(W, "_warmed", __import__("threading").Event())
    monkeypatch.setattr(S, "active_session", lambda: object())
    monkeypatch.setattr(J, "Judgement", Round)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(__import__("tempfile"), "tempdir", str(tmp_path))
    w.start()
    w._thread.join(timeout=60)  # ends by itself once stop() was called
    assert not w._thread.is_alive()
    assert len(rounds) == W.WARMUP_ROUNDS + 2 < W.MAX_ROUNDS
    assert W._warmed.is_set()
    assert not list(tmp_path.glob("kh-warmup-*")), "the synthetic run was removed"
