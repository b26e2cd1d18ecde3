"""The workload registry: a workload declared once is found by every command line and reader.

A fake workload registered here (its spec, a driver that records one op, and a checker
suite under its name) must be parsed by ``python -m harness run``, named by ``test_name``,
run by the runner, written into ``config.json`` with its checker suites, dispatched to its
suite by ``python -m checkers RUN_DIR``, and spelled back by the report's reproduce command;
no list of workloads anywhere else is touched.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from checkers import suites
from checkers.judge import judge_run_dir
from common.errors import HarnessError
from harness.cli import build_parser
from harness.report.data import load_run
from harness.report.render import repro_command
from harness.run import workloads
from harness.run.arguments import options_from_args
from harness.run.runner import execute, write_config
from history import Recorder
from tests.fake_clients import NoClients
from workloads.drive import Drive, Outcome, Workload
from workloads.spec import Option, WorkloadSpec

DATA = Path(__file__).parent / "data" / "queue"


@dataclass
class FakeOptions:
    seed: int = 0
    size: int = 1
    flavor: str = "plain"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> FakeOptions:
        return cls(**dict(raw))

    def validate(self) -> None:
        if self.size < 1:
            raise HarnessError("--fake-size must be at least 1")

    def name_parts(self) -> list[str]:
        return [self.flavor, f"x{self.size}"]


def _drive(d: Drive) -> Outcome:
    (d.run_dir / "processes").mkdir()
    with d.faults(None, NoClients()), Recorder(d.run_dir / "processes" / "0.jsonl", 0) as rec:
        rec.invoke("write", d.options.workload_options.size)
        rec.ok("write", d.options.workload_options.size)
    return Outcome(True, {"fake": 1})


FAKE = Workload(
    WorkloadSpec(
        name="fake",
        options_type=FakeOptions,
        cli=(
            Option("--fake-size", "size", "how many", int),
            Option("--flavor", "flavor", choices=("plain", "spicy")),
        ),
        checker_suites=("fake-suite",),
    ),
    _drive,
)


def _fake_suite(ctx: suites.RunContext) -> dict[str, Any]:
    ops = [json.loads(line) for line in (ctx.run_dir / "history.jsonl").read_text().splitlines()]
    writes = [o for o in ops if o.get("f") == "write" and o.get("type") == "ok"]
    size = ctx.workload_options["size"]
    return {"checkers": {"fake-check": {"valid": len(writes) == 1, "seen": size}}}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Workload]:
    workloads.register(FAKE)
    monkeypatch.setitem(
        suites.SUITES,
        "fake-suite",
        suites.RunDirCheck("fake-suite", lambda d: True, _fake_suite, spark=False),
    )
    try:
        yield FAKE
    finally:
        workloads.unregister("fake")


def _args(*argv: str) -> Any:
    return build_parser().parse_args(["run", *argv])


def test_cli_parses_a_registered_workload_and_names_its_test(fake: Workload) -> None:
    options = options_from_args(
        _args("--workload", "fake", "--fake-size", "3", "--flavor", "spicy", "--seed", "7")
    )
    assert options.workload_options == FakeOptions(seed=7, size=3, flavor="spicy")
    assert options.test_name == "fake-spicy-x3"
    # Flags not given keep the options dataclass's own defaults.
    assert options_from_args(_args("--workload", "fake", "--seed", "1")).workload_options == (
        FakeOptions(seed=1)
    )


def test_a_flag_of_another_workload_is_refused(fake: Workload) -> None:
    with pytest.raises(HarnessError, match="--sub-via: not an option of --workload fake"):
        options_from_args(_args("--workload", "fake", "--sub-via", "assign"))
    with pytest.raises(HarnessError, match="--fake-size: not an option of --workload eos"):
        options_from_args(_args("--workload", "eos", "--fake-size", "2"))
    with pytest.raises(HarnessError, match="at least 1"):
        options_from_args(_args("--workload", "fake", "--fake-size", "0"))


class _NoCluster:
    run_id = "fake-run"


def test_runner_checkers_and_report_find_a_registered_workload(
    fake: Workload, tmp_path: Path
) -> None:
    options = options_from_args(_args("--workload", "fake", "--fake-size", "4", "--seed", "3"))
    run_dir = tmp_path / "run"
    told: list[bool] = []  # load_over: once, when the faults end (before the history merge)
    over = lambda: told.append((run_dir / "history.jsonl").exists())  # noqa: E731
    result = execute(_NoCluster(), options, run_dir, load_over=over)  # type: ignore[arg-type]
    assert result.drained and result.stats == {"fake": 1} and result.summary is None
    assert told == [False]
    config = json.loads((run_dir / "config.json").read_text())
    assert config["workload"] == "fake" and config["checker_suites"] == ["fake-suite"]
    assert config["workload_options"] == {"seed": 3, "size": 4, "flavor": "plain"}
    assert config["test_name"] == "fake-plain-x4"

    verdict = judge_run_dir(run_dir)
    assert verdict["valid"] is True
    assert verdict["checkers"] == {"fake-check": {"valid": True, "seen": 4}}
    assert json.loads((run_dir / "results.json").read_text()) == verdict

    repro = repro_command(load_run(run_dir))
    assert "--workload fake --fake-size 4 --flavor plain" in repro
    assert "--variant" not in repro and "--sub-via" not in repro
    # The command it prints parses back to the same options.
    argv = repro.split()[3:]
    assert options_from_args(build_parser().parse_args(argv)).workload_options == (
        options.workload_options
    )


def test_checkers_refuse_a_suite_they_do_not_have(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text("")
    (tmp_path / "config.json").write_text(json.dumps({"checker_suites": ["nope"]}))
    with pytest.raises(Exception, match="no checker suite named nope"):
        judge_run_dir(tmp_path)


def _queue_run_dir(tmp_path: Path, options: dict[str, Any], history: bool = True) -> Path:
    from harness.run.options import RunOptions
    from workloads.queue.options import QueueOptions

    run_dir = tmp_path / "queue-run"
    run_dir.mkdir()
    if history:  # a Jepsen-shaped array: the queue checker reads it, the report does not
        shutil.copy(DATA / "clean_assign.json", run_dir / "history.jsonl")
    run = workloads.complete(
        RunOptions(workload="queue", workload_options=QueueOptions(**options), seed=5)
    )
    write_config(run_dir, run, {})
    return run_dir


def test_checkers_recheck_a_queue_run_dir_by_its_config(tmp_path: Path) -> None:
    """No Spark needed: the queue suite is pure Python, and a queue run dir without a log
    dump is judged by it alone; the verdict names the checker ``queue``."""
    from checkers.cli import main

    run_dir = _queue_run_dir(tmp_path, {"sub_via": "assign"})
    assert main([str(run_dir)]) == 0
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True and list(results["checkers"]) == ["queue"]


def test_queue_reproduce_command_has_queue_flags_only(tmp_path: Path) -> None:
    options = {"sub_via": "subscribe", "clients": 2, "txn": False}
    run_dir = _queue_run_dir(tmp_path, options, history=False)
    repro = repro_command(load_run(run_dir))
    assert "--workload queue --sub-via subscribe --processors 2 --no-txn" in repro
    assert "--client python" in repro  # the queue workload has a --client of its own
    for eos_flag in ("--variant", "--values", "--txn-size", "--partitions"):
        assert eos_flag not in repro
    argv = repro.split()[3:]
    parsed = options_from_args(build_parser().parse_args(argv))
    assert (parsed.workload_options.sub_via, parsed.workload_options.clients) == ("subscribe", 2)
    assert parsed.workload_options.txn is False and parsed.test_name == "queue-notxn-subscribe"


def test_queue_figures_count_each_value_once() -> None:
    """Consumers share keys and the final reader reads everything again: the throughput
    figure counts a value at its first poll, so the backlog (sent - polled) ends at 0."""
    from workloads.queue.supervisor import SPEC

    ops = [
        {"process": 0, "type": "ok", "f": "send", "value": [["send", 1, [0, 10]]]},
        {"process": 1, "type": "ok", "f": "txn", "value": [["send", 2, [0, 11]]]},
        {"process": 0, "type": "ok", "f": "poll", "value": [["poll", {"1": [[0, 10]]}]]},
        {"process": 2, "type": "ok", "f": "poll", "value": [["poll", {"1": [[0, 10]]}]]},
        {
            "process": 9,
            "type": "ok",
            "f": "poll",
            "value": [["poll", {"1": [[0, 10]], "2": [[0, 11]]}]],
        },
        {"process": "supervisor", "type": "ok", "f": "spawn", "value": {"pid": 1}},
    ]
    polled, sent = SPEC.figures.throughput(), SPEC.figures.fed()
    assert [polled(o) for o in ops] == [None, 0, 1, 0, 1, None]
    assert [sent(o) for o in ops] == [1, 1, None, None, None, None]
    # A fresh counter per report: nothing remembered from the last one.
    assert SPEC.figures.throughput()(ops[2]) == 1


def test_a_queue_run_stored_before_the_registry_is_read_and_rechecked(tmp_path: Path) -> None:
    """The old queue orchestrator kept its history in ``queue/``, its options beside the run's
    and no resolved version: the checkers, the report and the index still read such a run."""
    from checkers.cli import main
    from harness.report.serve import find_runs

    run_dir = tmp_path / "store" / "queue-txn-assign" / "20261122T010000"
    (run_dir / "queue").mkdir(parents=True)
    shutil.copy(DATA / "clean_assign.json", run_dir / "queue" / "history.jsonl")
    config = {
        "options": {"workload": "queue", "kafka_version": "4.3.1", "seed": 3, "time_limit": 20},
        "queue": {"clients": 3, "sub_via": "assign", "txn": True, "time_limit": 20, "seed": 3},
        "run_id": "old",
    }
    (run_dir / "config.json").write_text(json.dumps(config))
    assert main([str(run_dir)]) == 0
    results = json.loads((run_dir / "results.json").read_text())
    assert list(results["checkers"]) == ["queue"]
    (row,) = find_runs(tmp_path / "store")
    assert (row.kafka_version, row.verdict) == ("4.3.1", "valid")
    repro = repro_command(load_run(run_dir))
    assert "--workload queue --sub-via assign --processors 3" in repro and "--variant" not in repro


#: The modules that must learn about workloads from their declarations only.
NO_WORKLOAD_NAMES = (
    "harness/nightly/campaign.py",
    "harness/run/progress.py",
    "harness/run/summary.py",
    "harness/report/*.py",
    "harness/report/templates/report.html.j2",
    "harness/report/templates/index.html.j2",
)


def test_campaign_progress_summary_and_report_name_no_workload() -> None:
    """What a workload needs of them it declares in its registry entry (variants and their
    verdicts, which op shows its load under way, its report's journeys, assignments and
    figures), so a new workload touches none of them."""
    import re

    from harness.run.workloads import names

    root = Path(__file__).resolve().parents[1]
    word = re.compile(r"\b(" + "|".join(map(re.escape, names())) + r")\b", re.IGNORECASE)
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for pattern in NO_WORKLOAD_NAMES
        for path in sorted(root.glob(pattern))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if word.search(line)
    ]
    assert len(names()) >= 3
    assert not found, "workload names outside the registry:\n" + "\n".join(found)
