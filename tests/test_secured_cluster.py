"""A secured cluster's own life (``--security sasl_ssl``): its authorizer keeps out a client
without credentials and one without ACLs, the eos workload under faults is exactly-once on
it with the Python and the Java processors, so are the Streams application and Connect's
workers, and a processor without its transactional-id ACL stops the run with one line, its
history kept. One cluster for the module: it is the thing
under test, so it cannot be the worker's plaintext one."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.errors import HarnessError
from common.kafkaconf import REAUTH_MS, librdkafka, secured
from harness.run.options import RunOptions
from harness.run.runner import execute, run_on_shared
from harness.substrate.api import READY_TOPIC, ClusterConfig
from harness.substrate.process.cluster import Cluster
from workloads.connect.config import ConnectOptions
from workloads.eos.config import EosOptions
from workloads.streams.config import StreamsOptions

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    store = tmp_path_factory.mktemp("sasl-cluster")
    with Cluster(ClusterConfig(security="sasl_ssl", store=store, dump_logs=False)) as cluster:
        yield cluster


def _topics(conf: dict[str, object], timeout: float = 10) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**conf, "log_level": 0, "socket.timeout.ms": 5000})
    return set(admin.list_topics(timeout=timeout).topics)


def _options(tag: str, client: str, values: int = 2000, **run: object) -> RunOptions:
    wopts = EosOptions.from_dict(
        {**{"name_suffix": f"-{tag}"}, "client": client, "seed": 3, "values": values}
    )
    settings: dict[str, object] = {"time_limit": 25, **run}
    return RunOptions(workload_options=wopts, security="sasl_ssl", seed=3, **settings)  # type: ignore[arg-type]


def test_the_authorizer_keeps_out_a_stranger_and_shows_a_client_only_its_acls(
    sasl_cluster: Cluster,
) -> None:
    from confluent_kafka import KafkaException

    bootstrap = sasl_cluster.bootstrap
    assert READY_TOPIC in _topics(secured({"bootstrap.servers": bootstrap}))
    # No credentials: the TLS listener with SCRAM does not speak plaintext.
    with pytest.raises(KafkaException):
        _topics({"bootstrap.servers": bootstrap}, timeout=3)
    # The right user with a wrong password is refused too.
    contract = sasl_cluster.client_security
    assert contract is not None
    wrong = {**librdkafka(contract), "sasl.password": "not-the-password"}
    with pytest.raises(KafkaException):
        _topics({"bootstrap.servers": bootstrap, **wrong}, timeout=3)
    # The clients' user authenticates but, before its workload's ACLs, sees no topic.
    assert READY_TOPIC not in _topics({"bootstrap.servers": bootstrap, **librdkafka(contract)})


@pytest.mark.parametrize(
    ("client", "nemesis", "seconds"),
    [("python", "acl-revoke,credential-rotate,pause", 20), ("java", "reauth-pause", 18)],
)
def test_eos_under_faults_is_exactly_once_on_sasl_ssl(
    sasl_cluster: Cluster, tmp_path: Path, client: str, nemesis: str, seconds: int
) -> None:
    tag = f"sec-{client}-{uuid.uuid4().hex[:6]}"
    options = _options(
        tag, client, nemesis=nemesis, nemesis_interval=4, nemesis_duration=4, time_limit=seconds
    )
    result = run_on_shared(sasl_cluster, options, tmp_path / "run")
    verdict = result.verdict or {}
    assert verdict.get("valid") is True, verdict
    ops = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").open()]
    started = {
        op["value"]["kind"]
        for op in ops
        if op.get("process") == "nemesis" and op["type"] == "ok" and op["f"] == "start"
    }
    assert started and started <= set(nemesis.split(",")), started
    if client == "java":  # every SASL session on the paused broker ran out while it stood
        (pause,) = [
            op["value"]
            for op in ops
            if op.get("process") == "nemesis" and op["type"] == "ok" and op["f"] == "start"
        ]
        assert pause["reauth_ms"] == REAUTH_MS, pause
    if client == "python":  # the seed gives it an acl-revoke
        assert "acl-revoke" in started, started
        reasons = [
            op["value"].get("reason", "")
            for op in ops
            if op.get("f") == "exit" and op["type"] == "ok" and isinstance(op["process"], int)
        ]
        # Refused processors exited 8 and their slots went on.
        assert any(r.startswith("not-authorized ") for r in reasons), reasons
    assert result.summary["missing"] == 0 and result.summary["complete_read"]
    assert result.summary["seeded"] > 0
    _kept_no_secret(sasl_cluster, tmp_path / "run")


@pytest.mark.parametrize("client", ["franz-go", "kafkajs"])
def test_the_go_and_node_processors_log_in_with_the_contract_object(
    sasl_cluster: Cluster, tmp_path: Path, client: str
) -> None:
    """franz-go's and KafkaJS's own mappings of the security object (TLS against the CA,
    SCRAM from the password file; Confluent's JavaScript client maps it as librdkafka, like
    the Python processors): without them no processor could start on this listener."""
    tag = f"sec-{client}-{uuid.uuid4().hex[:6]}"
    options = _options(tag, client, values=600, time_limit=8)
    result = run_on_shared(sasl_cluster, options, tmp_path / "run")
    assert (result.verdict or {}).get("valid") is True, result.verdict
    assert result.summary["missing"] == 0 and result.summary["seeded"] == 600, result.summary
    _kept_no_secret(sasl_cluster, tmp_path / "run")


def _kept_no_secret(cluster: Cluster, run_dir: Path) -> None:
    """No password of the cluster's lands in what the run keeps."""
    assert cluster.security is not None
    kept = "".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
    for password in cluster.security.passwords.values():
        assert password not in kept


@pytest.mark.parametrize(
    ("workload", "nemesis", "seconds"), [("streams", "acl-revoke", 16), ("connect", "", 15)]
)
def test_streams_and_connect_are_exactly_once_on_sasl_ssl(
    sasl_cluster: Cluster, tmp_path: Path, workload: str, nemesis: str, seconds: int
) -> None:
    """Both take the contract's security object (Streams in its instance configuration,
    Connect's workers and connectors by reference in their properties files) and need only
    the ACLs their specs declare; a Streams thread refused by a revoked ACL exits 8 and its
    slot goes on."""
    tag = f"sec-{workload}-{uuid.uuid4().hex[:6]}"
    raw = {"name_suffix": f"-{tag}", "seed": 5}
    wopts = (
        StreamsOptions.from_dict({**raw, "values": 1500})
        if workload == "streams"
        else ConnectOptions.from_dict({**raw, "reconfigure": False})
    )
    options = RunOptions(
        workload=workload, workload_options=wopts, security="sasl_ssl", seed=5,
        time_limit=seconds, nemesis=nemesis or "none", nemesis_interval=4, nemesis_duration=5,
    )  # fmt: skip
    result = run_on_shared(sasl_cluster, options, tmp_path / "run")
    assert (result.verdict or {}).get("valid") is True, result.verdict
    ops = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").open()]
    if nemesis:
        exits = [
            json.loads(line)["value"].get("reason", "")
            for path in (tmp_path / "run" / "processes").glob("*.jsonl")
            for line in path.read_text().splitlines()[1:]
            if '"f":"exit"' in line.replace(" ", "") and '"type":"ok"' in line.replace(" ", "")
        ]
        assert any(r.startswith("not-authorized ") for r in exits), exits
    else:
        assert not [op for op in ops if op.get("process") == "nemesis"]
    assert result.summary["missing"] == 0, result.summary
    _kept_no_secret(sasl_cluster, tmp_path / "run")


def test_a_processor_without_its_transactional_id_acl_stops_the_run_with_one_line(
    sasl_cluster: Cluster, tmp_path: Path
) -> None:
    tag = f"sec-acl-{uuid.uuid4().hex[:6]}"
    options = _options(tag, "python", withhold_acl="transactional_id")
    with pytest.raises(HarnessError) as caught:
        execute(sasl_cluster, options, tmp_path / "run")
    line = str(caught.value)
    assert "\n" not in line
    assert "(TRANSACTIONAL_ID_AUTHORIZATION_FAILED): User:client lacks Write on transactional" in (
        line
    )
    assert f'prefixed "eos-{tag}"' in line
    assert (tmp_path / "run" / "history.jsonl").stat().st_size > 0
