"""The project's own Java clients (``workloads/java``): built against the installed Kafka jars,
writing the history format, and judged valid by the same checkers as the Python clients.

The build tests compile into a scratch copy of an installation (its jars linked, not copied),
so they exercise a real compile, the cache, the concurrent-builder race and the one-line
failure without touching the shared installation's cache. The cluster tests run the eos
processors and the queue clients on the Java client end to end.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from common.errors import HarnessError
from harness.kafka import javaclients
from harness.kafka.install import Installation, ensure_installed, kafka_home
from harness.kafka.versions import DEFAULT_KAFKA_VERSION, KafkaVersion
from history import load_history, read_process_file
from history.eos_records import H_GENERATION, H_MEMBER_ID, H_SRC_OFFSET, H_TXN_ID, H_TXN_SEQ

#: Every Kafka version whose jars are installed here (the default one is installed on demand).
INSTALLED = sorted(
    {DEFAULT_KAFKA_VERSION}
    | {p.parent.name for p in (kafka_home("x").parent).glob("*/INSTALLED.json")}
)


def _scratch_install(version: str, root: Path) -> Installation:
    """An installation whose jars are the real ones (linked) but whose cache is ``root``."""
    real = ensure_installed(version) if version == DEFAULT_KAFKA_VERSION else None
    libs_src = real.libs_dir if real else kafka_home(version) / "libs"
    libs = root / version / "libs"
    libs.mkdir(parents=True)
    for jar in libs_src.glob("*.jar"):
        (libs / jar.name).symlink_to(jar)
    java = real.java if real else shutil.which("java") or "java"
    return Installation(KafkaVersion(version), libs, Path("/nonexistent"), java)


@pytest.mark.slow
@pytest.mark.parametrize("version", INSTALLED)
def test_sources_compile_against_the_installed_kafka_jars(version: str, tmp_path: Path) -> None:
    install = _scratch_install(version, tmp_path)
    t0 = time.monotonic()
    classes = javaclients.ensure_built(install)
    built = time.monotonic() - t0
    for name in ("EosProcessor", "QueueClient", "History", "Json"):
        assert (classes / "kafkaharness" / f"{name}.class").exists(), name
    marker = json.loads((classes.parent / javaclients.MARKER).read_text())
    assert marker["kafka_version"] == version and marker["digest"] == classes.parent.name
    # Cached: the second call compiles nothing.
    t0 = time.monotonic()
    assert javaclients.ensure_built(install) == classes
    assert time.monotonic() - t0 < max(1.0, built / 5)


@pytest.mark.parametrize("end", ["oldest", "newest"])
def test_the_clients_build_against_the_oldest_and_the_newest_supported_release(
    end: str, tmp_path: Path
) -> None:
    """Every release the harness accepts must be able to run ``--client java``: the two ends
    of the supported range, read from Maven Central today (installed if needed), so a new
    release that breaks the build fails here before a matrix meets it."""
    from harness.kafka.versions import released_versions

    versions = released_versions()  # newest first, supported and complete only
    version = versions[-1] if end == "oldest" else versions[0]
    ensure_installed(version)
    classes = javaclients.ensure_built(_scratch_install(version, tmp_path))
    for name in ("EosProcessor", "QueueClient"):
        assert (classes / "kafkaharness" / f"{name}.class").exists(), name
    marker = json.loads((classes.parent / javaclients.MARKER).read_text())
    assert marker["kafka_version"] == version


@pytest.mark.slow
def test_concurrent_builders_agree_and_leave_one_build(tmp_path: Path) -> None:
    install = _scratch_install(DEFAULT_KAFKA_VERSION, tmp_path)
    results: list[Path | BaseException] = []

    def build() -> None:
        try:
            results.append(javaclients.ensure_built(install))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2 and results[0] == results[1], results
    builds = install.libs_dir.parent / "java-clients"
    assert [p.name for p in builds.iterdir()] == [Path(str(results[0])).parent.name]


def test_a_compile_error_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    install = _scratch_install(DEFAULT_KAFKA_VERSION, tmp_path)
    src = tmp_path / "src"
    shutil.copytree(javaclients.SOURCE_DIR, src)
    (src / "kafkaharness" / "Broken.java").write_text(
        "package kafkaharness;\nfinal class Broken { int x = undefinedName; }\n"
    )
    with pytest.raises(HarnessError) as err:
        javaclients.ensure_built(install, source_dir=src)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"compiling the Java clients against Kafka {DEFAULT_KAFKA_VERSION}")
    assert "Broken.java" in message and "error:" in message
    builds = install.libs_dir.parent / "java-clients"
    assert not builds.exists() or list(builds.iterdir()) == []


def test_missing_javac_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "java").touch()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HarnessError, match="javac not found"):
        javaclients.find_javac(str(tmp_path / "java"))


def test_java_history_writer_speaks_history_format_v1(tmp_path: Path) -> None:
    """Strings that JSON escapes (quotes, control characters, non-ASCII, a character outside
    the BMP), nested values, ints beyond 32 bits and floats go through the Java reader and
    writer unchanged; the lines pass the Python reader's validation; times are on the clock
    of Python's ``time.monotonic_ns``."""
    install = ensure_installed()
    classes = javaclients.ensure_built(install)
    value = {
        "s": 'quote " backslash \\ newline \n tab \t nul \u0000 del \x7f é 中 😀',
        "n": [0, -1, 2**40, 1.5, -0.25, 1e-7, True, False, None],
        "o": {"nested": {"empty": {}, "list": []}},
    }
    path = tmp_path / "0.jsonl"
    t0 = time.monotonic_ns()
    subprocess.run(
        [
            install.java,
            "-cp",
            f"{classes}:{install.classpath}",
            "kafkaharness.HistoryCheck",
            str(path),
            json.dumps(value),
        ],
        check=True,
        timeout=60,
    )
    t1 = time.monotonic_ns()
    header, ops, warnings = read_process_file(path)
    assert header is not None and not warnings
    assert header["process"] == 0 and header["meta"]["parsed"] == value
    assert header["clock"]["time"] == "monotonic_ns" and header["clock"]["pid"] > 0
    assert [(o["type"], o["f"]) for o in ops] == [
        ("invoke", "echo"),
        ("ok", "echo"),
        ("invoke", "fails"),
        ("fail", "fails"),
        ("invoke", "unknown"),
        ("info", "unknown"),
    ]
    assert ops[0]["value"] == ops[1]["value"] == value
    assert ops[1]["rebalance_log"] == [{"type": "assigned", "keys": [1, 2]}]
    assert ops[3]["error"] == {"code": "X", "message": 'why "quoted"\n'}
    assert ops[5]["value"] == -0.25 and "error" not in ops[5]
    assert all(t0 < o["time"] < t1 for o in ops)
    assert path.read_bytes().isascii()


# --- end to end on a cluster --------------------------------------------------------------


def _eos_run(
    cluster: Any, store: Path, name: str, nemesis: str = "none", time_limit: float = 20, **eos: Any
) -> Any:
    from harness.run.nemesis import ScheduledNemesis
    from harness.run.runner import RunOptions, execute
    from workloads.eos.config import EosOptions

    suffix = f"-{name}-{uuid.uuid4().hex[:6]}"
    options = EosOptions(
        name_suffix=suffix,
        client="java",
        values=2000,
        partitions=6,
        processors=3,
        find_hanging=False,
        drain_timeout_s=120,
        **eos,
    )
    run = RunOptions(
        workload_options=options,
        time_limit=time_limit,
        seed=3,
        nemesis=nemesis,
        nemesis_interval=5,
        nemesis_duration=4,
    )
    nemeses = [ScheduledNemesis(run)] if nemesis != "none" else []
    return execute(cluster, run, store / "eos" / suffix.lstrip("-"), nemeses)


@pytest.mark.cluster
def test_java_processors_are_exactly_once_and_record_the_python_history(
    kafka_cluster: Any, harness_store: Path, spark: Any
) -> None:
    from harness.run.verdict import judge

    result = _eos_run(kafka_cluster, harness_store, "java", time_limit=10)
    verdict = judge(result.run_dir)
    assert verdict["valid"] is True, verdict
    assert result.summary["duplicates"] == result.summary["missing"] == 0, result.summary
    assert result.stats["txns_committed"] > 0
    ops = load_history(result.history)
    starts = [o for o in ops if o["f"] == "start" and o["type"] == "ok"]
    assert starts and all(o["value"]["client"] == "java" for o in starts)
    # The cluster's default on 4.x is transaction version 2, and the Java producer uses it.
    assert all(o["value"]["transaction_v2"] is True for o in starts), starts[0]
    assert all(o["value"]["transaction_version"] == 2 for o in starts)
    txns = [o for o in ops if o["f"] == "txn" and o["type"] == "ok"]
    assert txns and all(
        out[1] is not None and out[2].startswith("out-v")
        for o in txns
        for out in o["value"]["outputs"]
    )
    invoke = next(o for o in ops if o["f"] == "txn" and o["type"] == "invoke")
    assert set(invoke["value"]) == {"txn", "transactional_id", "generation", "member_id", "inputs"}
    assert invoke["value"]["generation"] >= 1 and invoke["value"]["member_id"]
    reads = [
        o
        for o in ops
        if o["f"] == "read" and o["type"] == "ok" and o["value"]["isolation"] == "read_committed"
    ]
    records = [r for o in reads for r in o["value"]["records"]]
    assert records and all(
        {H_SRC_OFFSET, H_TXN_ID, H_GENERATION, H_MEMBER_ID, H_TXN_SEQ} <= set(r[3]) for r in records
    )
    exits = [o for o in ops if o["f"] == "exit" and o["type"] == "ok"]
    assert exits and all(
        o["value"]["reason"] == "sigterm" and o["value"]["code"] == 0 for o in exits
    )


@pytest.mark.cluster
def test_java_processors_stay_exactly_once_when_killed(
    kafka_cluster: Any, harness_store: Path, spark: Any
) -> None:
    from harness.run.verdict import judge

    settings = {"request.timeout.ms": "5000", "delivery.timeout.ms": "15000"}
    result = _eos_run(
        kafka_cluster,
        harness_store,
        "java-kills",
        nemesis="kill-processor",
        client_config=settings,
        txn_delay_ms=5,
    )
    verdict = judge(result.run_dir)
    assert verdict["valid"] is True, verdict
    ops = load_history(result.history)
    # The run's knobs reach the Java processors and are recorded as the Python ones do.
    starts = [
        o["value"]
        for o in ops
        if o["f"] == "start" and o["type"] == "invoke" and isinstance(o["process"], int)
    ]
    assert starts and all(v["client_config"] == settings for v in starts), starts[0]
    assert all(v["txn_delay_ms"] == 5 and v["group_protocol"] == "classic" for v in starts)
    kills = [
        o for o in ops if o["process"] == "nemesis" and o["f"] == "start" and o["type"] == "ok"
    ]
    assert kills, "no processor was killed"
    exits = [o for o in ops if o["f"] == "processor-exit" and o["type"] == "ok"]
    assert any(o["value"]["returncode"] == -9 for o in exits)
    assert result.stats["instances"] > 3 and result.stats["txns_committed"] > 0


@pytest.mark.cluster
def test_java_queue_clients_are_valid(kafka_cluster: Any, harness_store: Path, spark: Any) -> None:
    from harness.run.runner import RunOptions, execute
    from harness.run.verdict import judge
    from workloads.queue.options import QueueOptions

    tag = uuid.uuid4().hex[:6]
    options = QueueOptions(topic=f"queue-java-{tag}", client="java", clients=3, seed=5)
    run = RunOptions(workload="queue", workload_options=options, time_limit=20, seed=5)
    result = execute(kafka_cluster, run, harness_store / "queue" / tag)
    verdict = judge(result.run_dir)
    assert verdict["valid"] is True, verdict
    ops = load_history(result.history)
    clients = {
        s["process"]: s["meta"]
        for s in json.loads(result.history.open().readline())["sources"]
        if s["meta"].get("role") == "client"
    }
    assert clients and all(meta["client"] == "java" for meta in clients.values())
    oks = [o for o in ops if o["process"] in clients and o["type"] == "ok"]
    assert sum(1 for o in oks if o["f"] == "txn") > 0
    sent = [m for o in oks if o["f"] in ("send", "txn") for m in o["value"] if m[0] == "send"]
    assert sent and all(isinstance(m[2][0], int) for m in sent)
