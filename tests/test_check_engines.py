"""Which engine judges a run directory, and that it does not change the verdict.

A check whose plain-Python reference gives the whole same part as its Spark engine
(``RunDirCheck.python``) judges a small run on it, without a JVM (:mod:`checkers.judge`,
``engine="auto"``); a big run, a Spark cluster asked for, ``engine="spark"`` and a check
without a Python engine go to Spark. The logic tests here replace Spark by a stand-in; the
``spark`` ones judge kept real runs on both engines and demand equal verdicts, examples
included, once what says how they were computed is removed.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from checkers import judge as J
from checkers import suites
from checkers.judge import Judgement, judge_run_dir

ROOT = Path(__file__).resolve().parent.parent
EOS = ROOT / "tests" / "data" / "eos"
STREAMS = ROOT / "tests" / "data" / "streams"
DUMP = ROOT / "tests" / "data" / "logdump" / "real_small.jsonl"
#: Whole real runs (history and log dump), kept beside the project when they are there.
SHARED = ROOT.parent / "shared" / "runs"
#: What a whole run's check reads (and the verdict it was given), beside its log dump.
TOP_FILES = ("history.jsonl", "config.json", "results.json")

HISTORIES = sorted(p.name.removesuffix(".history.jsonl.gz") for p in EOS.glob("*.history.jsonl.gz"))


def kept_run(tmp: Path, name: str, *, dump: bool = False, data: Path = EOS) -> Path:
    """A kept history (and the kept small dump) as a fresh run directory."""
    run = tmp / name
    run.mkdir(parents=True)
    with gzip.open(data / f"{name}.history.jsonl.gz", "rb") as src:
        (run / "history.jsonl").write_bytes(src.read())
    if dump:
        (run / "evidence").mkdir()
        shutil.copy(DUMP, run / "evidence" / "logdump.jsonl")
    return run


def without_how(value: Any) -> Any:
    """A verdict without what says how it was computed: the engines, wall times, and whether
    the Spark engine reused its own Parquet cache."""
    if isinstance(value, dict):
        return {
            k: without_how(v)
            for k, v in value.items()
            if "engine" not in k and k not in ("seconds", "elapsed", "parquet_cache_reused")
        }
    if isinstance(value, list):
        return [without_how(v) for v in value]
    return value


# ------------------------------------------------------------------------------------------
# Choosing the engine (logic: Spark is a stand-in)


class _Session:
    """Stands in for a SparkSession: the checks given one are stand-ins too."""

    def newSession(self) -> _Session:  # SparkSession's name
        return self


def _stand_ins(monkeypatch: pytest.MonkeyPatch, fail_python: bool = False) -> list[tuple[str, str]]:
    """Every check's engines replaced by ones that say which ran; Spark "starts" for free."""
    ran: list[tuple[str, str]] = []
    real = suites.checks_for

    def spark_run(name: str) -> Any:
        def run(ctx: suites.RunContext) -> dict[str, Any]:
            assert isinstance(ctx.spark, _Session)
            ran.append((name, "spark"))
            return {"checkers": {name: {"valid": True}}}

        return run

    def python_run(name: str) -> Any:
        def run(ctx: suites.RunContext) -> dict[str, Any]:
            assert ctx.spark is None
            if fail_python:
                raise RuntimeError("a bug in the reference")
            ran.append((name, "python"))
            return {"checkers": {name: {"valid": True}}}

        return run

    def checks_for(run_dir: Path, config: dict[str, Any]) -> list[suites.RunDirCheck]:
        return [
            replace(
                c,
                run=spark_run(c.name),
                python=python_run(c.name) if c.python else None,
                prepare=None,
            )
            for c in real(run_dir, config)
        ]

    monkeypatch.setattr(suites, "checks_for", checks_for)
    monkeypatch.setattr(Judgement, "_spark", lambda self: _Session())
    return ran


@pytest.fixture
def small_run(tmp_path: Path) -> Path:
    """A real eos history (170 ops) with a real small dump: well under the threshold."""
    return kept_run(tmp_path, "eos-java-050454", dump=True)


@pytest.fixture(autouse=True)
def _no_master(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster named in the environment would make every check go to Spark."""
    from checkers.spark import ENV_MASTER

    monkeypatch.delenv(ENV_MASTER, raising=False)


def test_the_checks_with_a_python_engine_are_those_held_equal_to_spark() -> None:
    """Each family whose tests compare its engines' whole results (tests/test_eos_checks.py,
    test_log_evidence.py, test_connect_checker.py, test_streams_checks.py,
    test_share_checker.py, test_offsets_checker.py, and the judgements below); the queue suite
    has no Spark engine."""
    checks = [suites.EVIDENCE, *suites.SUITES.values()]
    with_python = {c.name for c in checks if c.python is not None}
    assert with_python == {"log_evidence", "eos", "connect", "streams", "share", "offsets"}
    assert not suites.SUITES["queue"].spark


def test_auto_judges_a_small_run_on_python_and_a_big_one_on_spark(
    small_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _stand_ins(monkeypatch)
    size = Judgement(small_run).input_bytes()
    assert size == sum(p.stat().st_size for p in small_run.rglob("*.jsonl"))
    monkeypatch.setattr(J, "PYTHON_MAX_BYTES", size + 1)
    got = judge_run_dir(small_run)
    assert sorted(ran) == [("eos", "python"), ("log_evidence", "python")]
    assert got["engines"] == {"log_evidence": "python", "eos": "python"}
    ran.clear()
    monkeypatch.setattr(J, "PYTHON_MAX_BYTES", size)  # not below: Spark
    got = judge_run_dir(small_run)
    assert sorted(ran) == [("eos", "spark"), ("log_evidence", "spark")]
    assert got["engines"] == {"log_evidence": "spark", "eos": "spark"}


def test_the_engine_asked_for_is_used_and_a_cluster_means_spark(
    small_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from checkers.spark import ENV_MASTER

    _stand_ins(monkeypatch)
    monkeypatch.setattr(J, "PYTHON_MAX_BYTES", 1)  # every run is big
    assert judge_run_dir(small_run, engine="python")["engines"]["eos"] == "python"
    assert judge_run_dir(small_run, engine="spark")["engines"]["eos"] == "spark"
    monkeypatch.setattr(J, "PYTHON_MAX_BYTES", 1 << 40)  # every run is small
    for engine in J.ENGINES:  # a cluster asked for: Spark, whatever the engine
        got = judge_run_dir(small_run, spark_master="spark://nowhere:7077", engine=engine)
        assert set(got["engines"].values()) == {"spark"}, engine
    monkeypatch.setenv(ENV_MASTER, "spark://nowhere:7077")
    assert set(judge_run_dir(small_run, engine="python")["engines"].values()) == {"spark"}


def test_a_check_without_a_python_engine_goes_to_spark(
    small_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _stand_ins(monkeypatch)
    eos = suites.SUITES["eos"]
    monkeypatch.setitem(suites.SUITES, "eos", replace(eos, python=None))
    got = judge_run_dir(small_run, engine="python")
    assert sorted(ran) == [("eos", "spark"), ("log_evidence", "python")]
    assert got["engines"] == {"log_evidence": "python", "eos": "spark"}


def test_a_python_engine_that_fails_leaves_the_check_to_spark(
    small_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _stand_ins(monkeypatch, fail_python=True)
    got = judge_run_dir(small_run, engine="python")
    assert sorted(ran) == [("eos", "spark"), ("log_evidence", "spark")]
    assert got["valid"] is True and set(got["engines"].values()) == {"spark"}


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="engine must be one of auto, spark, python"):
        Judgement(".", engine="jvm")


def test_prepare_converts_nothing_for_checks_judged_on_python(
    small_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared: list[str] = []
    eos = suites.SUITES["eos"]
    spy = replace(eos, prepare=lambda ctx: prepared.append(ctx.run_dir.name))
    monkeypatch.setitem(suites.SUITES, "eos", spy)
    monkeypatch.setattr(Judgement, "_spark", lambda self: _Session())
    judgement = Judgement(small_run)
    judgement.prepare()
    assert judgement._prepared is None and prepared == []
    judgement = Judgement(small_run, engine="spark")
    judgement.prepare()
    assert judgement._prepared is not None
    judgement._prepared.join(timeout=60)
    assert prepared == [small_run.name]


def test_a_small_run_is_judged_without_starting_a_jvm(small_run: Path) -> None:
    """In a fresh interpreter, as ``python -m checkers RUN_DIR`` judges: pyspark is not even
    imported, and no session is left (none was running before)."""
    code = (
        "import json, sys\n"
        "from checkers import spark as S\n"
        "from checkers.judge import judge_run_dir\n"
        "r = judge_run_dir(sys.argv[1])\n"
        "print(json.dumps({'engines': r['engines'], 'valid': r['valid'],\n"
        "    'pyspark': 'pyspark' in sys.modules, 'session': S.active_session() is not None,\n"
        "    'launches': S.jvm_launches}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(small_run)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in __import__("os").environ.items() if "SPARK" not in k},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["engines"] == {"log_evidence": "python", "eos": "python"}
    assert got["valid"] is True
    assert not got["pyspark"] and not got["session"] and got["launches"] == 0


def test_the_cli_takes_an_engine_and_refuses_others_in_one_line(
    small_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from checkers.cli import main

    assert main([str(small_run), "--engine", "python"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is True and out["engines"]["eos"] == "python"
    with pytest.raises(SystemExit) as e:
        main([str(small_run), "--engine", "jvm"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--engine: invalid choice: 'jvm'" in err[0], err


def spoiled(tmp: Path, how: str) -> Path:
    """A kept run with unusable input: a line of its history or of its dump malformed, or an
    empty history."""
    run = kept_run(tmp, "eos-java-050454", dump=True)
    for name, at, line in (("history", 3, "not json"), ("dump", 1, "{nope"), ("empty", 0, "")):
        if how == name:
            path = run / ("evidence/logdump.jsonl" if name == "dump" else "history.jsonl")
            lines = path.read_text().splitlines()
            lines[at:] = [line, *lines[at + 1 :]] if line else []
            path.write_text("".join(f"{ln}\n" for ln in lines))
    return run


#: What each spoiled run is refused with (after the run directory's path).
UNUSABLE = {
    "history": "/history.jsonl:4: line is not a JSON object: 'not json'",
    "dump": "/evidence/logdump.jsonl:2: not valid JSON: '{nope'",
    "empty": "/history.jsonl: empty history (no header line)",
}


@pytest.mark.parametrize("how", sorted(UNUSABLE))
def test_unusable_input_is_refused_by_the_python_engines_in_one_line(
    tmp_path: Path, how: str
) -> None:
    run = spoiled(tmp_path, how)
    with pytest.raises(J.RunDirUnusable) as e:
        judge_run_dir(run)
    assert str(e.value) == f"{run}{UNUSABLE[how]}"
    assert json.loads((run / "results.json").read_text())["valid"] == "unknown"


# ------------------------------------------------------------------------------------------
# Both engines on real runs (Spark)


def both(run: Path, tmp: Path) -> dict[str, Any]:
    """The run judged on each engine, each on a copy of its own (the Spark engine's caches
    must not meet the other); the two verdicts must be equal."""
    on: dict[str, dict[str, Any]] = {}
    for engine in ("python", "spark"):
        copy = tmp / f"{run.name}-{engine}"
        shutil.copytree(run, copy)
        on[engine] = json.loads(json.dumps(judge_run_dir(copy, engine=engine), default=str))
        assert set(on[engine]["engines"].values()) == {engine}, on[engine]["engines"]
    assert without_how(on["python"]) == without_how(on["spark"])
    return on["python"]


@pytest.mark.spark
@pytest.mark.parametrize("how", sorted(UNUSABLE))
def test_unusable_input_is_refused_alike_by_both_engines(
    spark: Any, tmp_path: Path, how: str
) -> None:
    """The message names the file and the line, whichever engine met it."""
    run = spoiled(tmp_path, how)
    with pytest.raises(J.RunDirUnusable) as e:
        judge_run_dir(run, engine="spark")
    assert str(e.value) == f"{run}{UNUSABLE[how]}"


@pytest.mark.spark
@pytest.mark.parametrize("name", HISTORIES)
def test_a_kept_history_gets_one_verdict_on_both_engines(
    spark: Any, tmp_path: Path, name: str
) -> None:
    got = both(kept_run(tmp_path / "src", name), tmp_path)
    assert got["valid"] in (True, False)
    assert "errors" not in got, got.get("errors")  # two engines failing alike is no agreement


@pytest.mark.spark
def test_a_kept_history_with_a_dump_gets_one_verdict_on_both_engines(
    spark: Any, tmp_path: Path
) -> None:
    got = both(kept_run(tmp_path / "src", "eos-alo-607d3c", dump=True), tmp_path)
    assert got["valid"] is False and "duplicate" in got["bad_anomaly_types"]
    assert set(got["checkers"]) >= {"epoch_violation", "hanging_in_log", "duplicate"}


@pytest.mark.spark
def test_a_dump_alone_gets_one_verdict_on_both_engines(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "src" / "dump-only"
    (run / "evidence").mkdir(parents=True)
    shutil.copy(DUMP, run / "evidence" / "logdump.jsonl")
    got = both(run, tmp_path)
    assert got["valid"] is True and got["stats"]["log_evidence"]["records"] > 0


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(p.name.split(".")[0] for p in STREAMS.glob("*.gz")))
def test_a_kept_streams_history_gets_one_verdict_on_both_engines(
    spark: Any, tmp_path: Path, name: str
) -> None:
    run = kept_run(tmp_path / "src", name, data=STREAMS)
    (run / "config.json").write_text(json.dumps({"checker_suites": ["streams"]}))
    got = both(run, tmp_path)
    assert list(got["checkers"]) == ["streams"]


@pytest.mark.spark
def test_a_planted_connect_run_with_a_dump_gets_one_verdict_on_both_engines(
    spark: Any, tmp_path: Path
) -> None:
    from tests.test_connect_checker import planted

    s, counts, _f = planted(5, ["zombie-task-write", "duplicate"], tasks=4)
    run = s.write(tmp_path / "src" / "connect", dump=True)
    (run / "config.json").write_text(json.dumps({"checker_suites": ["connect"]}))
    got = both(run, tmp_path)
    assert got["valid"] is False and set(counts) <= set(got["anomalies"])


@pytest.mark.spark
@pytest.mark.parametrize("seed", [7])
def test_a_messy_share_run_gets_one_verdict_on_both_engines(
    spark: Any, tmp_path: Path, seed: int
) -> None:
    """Every share type at once, examples included: the one comparison of the share
    engines on a messy history (tests/test_share_checker.py plants them one by one)."""
    from tests.test_share_checker import messy

    both(messy(seed)(tmp_path / "src" / f"share-{seed}"), tmp_path)


@pytest.mark.spark
@pytest.mark.parametrize(
    "archive", sorted(p.name for p in SHARED.glob("*.tar.gz")) if SHARED.is_dir() else []
)
def test_a_whole_real_run_gets_one_verdict_on_both_engines(
    spark: Any, tmp_path: Path, archive: str
) -> None:
    """Main-job-sized runs (19 to 33 MB of history and dump), unpacked without their logs."""
    with tarfile.open(SHARED / archive) as tar:
        members = [
            m
            for m in tar.getmembers()
            if m.name.endswith("/evidence/logdump.jsonl")
            or (m.name.count("/") == 1 and m.name.split("/")[1] in TOP_FILES)
        ]
        tar.extractall(tmp_path / "src", members=members, filter="data")
    (run,) = (tmp_path / "src").iterdir()
    stored = json.loads((run / "results.json").read_text())
    (run / "results.json").unlink()
    assert both(run, tmp_path)["valid"] == stored["valid"]
