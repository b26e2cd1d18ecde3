"""Secured clusters' parts that need no cluster: the certificates, the brokers' settings, the
client settings each library gets, the refusals before a run and the line naming a missing
ACL."""

from __future__ import annotations

import ipaddress
import json
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from common.acls import Acl
from common.errors import HarnessError
from common.kafkaconf import (
    ENV,
    REAUTH_MS,
    command_config,
    harness_security,
    java,
    librdkafka,
    secured,
)
from harness.kafka import security
from harness.run.options import RunOptions
from harness.run.runner import refusal_line
from harness.run.workloads import complete
from harness.run.workloads import get as get_workload
from workloads.connect.config import ConnectOptions
from workloads.eos.config import EosOptions
from workloads.processes import NotAuthorized
from workloads.streams.config import StreamsOptions


def _material(tmp_path: Path, mode: str) -> security.Material:
    brokers = {1: ["10.250.0.11", "127.0.0.1"], 2: ["10.250.0.12", "127.0.0.1"]}
    return security.make_material(mode, tmp_path / "sec", brokers, ["client"])


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_every_certificate_is_signed_by_the_ca_and_names_what_it_serves(tmp_path: Path) -> None:
    m = _material(tmp_path, "tls")
    ca = _cert(m.ca)
    key = ca.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    for name, cn in (("broker-1", "broker"), ("broker-2", "broker"), ("client", "client")):
        cert = _cert(m.cert(name))
        cert.verify_directly_issued_by(ca)
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == cn
    sans = _cert(m.cert("broker-2")).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert set(sans.value.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("10.250.0.12"),
        ipaddress.ip_address("127.0.0.1"),
    }
    # Private keys and keystores are the owner's alone; so is the directory.
    for path in (m.key("client"), m.keystore("broker-1"), m.key("harness")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(m.root.stat().st_mode) == 0o700
    assert m.passwords == {}  # tls: identities are certificates


def test_sasl_ssl_gives_each_identity_a_scram_password_that_no_setting_holds(
    tmp_path: Path,
) -> None:
    m = _material(tmp_path, "sasl_ssl")
    assert set(m.passwords) == {"harness", "client"}
    assert len(set(m.passwords.values())) == 2
    settings = m.broker_settings(1)
    assert settings["listener.security.protocol.map"] == (
        "CLIENT:SASL_SSL,INTERNAL:SSL,CONTROLLER:SSL"
    )
    assert settings["super.users"] == "User:broker;User:harness"
    assert settings["allow.everyone.if.no.acl.found"] == "false"
    assert settings["ssl.keystore.location"].endswith("broker-1.keystore.pem")
    text = json.dumps(settings)
    text += json.dumps(m.contract("client")) + json.dumps(m.contract("client", "internal"))
    for password in m.passwords.values():
        assert password not in text
    args = m.format_args()
    assert args.count("--add-scram") == 2
    assert f"SCRAM-SHA-512=[name=client,password={m.passwords['client']}]" in args


def test_tls_secures_every_listener_with_certificates(tmp_path: Path) -> None:
    m = _material(tmp_path, "tls")
    settings = m.broker_settings(2)
    assert settings["listener.security.protocol.map"] == "CLIENT:SSL,INTERNAL:SSL,CONTROLLER:SSL"
    assert settings["ssl.client.auth"] == "required"
    assert m.format_args() == []


def test_each_library_gets_the_contract_object_in_its_own_terms(tmp_path: Path) -> None:
    m = _material(tmp_path, "sasl_ssl")
    scram = m.contract("client")
    rdk = librdkafka(scram)
    assert rdk["security.protocol"] == "SASL_SSL"
    assert rdk["sasl.password"] == m.passwords["client"]
    assert rdk["ssl.ca.location"] == str(m.ca)
    jv = java(scram)
    assert f'password="{m.passwords["client"]}"' in jv["sasl.jaas.config"]
    assert jv["ssl.truststore.type"] == "PEM"
    tls = m.contract("client", "internal")
    assert librdkafka(tls)["ssl.certificate.location"] == str(m.cert("client"))
    assert java(tls)["ssl.keystore.location"] == str(m.keystore("client"))
    assert librdkafka(None) == {} and java(None) == {}


def test_connect_and_streams_get_the_object_and_declare_their_acls(tmp_path: Path) -> None:
    m = _material(tmp_path, "sasl_ssl")
    scram = m.contract("client")
    connect = ConnectOptions()
    props = connect.worker_properties("127.0.0.1:1", 8083, scram)
    # The worker's own clients and its connectors' each get the settings; the password only
    # by reference to its file, which Kafka's directory provider reads in the worker.
    folder, name = Path(scram["password_file"]).parent, Path(scram["password_file"]).name
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert props[f"{prefix}security.protocol"] == "SASL_SSL"
        assert f'password="${{dir:{folder}:{name}}}"' in props[f"{prefix}sasl.jaas.config"]
    assert props["config.providers.dir.class"].endswith("DirectoryConfigProvider")
    assert m.passwords["client"] not in json.dumps(props)
    assert "security.protocol" not in connect.worker_properties("127.0.0.1:1", 8083)
    streams = StreamsOptions()
    cfg = streams.instance_config(0, 0, "127.0.0.1:1", "h.jsonl", "state")
    assert cfg.security is None
    cfg.security = scram
    assert json.loads(cfg.to_json())["security"]["password_file"] == scram["password_file"]
    # KIP-618's transactional ids (the leader's and the tasks'), Streams' internal topics.
    connect_acls = {a.text() for a in get_workload("connect").spec.acls(connect)}
    assert 'Write on transactional ids named "connect-cluster-connect"' in connect_acls
    assert 'Write on transactional ids prefixed "connect-seq-"' in connect_acls
    streams_acls = {a.text() for a in get_workload("streams").spec.acls(streams)}
    assert f'All on topics prefixed "{streams.group_id}"' in streams_acls
    assert f'Write on transactional ids prefixed "{streams.group_id}"' in streams_acls


def test_the_harness_secures_its_own_clients_only_on_the_secured_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = _material(tmp_path, "sasl_ssl")
    client, internal = ["127.0.0.1:21001", "127.0.0.1:21002"], ["10.250.0.11:9093"]
    monkeypatch.setenv(ENV, str(m.write_harness_settings(client, internal)))
    assert secured({"bootstrap.servers": ",".join(client)})["sasl.username"] == "harness"
    internal_conf = secured({"bootstrap.servers": internal[0]})
    assert internal_conf["security.protocol"] == "SSL"
    assert "sasl.username" not in internal_conf
    # A plaintext cluster beside it (a test worker's) is left as it is.
    assert secured({"bootstrap.servers": "127.0.0.1:21041"}) == {
        "bootstrap.servers": "127.0.0.1:21041"
    }
    assert harness_security("10.250.7.11:9093") is None
    tool = command_config(internal[0])
    assert tool is not None
    assert "ssl.keystore.location=" in Path(tool).read_text()
    assert stat.S_IMODE(Path(tool).stat().st_mode) == 0o600
    monkeypatch.delenv(ENV)
    assert secured({"bootstrap.servers": client[0]}) == {"bootstrap.servers": client[0]}


def test_a_secured_run_is_refused_where_nothing_takes_its_settings() -> None:
    with pytest.raises(HarnessError, match="eos, connect and streams workloads, not queue"):
        complete(RunOptions(workload="queue", security="tls"))
    with pytest.raises(HarnessError, match="client copier takes no security settings"):
        complete(RunOptions(workload_options=EosOptions(client="copier"), security="sasl_ssl"))
    with pytest.raises(HarnessError, match="--withhold-acl needs --security"):
        complete(RunOptions(withhold_acl="group"))
    with pytest.raises(HarnessError, match=r"hold no ACL on one \(they hold: group, topic, tran"):
        complete(RunOptions(security="tls", withhold_acl="cluster"))
    with pytest.raises(HarnessError, match="unknown --security"):
        security.check_mode("ssl")


def test_a_refused_client_is_one_line_naming_the_acl_it_lacked() -> None:
    options = complete(RunOptions(security="sasl_ssl", withhold_acl="transactional_id"))
    line = refusal_line(NotAuthorized(4, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"), options)
    assert line == (
        "process 4 was refused by the cluster (TRANSACTIONAL_ID_AUTHORIZATION_FAILED): "
        'User:client lacks Write on transactional ids prefixed "eos" '
        "(withheld by --withhold-acl transactional_id)"
    )
    topic = refusal_line(NotAuthorized(1, "TOPIC_AUTHORIZATION_FAILED"), options)
    assert 'Read on topics named "eos-input" and Write on topics named "eos-output"' in topic
    assert "the harness granted it" in topic
    assert "\n" not in topic


def test_an_acl_reads_as_a_person_would_say_it() -> None:
    assert Acl("group", "g", "read").text() == 'Read on groups named "g"'
    assert Acl("transactional_id", "t", "write", prefixed=True).text() == (
        'Write on transactional ids prefixed "t"'
    )


def test_a_docker_plan_mounts_the_certificates_and_secures_the_observe_listener(
    tmp_path: Path,
) -> None:
    import dataclasses

    from harness.substrate.docker import plan as dp

    m = _material(tmp_path, "sasl_ssl")
    plan = dp.plan_cluster("20260101T000000-abcdef12", "o", "CID", "4.4.0", [30000, 30001,
                           30002, 30003, 30004], {}, transaction_version=2)  # fmt: skip
    plan = dataclasses.replace(
        plan,
        security_settings={
            n.node_id: m.broker_settings(n.node_id, at=dp.SECURITY_DIR, observe=True)
            for n in plan.nodes
        },
        security_dir=str(m.root),
        security_format_args=tuple(m.format_args()),
    )
    props = dp.node_properties(plan, 2)
    assert props["listener.security.protocol.map"].endswith(",OBSERVE:SSL")
    assert props["ssl.keystore.location"] == f"{dp.SECURITY_DIR}/broker-2.keystore.pem"
    assert props["ssl.truststore.location"] == f"{dp.SECURITY_DIR}/ca.pem"
    spec = dp.broker_container_spec(plan, 2)
    assert spec["volumes"][str(m.root)] == {"bind": dp.SECURITY_DIR, "mode": "ro"}
    words = dp.format_args(plan).split()
    assert words[:2] == ["--feature", "transaction.version=2"]
    assert words.count("--add-scram") == 2
    for password in m.passwords.values():
        assert password not in dp.render_properties(props)


class _Cluster:
    """Just enough of a cluster for ``abilities_of``: the credentials ability's verbs."""

    def __init__(self, secured: bool, reauth_ms: int | None = None) -> None:
        self.secured = secured
        self.reauth_ms = reauth_ms

    def withdraw_client_acls(self, resource: str) -> list[str]:
        return []

    def restore_client_acls(self, resource: str) -> list[str]:
        return []

    def rotate_client_credentials(self) -> str:
        return ""


def test_the_credential_faults_run_only_on_a_secured_cluster() -> None:
    from nemeses.control import abilities_of
    from nemeses.kinds import skipped_by_all

    assert "credentials" in abilities_of(_Cluster(True))
    plain = abilities_of(_Cluster(False))
    assert "credentials" not in plain
    skipped = skipped_by_all(abilities=frozenset(plain))
    assert set(skipped) >= {"acl-revoke", "credential-rotate"}
    assert "credentials" in skipped["acl-revoke"]
    # Re-authentication is SASL's: a tls cluster has the credentials, not the sessions.
    assert "reauth" not in abilities_of(_Cluster(True)) and "reauth" not in plain
    assert "reauth" in abilities_of(_Cluster(True, REAUTH_MS))
    assert "reauth-pause" in skipped_by_all(abilities=abilities_of(_Cluster(True)))


def test_a_reauth_pause_outlasts_the_clients_sessions_the_brokers_are_given(
    tmp_path: Path,
) -> None:
    from nemeses.schedule import generate

    key = "listener.name.client.scram-sha-512.connections.max.reauth.ms"
    assert _material(tmp_path / "s", "sasl_ssl").broker_settings(1)[key] == str(REAUTH_MS)
    assert key not in _material(tmp_path / "t", "tls").broker_settings(1)
    sched = generate(["reauth-pause"], seed=7, time_limit=120.0, interval=5.0, duration=2.0)
    lengths = [e.duration for e in sched.events]
    assert lengths and all(REAUTH_MS / 1000 + 2 <= d <= REAUTH_MS / 1000 + 5 for d in lengths)
    longer = generate(["reauth-pause"], seed=7, time_limit=120.0, interval=5.0, duration=30.0)
    assert {e.duration for e in longer.events} == {30.0}


def test_a_rotation_replaces_the_password_file_and_the_certificate(tmp_path: Path) -> None:
    sasl = _material(tmp_path / "a", "sasl_ssl")
    old = sasl.passwords["client"]
    new = security.new_password()
    sasl.write_password("client", new)
    assert new != old and sasl.passwords["client"] == new
    assert (sasl.root / "client.password").read_text() == new
    tls = _material(tmp_path / "b", "tls")
    before = _cert(tls.cert("client"))
    tls.reissue("client")
    after = _cert(tls.cert("client"))
    assert after.serial_number != before.serial_number
    after.verify_directly_issued_by(_cert(tls.ca))
    assert after.public_key() != before.public_key()
