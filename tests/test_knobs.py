"""The knobs a Jepsen user turns (issue #14): each one parsed, validated and applied.

Cluster knobs (``--nodes``, ``--broker-config``, ``--replication-factor``,
``--min-insync-replicas``) must reach the nodes' ``server.properties``; client knobs
(``--client-config``, ``--group-protocol``, ``--txn-delay-ms``) must reach the clients under
test and their recorded configuration. All of it must be in ``config.json`` and spelled back
by the report's reproduce command; a bad value is one line on stderr and exit status 2. No
cluster is started: the configuration a backend writes and the settings a client is built
with are checked where they are made.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import confluent_kafka
import pytest

from common.errors import HarnessError
from common.settings import parse_settings
from harness.cli import build_parser, main
from harness.report.data import load_run
from harness.report.render import repro_command
from harness.run.arguments import options_from_args
from harness.run.options import RunOptions
from harness.run.runner import cluster_config_of, write_config
from harness.run.workloads import complete
from harness.substrate.api import ClusterConfig
from workloads.clients import TxnDelay, make_clients
from workloads.eos.config import EosOptions, ProcessorConfig
from workloads.queue.config import ClientConfig
from workloads.queue.options import QueueOptions

KNOBS = (
    "--nodes", "5",
    "--broker-config", "transaction.max.timeout.ms=900000",
    "--broker-config", "log.flush.interval.messages=1",
    "--replication-factor", "4",
    "--min-insync-replicas", "3",
    "--client-config", "request.timeout.ms=3000",
    "--client-config", "retries=7",
    "--txn-delay-ms", "50",
    "--group-protocol", "consumer",
)  # fmt: skip


def _options(*argv: str) -> RunOptions:
    return options_from_args(build_parser().parse_args(["run", *argv]))


def _cli(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """``python -m harness ARGV`` in this process: its exit status and its one stderr line."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own refusals
        code = int(exc.code or 0)
    err = capfd.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return code, lines[0]


# --- parsed --------------------------------------------------------------------------------


def test_key_value_settings_are_parsed_one_way() -> None:
    assert parse_settings(["a=1", " b = x=y ", "c=", "a=2"], "--x") == {
        "a": "2",
        "b": "x=y",
        "c": "",
    }
    with pytest.raises(HarnessError, match="--x expects KEY=VALUE, got 'ab'"):
        parse_settings(["ab"], "--x")
    with pytest.raises(HarnessError, match="--x has an empty key"):
        parse_settings([" =1"], "--x")


def test_every_knob_is_parsed_into_the_run_options() -> None:
    options = _options("--workload", "eos", *KNOBS)
    assert options.nodes == 5
    assert options.broker_settings == {
        "transaction.max.timeout.ms": "900000",
        "log.flush.interval.messages": "1",
    }
    assert (options.replication_factor, options.min_insync_replicas) == (4, 3)
    eos = options.workload_options
    assert eos.client_config == {"request.timeout.ms": "3000", "retries": "7"}
    assert (eos.txn_delay_ms, eos.group_protocol) == (50, "consumer")
    queue = _options("--workload", "queue", *KNOBS).workload_options
    assert queue.client_config == eos.client_config
    assert (queue.txn_delay_ms, queue.group_protocol) == (50, "consumer")


def test_defaults_change_nothing() -> None:
    options = _options()
    assert (options.nodes, options.broker_settings) == (3, {})
    assert (options.replication_factor, options.min_insync_replicas) == (None, None)
    eos = options.workload_options
    assert (eos.client_config, eos.txn_delay_ms, eos.group_protocol) == ({}, 0, "classic")
    settings = cluster_config_of(options, None).settings()
    assert settings["default.replication.factor"] == "3"
    assert settings["min.insync.replicas"] == "2"
    assert not any(k.startswith("group.consumer.") for k in settings)


# --- validated: one line on stderr, exit status 2 ------------------------------------------


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--broker-config", "no-equals"), "--broker-config expects KEY=VALUE, got 'no-equals'"),
        (("--broker-config", "=1"), "--broker-config has an empty key"),
        (("--client-config", "no-equals"), "--client-config expects KEY=VALUE"),
        (("--client-config", " =3"), "--client-config has an empty key"),
        (("--nodes", "0"), "--nodes must be at least 1, not 0"),
        (("--replication-factor", "4"), "--replication-factor 4 must be between 1 and the node"),
        (("--replication-factor", "0"), "--replication-factor 0 must be between 1"),
        (
            ("--replication-factor", "2", "--min-insync-replicas", "3"),
            "--min-insync-replicas 3 must be between 1 and the replication factor (2)",
        ),
        (("--nodes", "1", "--min-insync-replicas", "2"), "replication factor (1)"),
        (
            ("--broker-config", "min.insync.replicas=1", "--min-insync-replicas", "2"),
            "--broker-config min.insync.replicas=1 contradicts --min-insync-replicas 2",
        ),
        (
            ("--broker-config", "default.replication.factor=4"),
            "default.replication.factor=4 must be between 1 and the node count (3)",
        ),
        (
            ("--broker-config", "transaction.state.log.min.isr=4"),
            "transaction.state.log.min.isr=4 must be between 1 and",
        ),
        (("--group-protocol", "cooperative"), "invalid choice: 'cooperative'"),
        (("--txn-delay-ms", "-1"), "--txn-delay-ms must be >= 0, not -1"),
        (("--txn-delay-ms", "x"), "argument --txn-delay-ms: invalid int value: 'x'"),
        (
            ("--kafka-version", "3.9.2", "--group-protocol", "consumer"),
            "--group-protocol consumer needs Kafka 4.0.0 or newer, not 3.9.2",
        ),
        (("--client-config", "group.id=mine"), "--client-config group.id:"),
        (
            ("--client-config", "transaction.timeout.ms=60000"),
            "use --transaction-timeout-ms",
        ),
        (("--client-config", "session.timeout.ms=6000"), "use --session-timeout-ms"),
        (("--client-config", "group.protocol=consumer"), "use --group-protocol"),
        (
            ("--group-protocol", "consumer", "--client-config", "heartbeat.interval.ms=100"),
            "not a client setting with --group-protocol consumer",
        ),
        (
            ("--client-config", "no.such.setting=1"),
            'the client refuses it: No such configuration property: "no.such.setting"',
        ),
        (
            ("--client-config", "message.timeout.ms=60000"),
            "`message.timeout.ms` must be set <= `transaction.timeout.ms`",
        ),
        (("--client", "copier", "--client-config", "retries=1"), "takes no client settings"),
        (("--client", "copier", "--group-protocol", "consumer"), "copier runs only classic"),
        (("--client", "copier", "--txn-delay-ms", "10"), "has no pause between its operations"),
        (("--workload", "queue", "--txn-delay-ms", "-5"), "--txn-delay-ms must be >= 0"),
        (
            ("--workload", "queue", "--client-config", "transaction.timeout.ms=1"),
            "use --transaction-timeout-ms",
        ),
        (
            ("--workload", "queue", "--client-config", "request.timeout.ms=abc"),
            'Invalid value for configuration property "request.timeout.ms"',
        ),
        (("--client-python", "/no/such/python"), "--client-python /no/such/python: cannot run it"),
        (("--client-python", "/bin/false"), "--client-python /bin/false: cannot import"),
        (
            ("--client", "java", "--client-python", sys.executable),
            "--client-python: the java client does not run on Python",
        ),
        (("--workload", "queue", "--client-python", "/bin/false"), "cannot import confluent_kafka"),
    ],
)
def test_a_bad_knob_is_one_line_and_exit_2(
    capfd: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...], says: str
) -> None:
    store = tmp_path / "store"
    code, line = _cli(capfd, "run", *argv, "--store", str(store))
    assert code == 2
    assert says in line
    assert not store.exists(), "refused before any run directory exists"


def test_the_cluster_command_refuses_bad_shapes_before_starting(
    capfd: pytest.CaptureFixture[str],
) -> None:
    code, line = _cli(capfd, "cluster", "--nodes", "2", "--replication-factor", "3")
    assert code == 2 and "--replication-factor 3 must be between 1 and the node count" in line
    code, line = _cli(capfd, "cluster", "--broker-config", "x")
    assert code == 2 and "KEY=VALUE" in line


def test_a_campaign_refuses_a_bad_knob_before_its_first_run(
    capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    code, line = _cli(capfd, "campaign", "--txn-delay-ms", "-2", "--store", str(store))
    assert code == 2 and "--txn-delay-ms must be >= 0" in line
    code, line = _cli(
        capfd, "campaign", "--nodes", "2", "--replication-factor", "3", "--store", str(store)
    )
    assert code == 2 and "--replication-factor 3 must be between 1 and the node count" in line
    assert not store.exists()


# --- applied: the brokers ------------------------------------------------------------------


def _server_properties(config: ClusterConfig, tmp_path: Path) -> dict[str, str]:
    """The ``server.properties`` the process backend writes for node 1 of this cluster."""
    from harness.kafka.versions import KafkaVersion
    from harness.substrate.process.node import KafkaNode

    install = SimpleNamespace(version=KafkaVersion("4.3.1"), log4j2=True)
    net = SimpleNamespace(node_id=1, ip="10.250.9.11", netns=None)
    node = KafkaNode(1, net, install, tmp_path / "n1", ("127.0.0.1", 21001), {})  # type: ignore[arg-type]
    node.write_config("1@10.250.9.11:9094", config.settings())
    lines = node.config_path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def test_broker_knobs_reach_server_properties(tmp_path: Path) -> None:
    options = _options("--workload", "eos", *KNOBS)
    config = cluster_config_of(options, tmp_path)
    assert config.nodes == 5
    props = _server_properties(config, tmp_path)
    assert props["transaction.max.timeout.ms"] == "900000"
    assert props["log.flush.interval.messages"] == "1"
    # The workload's topics take the brokers' defaults; the internal topics follow them.
    for key in (
        "default.replication.factor",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
    ):
        assert props[key] == "4", key
    assert props["min.insync.replicas"] == "3"
    assert props["transaction.state.log.min.isr"] == "3"
    # The consumer group protocol's session timeout is the broker's: the workload's.
    assert props["group.consumer.session.timeout.ms"] == "10000"
    assert props["group.consumer.min.session.timeout.ms"] == "10000"
    assert props["group.consumer.heartbeat.interval.ms"] == "3000"
    assert props["node.id"] == "1"  # the node's own keys are still there


def test_replication_defaults_follow_the_node_count(tmp_path: Path) -> None:
    one = _server_properties(ClusterConfig(nodes=1), tmp_path / "one")
    assert (one["default.replication.factor"], one["min.insync.replicas"]) == ("1", "1")
    rf2 = ClusterConfig(nodes=5, replication_factor=2).settings()
    assert (rf2["default.replication.factor"], rf2["min.insync.replicas"]) == ("2", "2")
    assert rf2["transaction.state.log.replication.factor"] == "2"
    five = ClusterConfig(nodes=5).settings()
    assert (five["default.replication.factor"], five["min.insync.replicas"]) == ("3", "2")


def test_the_run_s_broker_config_wins_over_what_the_workload_asks_for() -> None:
    options = _options(
        "--group-protocol", "consumer", "--broker-config", "group.consumer.session.timeout.ms=45000"
    )
    settings = cluster_config_of(options, None).settings()
    assert settings["group.consumer.session.timeout.ms"] == "45000"
    assert settings["group.consumer.heartbeat.interval.ms"] == "3000"


def test_the_docker_backend_writes_the_same_settings() -> None:
    from harness.substrate.docker import plan as dp

    settings = ClusterConfig(nodes=3, replication_factor=2, broker_settings={"a.b": "c"}).settings()
    plan = dp.plan_cluster("run", "owner", "cid", "4.3.1", list(range(30000, 30007)), settings)
    props = dp.node_properties(plan, 2)
    assert props["a.b"] == "c" and props["default.replication.factor"] == "2"


def test_workloads_create_topics_with_the_cluster_s_replication() -> None:
    """The workloads ask for no replication of their own: their topics get the brokers'."""
    from workloads.eos.supervisor import EosWorkload
    from workloads.queue.supervisor import QueueWorkload

    created: list[tuple[Any, ...]] = []

    class Cluster:
        dir = Path("/nonexistent")

        def ensure_topic(self, topic: str, partitions: int, *rest: Any, **kw: Any) -> None:
            created.append((topic, partitions, rest, kw))

    EosWorkload.setup(SimpleNamespace(options=EosOptions(), cluster=Cluster()))  # type: ignore[arg-type]
    QueueWorkload.setup(SimpleNamespace(options=QueueOptions(), cluster=Cluster()))  # type: ignore[arg-type]
    assert [(t, p, r) for t, p, r, _ in created] == [
        ("eos-input", 6, ()),
        ("eos-output", 6, ()),
        ("queue", 4, ()),
    ]


# --- applied: the clients under test -------------------------------------------------------


def _captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    monkeypatch.setattr(confluent_kafka, "Producer", lambda conf: seen.setdefault("p", conf))
    monkeypatch.setattr(confluent_kafka, "Consumer", lambda conf: seen.setdefault("c", conf))
    return seen


def test_client_config_is_applied_last_to_both_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _captured(monkeypatch)
    cfg = SimpleNamespace(
        bootstrap="b:1",
        group_id="g",
        transaction_timeout_ms=5000,
        session_timeout_ms=6000,
        security=None,
    )
    settings = {"request.timeout.ms": "3000", "linger.ms": "20", "fetch.min.bytes": "10"}
    make_clients(cfg, "eos", 1, "t-1", producer={"linger.ms": 5}, settings=settings)
    p, c = seen["p"], seen["c"]
    assert p["request.timeout.ms"] == "3000" and c["request.timeout.ms"] == "3000"
    assert p["linger.ms"] == "20"  # the user's over the workload's own
    assert c["fetch.min.bytes"] == "10"
    assert p["transactional.id"] == "t-1" and c["group.id"] == "g"


def test_the_eos_processor_is_built_and_recorded_with_the_knobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The processor's JSON config carries the knobs; its clients are built with them (no
    session settings under the consumer protocol); its history header and its ``start`` op
    record them."""
    from workloads.eos.processor import Processor

    seen = _captured(monkeypatch)
    eos = _options("--workload", "eos", *KNOBS).workload_options
    # at-least-once: no init_transactions, so _start needs no broker.
    eos.variant = "at-least-once"
    history = tmp_path / "7.jsonl"
    cfg = eos.processor_config(7, 1, "127.0.0.1:9", str(history))
    assert ProcessorConfig.from_json(cfg.to_json()) == cfg
    assert json.loads(cfg.to_json())["client_config"] == {
        "request.timeout.ms": "3000",
        "retries": "7",
    }
    processor = Processor(cfg)
    monkeypatch.setattr("workloads.eos.processor.subscribe", lambda consumer, topics, cb: None)
    processor._start()
    processor.rec.close()
    p, c = seen["p"], seen["c"]
    assert p["request.timeout.ms"] == "3000" and p["retries"] == "7"
    assert c["group.protocol"] == "consumer"
    assert "session.timeout.ms" not in c and "heartbeat.interval.ms" not in c
    header, invoke, ok = (json.loads(line) for line in history.read_text().splitlines())
    recorded = header["meta"]["config"]
    assert recorded["client_config"] == {"request.timeout.ms": "3000", "retries": "7"}
    assert (recorded["group_protocol"], recorded["txn_delay_ms"]) == ("consumer", 50)
    for op in (invoke, ok):
        assert op["f"] == "start"
        assert op["value"]["client_config"] == recorded["client_config"]
        assert (op["value"]["group_protocol"], op["value"]["txn_delay_ms"]) == ("consumer", 50)


class _Producer:
    """Records the order of a transaction's calls (and the delays between them)."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, topic: str, **kw: Any) -> None:
        self.calls.append("produce")
        kw["on_delivery"](None, SimpleNamespace(partition=lambda: 0, offset=lambda: 1))

    def flush(self, timeout: float) -> int:
        return 0

    def send_offsets_to_transaction(self, positions: Any, cgmd: Any, timeout: float) -> None:
        self.calls.append("offsets")

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")


def test_the_eos_processor_pauses_between_a_transaction_s_operations(tmp_path: Path) -> None:
    from workloads.eos.processor import Processor

    cfg = EosOptions(txn_delay_ms=50).processor_config(1, 0, "b:1", str(tmp_path / "1.jsonl"))
    processor = Processor(cfg)
    calls: list[str] = []
    waits: list[float] = []
    processor.delay.wait = lambda s: (calls.append("delay"), waits.append(s))
    processor.producer = _Producer(calls)
    processor.consumer = SimpleNamespace(
        assignment=lambda: [], position=lambda parts: [], consumer_group_metadata=lambda: b""
    )

    def message(offset: int) -> Any:
        value = f"v{offset:06d}".encode()
        return SimpleNamespace(
            value=lambda: value, topic=lambda: "in", partition=lambda: 0, offset=lambda: offset
        )

    processor._process([message(0), message(1), message(2)], b"", {})
    processor.rec.close()
    assert calls == [
        "begin",
        "produce",
        "delay",
        "produce",
        "delay",
        "produce",
        "delay",
        "offsets",
        "delay",
        "commit",
    ]
    assert all(0 <= w <= 0.05 for w in waits)
    # Seeded: the same instance pauses the same way.
    again = TxnDelay(50, cfg.seed, wait=lambda s: None)
    assert [again.rng.uniform(0, 0.05) for _ in waits] == waits


def test_txn_delay_is_seeded_bounded_and_off_by_default() -> None:
    waits: list[float] = []
    delay = TxnDelay(20, "seed-1", wait=waits.append)
    for _ in range(200):
        delay()
    assert all(0 <= w <= 0.02 for w in waits) and max(waits) > 0.015
    other: list[float] = []
    again = TxnDelay(20, "seed-1", wait=other.append)
    for _ in range(200):
        again()
    assert other == waits
    never: list[float] = []
    off = TxnDelay(0, "seed-1", wait=never.append)
    off()
    assert never == []


def test_the_queue_client_is_built_and_recorded_with_the_knobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workloads.queue.client import QueueClient

    seen = _captured(monkeypatch)
    options = complete(
        RunOptions(
            workload="queue",
            workload_options=_options("--workload", "queue", *KNOBS).workload_options,
        )
    ).workload_options
    cfg = options.process_config(
        3, "127.0.0.1:9", tmp_path / "3.jsonl", time.monotonic_ns() + 10**10
    )
    assert ClientConfig.from_json(cfg.to_json()) == cfg
    client = QueueClient(cfg)

    def producer(conf: dict[str, Any]) -> Any:
        seen["p"] = conf
        return SimpleNamespace(init_transactions=lambda timeout: None)

    monkeypatch.setattr(confluent_kafka, "Producer", producer)
    client._make_clients()
    client.rec.close()
    p, c = seen["p"], seen["c"]
    assert p["request.timeout.ms"] == "3000" and c["retries"] == "7"
    assert p["message.timeout.ms"] == 10000  # the workload's own, unless the user's says
    assert c["group.protocol"] == "consumer" and "session.timeout.ms" not in c
    header = json.loads((tmp_path / "3.jsonl").read_text().splitlines()[0])
    recorded = header["meta"]["config"]
    assert recorded["client_config"] == {"request.timeout.ms": "3000", "retries": "7"}
    assert (recorded["group_protocol"], recorded["txn_delay_ms"]) == ("consumer", 50)


def test_the_queue_client_pauses_between_micro_ops_and_before_the_commit(
    tmp_path: Path,
) -> None:
    from workloads.queue.client import QueueClient

    end = time.monotonic_ns() + 30 * 10**9
    cfg = QueueOptions(txn_delay_ms=30).process_config(2, "b:1", tmp_path / "2.jsonl", end)
    client = QueueClient(cfg)
    calls: list[str] = []
    client.delay.wait = lambda s: calls.append("delay")
    client.producer = _Producer(calls)
    client._send = lambda k, v: calls.append("send") or 5  # type: ignore[method-assign]
    client._poll = lambda: calls.append("poll") or {"0": [[4, 9]]}  # type: ignore[method-assign]
    client.consumer = SimpleNamespace(consumer_group_metadata=lambda: b"")
    client.perform("txn", [["send", 0, 1], ["poll"], ["send", 1, 2]])
    client.rec.close()
    assert calls == [
        "begin",
        "send",
        "delay",
        "poll",
        "delay",
        "send",
        "delay",
        "offsets",
        "delay",
        "commit",
    ]


# --- recorded and reproduced ---------------------------------------------------------------


@pytest.mark.parametrize("workload", ["eos", "queue"])
def test_config_json_and_the_reproduce_command_carry_every_knob(
    tmp_path: Path, workload: str
) -> None:
    options = _options("--workload", workload, "--seed", "9", *KNOBS)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_config(run_dir, options, {})
    config = json.loads((run_dir / "config.json").read_text())
    assert config["nodes"] == 5
    assert config["broker_settings"]["transaction.max.timeout.ms"] == "900000"
    assert (config["replication_factor"], config["min_insync_replicas"]) == (4, 3)
    wopts = config["workload_options"]
    assert wopts["client_config"] == {"request.timeout.ms": "3000", "retries": "7"}
    assert (wopts["txn_delay_ms"], wopts["group_protocol"]) == (50, "consumer")

    repro = repro_command(load_run(run_dir))
    for flag in (
        "--nodes 5",
        "--replication-factor 4",
        "--min-insync-replicas 3",
        "--broker-config transaction.max.timeout.ms=900000",
        "--broker-config log.flush.interval.messages=1",
        "--client-config request.timeout.ms=3000",
        "--client-config retries=7",
        "--txn-delay-ms 50",
        "--group-protocol consumer",
    ):
        assert flag in repro, flag
    again = options_from_args(build_parser().parse_args(repro.split()[3:]))
    assert again.to_dict() == options.to_dict()


def test_a_campaign_passes_the_knobs_to_every_run() -> None:
    from harness.nightly.campaign import _options as campaign_options

    args = build_parser().parse_args(["campaign", "--variants", "eos,at-least-once", *KNOBS])
    options = campaign_options(args, "at-least-once", 4, "x")
    assert (options.nodes, options.replication_factor, options.min_insync_replicas) == (5, 4, 3)
    assert options.broker_settings["log.flush.interval.messages"] == "1"
    eos = options.workload_options
    assert (eos.variant, eos.seed, eos.name_suffix) == ("at-least-once", 4, "-x")
    assert eos.client_config == {"request.timeout.ms": "3000", "retries": "7"}
    assert (eos.txn_delay_ms, eos.group_protocol) == (50, "consumer")
    assert options.transaction_version is None
    args = build_parser().parse_args(["campaign", "--transaction-version", "2"])
    assert campaign_options(args, "eos", 1, "").transaction_version == 2


def test_a_queue_campaign_runs_the_queue_workload_with_its_own_flags(
    capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from harness.nightly.campaign import _options as campaign_options

    # Jepsen's KAFKA-17754 settings: Java's delivery timeout may exceed the transaction
    # timeout (librdkafka's alias of it, message.timeout.ms, may not: not asked of Java).
    jepsen = ["--transaction-timeout-ms", "1000", "--client-config", "delivery.timeout.ms=10000"]
    args = build_parser().parse_args(
        ["campaign", "--workload", "queue", "--client", "java", "--txn-delay-ms", "100", *jepsen]
    )
    options = campaign_options(args, "queue", 3, "q")
    queue = options.workload_options
    assert options.workload == "queue"
    assert (queue.client, queue.txn_delay_ms, queue.seed, queue.topic) == (
        "java",
        100,
        3,
        "queue-q",
    )
    store = str(tmp_path / "store")
    code, line = _cli(
        capfd, "campaign", "--workload", "queue", "--variants", "eos", "--store", store
    )
    assert code == 2 and "unknown variant(s) ['eos'] of the queue workload; known: queue" in line
    code, line = _cli(
        capfd, "campaign", "--workload", "queue", "--abort-probability", "0.1", "--store", store
    )
    assert code == 2 and "--abort-probability: not an option of --workload queue" in line


def test_known_bugs_pairs_each_exposed_cell_with_a_control() -> None:
    """Correct clients expected INVALID where Kafka's bug lives (TV0 clients; share groups
    before 4.4.0; offset commits on 4.3.0), the controls expected valid where the fix is (TV2
    on 4.x; 4.4.0 on; 4.3.1 on); F13 expected valid and named under TV2, its control on
    TV0."""
    from harness.nightly.scenarios import SCENARIO_SETS, SCENARIOS, expand

    known = [SCENARIOS[n] for n in SCENARIO_SETS["known-bugs"]]
    assert all(s.variant == "eos" for s in known)  # no broken-on-purpose variant
    cells = expand(["3.9.2", "4.3.1", "4.4.0"], known)
    got = [(c.version, c.scenario.name, c.transaction_version, c.scenario.expected) for c in cells]
    assert got == [
        ("3.9.2", "bug-delayed-endtxn-python", None, "invalid"),
        ("3.9.2", "bug-delayed-endtxn-java-tv0", None, "invalid"),
        ("3.9.2", "bug-zombie-kafkajs", None, "invalid"),
        ("3.9.2", "control-f9-leaderless-marker", None, "valid"),
        ("3.9.2", "control-kafka-20785-tv0", None, "valid"),
        ("4.3.1", "bug-delayed-endtxn-python", 0, "invalid"),
        ("4.3.1", "bug-delayed-endtxn-java-tv0", 0, "invalid"),
        ("4.3.1", "fixed-delayed-endtxn-java-tv2", 2, "valid"),
        ("4.3.1", "bug-zombie-kafkajs", 0, "invalid"),
        ("4.3.1", "bug-kafka-20742", 0, "invalid"),
        ("4.3.1", "bug-f9-leaderless-marker", 0, "invalid"),
        ("4.3.1", "bug-kafka-20785", 2, "valid"),
        ("4.3.1", "control-kafka-20785-tv0", 0, "valid"),
        ("4.3.1", "fixed-kafka-20634", 0, "valid"),
        ("4.4.0", "bug-delayed-endtxn-python", 0, "invalid"),
        ("4.4.0", "bug-delayed-endtxn-java-tv0", 0, "invalid"),
        ("4.4.0", "fixed-delayed-endtxn-java-tv2", 2, "valid"),
        ("4.4.0", "bug-zombie-kafkajs", 0, "invalid"),
        ("4.4.0", "fixed-kafka-20742", 0, "valid"),
        ("4.4.0", "bug-f9-leaderless-marker", 0, "invalid"),
        ("4.4.0", "bug-kafka-20785", 2, "valid"),
        ("4.4.0", "control-kafka-20785-tv0", 0, "valid"),
        ("4.4.0", "fixed-kafka-20634", 0, "valid"),
    ]
    # The F13 cell is valid (exactly-once holds) and must name its finding.
    assert {c.scenario.finding for c in cells if c.scenario.name == "bug-kafka-20785"} == {"F13"}
    # F14's exposed cell runs on 4.3.0 alone (fixed in 4.3.1), expected invalid naming F14,
    # with the recipe's own flags.
    (f14,) = [c for c in expand(["4.3.0"], known) if c.scenario.name == "bug-kafka-20634"]
    assert f14.scenario.expected == "invalid" and f14.scenario.finding == "F14"
    assert "--offsets-one-coordinator" in f14.run_args(None)
    assert "--workload offsets" in " ".join(f14.run_args(None))


def test_a_finding_cell_that_turns_valid_says_the_finding_no_longer_reproduces() -> None:
    from harness.nightly.cells import base_record, cell_message
    from harness.nightly.scenarios import SCENARIOS, expand

    (cell,) = expand(["4.5.0"], [SCENARIOS["bug-f9-leaderless-marker"]])
    record = {**base_record(cell), "verdict": "valid", "verdict_source": "results.json"}
    record["report"] = "r.html"
    assert cell_message(record, None).startswith("F9 no longer reproduces on 4.5.0: expected")
    record["verdict"] = "invalid"  # invalid, but not by F9: the finding did not reproduce
    assert cell_message(record, None).startswith("F9 no longer reproduces on 4.5.0: expected")
    record["known_findings"] = ["F9"]
    assert cell_message(record, None).startswith("expected invalid, got invalid")


def test_matrix_scenarios_may_set_knobs_and_skip_versions_that_lack_them() -> None:
    from harness.nightly.scenarios import SCENARIO_SETS, SCENARIOS, expand

    for scenario in SCENARIOS.values():  # every scenario is a valid run command line
        _options(*scenario.run_args(), "--kafka-version", "4.3.1")
    knobs = [SCENARIOS[n] for n in SCENARIO_SETS["knobs"]]
    assert "--txn-delay-ms" in knobs[0].run_args()
    assert _options(*SCENARIOS["eos-python-5-nodes"].run_args()).replication_factor == 5
    cells = expand(["3.9.2", "4.3.1"], knobs)
    assert [(c.version, c.scenario.name) for c in cells] == [
        ("3.9.2", "eos-python-txn-delay"),
        ("3.9.2", "eos-python-5-nodes"),
        ("4.3.1", "eos-python-txn-delay"),
        ("4.3.1", "eos-python-consumer-protocol"),
        ("4.3.1", "eos-python-5-nodes"),
    ]


def test_the_scenario_suite_gives_its_knobs_to_every_scenario_that_takes_them() -> None:
    from harness.pytest_plugin import _with_knobs
    from harness.run.workloads import get

    given = {
        "--client-config": ["retries=3"],
        "--group-protocol": "consumer",
        "--txn-delay-ms": 20,
    }
    config = SimpleNamespace(getoption=given.get)
    eos = get("eos").spec
    wopts = _with_knobs(eos, {"seed": 1, "client_config": {"linger.ms": "1"}}, config)
    assert wopts.client_config == {"linger.ms": "1", "retries": "3"}
    assert (wopts.group_protocol, wopts.txn_delay_ms) == ("consumer", 20)
    assert _with_knobs(get("queue").spec, {"seed": 1}, config).txn_delay_ms == 20
    with pytest.raises(pytest.skip.Exception, match="cannot take the suite's knobs"):
        _with_knobs(eos, {"seed": 1, "client": "copier"}, config)
    none = SimpleNamespace(getoption=lambda name: [] if name == "--client-config" else None)
    assert _with_knobs(eos, {"seed": 1}, none) == EosOptions(seed=1)


def test_client_python_runs_the_processes_and_names_their_library(tmp_path: Path) -> None:
    """``--client-python`` reaches the options, the processes start on that interpreter, and
    the library it imports is the one named (asked of the interpreter, not of the harness)."""
    from workloads.clients import client_library
    from workloads.processes import child_env, spawn_module

    marker = tmp_path / "argv"
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\necho "$@" > {marker}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    options = _options("--workload", "eos", "--client-python", str(wrapper))
    assert options.workload_options.client_python == str(wrapper)
    assert _options(
        "--workload", "queue", "--client-python", str(wrapper)
    ).workload_options.client_python == str(wrapper)
    with (tmp_path / "log").open("wb") as log:
        proc = spawn_module("platform", [], child_env({}), log, python=str(wrapper))
        assert proc.wait(timeout=60) == 0
    assert marker.read_text().split() == ["-m", "platform"]
    assert re.fullmatch(
        r"confluent-kafka \d+\.\d+\.\d+, librdkafka \d+\.\d+\.\d+", client_library(str(wrapper))
    )
    assert client_library(str(wrapper)) == (
        f"confluent-kafka {confluent_kafka.__version__}, "
        f"librdkafka {confluent_kafka.libversion()[0]}"
    )
