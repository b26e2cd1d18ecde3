"""The SSH backend's logic without machines: the hosts file, the host-key checks (against
an SSH server of paramiko's in this process, with keys made here), the names and commands it
uses to find a run's leftovers, and that ``auto`` never picks it."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from common.errors import HarnessError
from harness.substrate.backends import choose_backend
from harness.substrate.ssh import machine
from harness.substrate.ssh.hostkeys import HostKeyPolicy, describe, recorded_keys
from harness.substrate.ssh.hosts import HostKeyTrust, SshHost, load_hosts, render_hosts
from harness.substrate.ssh.remote import Remote


def ed25519_public() -> str:
    """A fresh Ed25519 public key as a .pub file's line (paramiko cannot generate these)."""
    public = Ed25519PrivateKey.generate().public_key()
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return line.decode()


def test_a_written_hosts_file_reads_back(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("k")
    host_key = ed25519_public()
    hosts = [
        SshHost("10.0.0.1", 22, "root", str(key), host_key),
        SshHost("node2", 2222, "ops", None),
    ]
    path = tmp_path / "hosts.toml"
    path.write_text(render_hosts(hosts, lab="abc"))
    got = load_hosts(path)
    assert got.hosts == hosts and got.lab == "abc"
    assert got.known_hosts == tmp_path / "hosts.known_hosts"  # beside it, by default


def test_a_host_key_is_kept_without_its_comment_and_known_hosts_is_beside(
    tmp_path: Path,
) -> None:
    key = ed25519_public()
    path = tmp_path / "hosts.toml"
    path.write_text(
        f'known_hosts = "keys/known"\n[[node]]\nhost = "a"\nhost_key = "{key} root@a"\n'
    )
    got = load_hosts(path)
    assert got.hosts[0].host_key == key and got.known_hosts == tmp_path / "keys" / "known"
    assert got.trust(accept_new=True) == HostKeyTrust(tmp_path / "keys" / "known", True)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[node]]\nhost = 'a'\nport = 0\n", "port must be 1-65535"),
        ("[[node]]\nport = 22\n", "host is missing"),
        ("[[node]]\nhost = 'a'\npassword = 'x'\n", "unknown key 'password'"),
        ("[[node]]\nhost = 'a'\nkey = '/nonexistent/id'\n", "does not exist"),
        ("[[node]]\nhost = 'a'\n[[node]]\nhost = 'a'\n", "lists a machine twice"),
        ("[lab]\nname = 'x'\n", "lists no [[node]]"),
        ("[[node]\n", "is not valid TOML"),
        ("[[node]]\nhost = 'a'\nhost_key = 'AAAAC3Nza'\n", "host_key must be 'TYPE BASE64'"),
        ("[[node]]\nhost = 'a'\nhost_key = 'ssh-ed25519 !!'\n", "host_key is not base64"),
        (
            "[[node]]\nhost = 'a'\nhost_key = 'ssh-foo AAAA'\n",
            "type paramiko does not know: 'ssh-foo'",
        ),
        (
            "[[node]]\nhost = 'a'\nhost_key = 'ssh-rsa AAAAC3NzaC1lZDI1NTE5'\n",
            "does not decode as a ssh-rsa",
        ),
        ("[[node]]\nhost = 'a'\nhost_key = 22\n", "host_key must be a string"),
        ("known_hosts = 3\n[[node]]\nhost = 'a'\n", "known_hosts must be a path"),
        ("known_hosts = '.'\n[[node]]\nhost = 'a'\n", "is not a file"),
        ("[[node]]\nhost = 'a'\nknown_hosts = 'k'\n", "goes at the top"),
        ("hosts = 'a'\n[[node]]\nhost = 'a'\n", "unknown key 'hosts'"),
    ],
)
def test_a_bad_hosts_file_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    with pytest.raises(HarnessError, match=None) as err:
        load_hosts(path)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_missing_hosts_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"hosts file .*missing\.toml"):
        load_hosts(tmp_path / "missing.toml")


@contextmanager
def ssh_server(host_key: paramiko.PKey) -> Iterator[int]:
    """An SSH server of paramiko's on a free local port, offering ``host_key`` and refusing
    every login: enough for a client to see (and check) its host key. Yields the port."""
    listener = socket.create_server(("127.0.0.1", 0))
    transports: list[paramiko.Transport] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed: the test is over
                return
            t = paramiko.Transport(conn)
            t.add_server_key(host_key)
            transports.append(t)
            # Every login refused; a client that hangs up at the host key ends it early.
            with suppress(paramiko.SSHException, EOFError, OSError):
                t.start_server(server=paramiko.ServerInterface())

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for t in transports:
            t.close()


@pytest.fixture
def machine_key() -> paramiko.PKey:
    return paramiko.ECDSAKey.generate()


@pytest.fixture
def login_key(tmp_path: Path) -> str:
    """A key to log in with (which the test server refuses), in OpenSSH's format."""
    path = tmp_path / "login.key"
    path.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    return str(path)


def line_of(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.get_base64()}"


def connect_error(host: SshHost, trust: HostKeyTrust) -> str:
    """The one line a connection to the test server ends with (its logins all fail)."""
    with pytest.raises(HarnessError) as err:
        Remote(host, connect_timeout=5, trust=trust).connect()
    text = str(err.value)
    assert "\n" not in text
    return text


def test_a_matching_key_passes_a_changed_one_never(
    tmp_path: Path, machine_key: paramiko.PKey, login_key: str
) -> None:
    trust = HostKeyTrust(tmp_path / "known", accept_new=True, user_known_hosts=tmp_path / "u")
    other = paramiko.ECDSAKey.generate()
    with ssh_server(machine_key) as port:
        good = SshHost("127.0.0.1", port, "root", login_key, line_of(machine_key))
        assert "authentication failed" in connect_error(good, trust)  # past the host key
        for recorded in (line_of(other), ed25519_public()):  # another key, another type
            bad = SshHost("127.0.0.1", port, "root", login_key, recorded)
            said = connect_error(bad, trust)  # even with --accept-new-host-keys
            assert "host key mismatch, refused" in said and f"127.0.0.1:{port}" in said
            assert describe(machine_key) in said
            assert describe(paramiko.PKey.from_type_string(*_split(recorded))) in said
    assert not (tmp_path / "known").exists()


def _split(line: str) -> tuple[str, bytes]:
    import base64

    kind, data = line.split()[:2]
    return kind, base64.b64decode(data)


def test_an_unknown_key_is_refused_or_recorded_on_first_use(
    tmp_path: Path, machine_key: paramiko.PKey, login_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    known = tmp_path / "hosts.known_hosts"
    refuse = HostKeyTrust(known, user_known_hosts=tmp_path / "user_known_hosts")
    with ssh_server(machine_key) as port:
        host = SshHost("127.0.0.1", port, "root", login_key)
        said = connect_error(host, refuse)
        assert f"root@127.0.0.1:{port}: unknown host key {describe(machine_key)}" in said
        assert "--accept-new-host-keys" in said and str(known) in said
        assert not known.exists()
        accept = HostKeyTrust(known, True, tmp_path / "user_known_hosts")
        with caplog.at_level(logging.WARNING, "harness.substrate.ssh.hostkeys"):
            assert "authentication failed" in connect_error(host, accept)
        said_by_us = [r for r in caplog.records if r.name == "harness.substrate.ssh.hostkeys"]
        assert [r.getMessage() for r in said_by_us] == [
            f"ssh root@127.0.0.1:{port}: new host key {describe(machine_key)} accepted "
            f"(--accept-new-host-keys), recorded in {known}"
        ]
        assert known.read_text() == f"[127.0.0.1]:{port} {line_of(machine_key)}\n"
        # Recorded: now known without the flag; and a changed key is refused with it.
        assert "authentication failed" in connect_error(host, refuse)
        known.write_text(f"[127.0.0.1]:{port} {line_of(paramiko.ECDSAKey.generate())}")
        said = connect_error(host, accept)
        assert "host key mismatch" in said and str(known) in said


def test_the_first_source_that_knows_a_machine_decides(tmp_path: Path) -> None:
    keys = [paramiko.ECDSAKey.generate() for _ in range(3)]
    known, user = tmp_path / "known", tmp_path / "user"
    known.write_text(f"# a comment\nelsewhere {line_of(keys[1])}\n")
    user.write_text(f"a {line_of(keys[2])}\n[a]:2222 {line_of(keys[2])}\n")
    trust = HostKeyTrust(known, user_known_hosts=user)
    assert recorded_keys(SshHost("a"), trust) == ({keys[2].get_name(): keys[2]}, str(user))
    assert recorded_keys(SshHost("a", 2222), trust)[1] == str(user)
    assert recorded_keys(SshHost("b"), trust) == ({}, "")
    known.write_text(f"a {line_of(keys[1])}")  # no newline at the end: recording adds one
    assert recorded_keys(SshHost("a"), trust) == ({keys[1].get_name(): keys[1]}, str(known))
    own = SshHost("a", host_key=line_of(keys[0]))
    assert recorded_keys(own, trust) == ({keys[0].get_name(): keys[0]}, "the hosts file's host_key")
    client = paramiko.SSHClient()
    HostKeyPolicy(SshHost("b"), HostKeyTrust(known, True, user)).missing_host_key(
        client, "b", keys[2]
    )
    assert known.read_text().splitlines() == [f"a {line_of(keys[1])}", f"b {line_of(keys[2])}"]
    assert client.get_host_keys().lookup("b") is not None


def test_the_flag_reaches_the_cluster_from_every_command_with_hosts() -> None:
    from harness.cli import build_parser
    from harness.run.arguments import options_from_args
    from harness.run.runner import cluster_config_of

    parse = build_parser().parse_args
    given = ["--hosts", "h.toml", "--accept-new-host-keys"]
    options = options_from_args(parse(["run", "--backend", "ssh", "--seed", "1", *given]))
    assert options.accept_new_host_keys and cluster_config_of(options, None).accept_new_host_keys
    assert not options_from_args(parse(["run", "--seed", "1"])).accept_new_host_keys
    assert parse(["cluster", *given]).accept_new_host_keys
    assert parse(["reap", *given]).accept_new_host_keys


def test_a_run_s_chain_and_tag_are_its_own() -> None:
    a, b = "20261127T010203-0123abcd", "20261127T010203-0123abce"
    assert machine.chain_name(a) != machine.chain_name(b)
    assert len(machine.chain_name(a)) <= 28  # iptables' limit on chain names
    reap = machine.reap_run_command(a)
    assert f"KAFKA_HARNESS_RUN={a}" in reap and machine.chain_name(a) in reap
    assert f"kafka-harness:{a}" in reap and reap.endswith("true")


def test_java_versions_are_read_from_both_formats() -> None:
    assert machine._java_major('openjdk version "17.0.13" 2024-10-15') == 17
    assert machine._java_major('java version "1.8.0_392"') == 8
    assert machine._java_major("no java here") is None


def test_auto_never_chooses_the_ssh_backend() -> None:
    with pytest.raises(HarnessError, match="no backend can run here"):
        choose_backend("auto", {"process": "no java", "docker": "no engine"})
    assert choose_backend("ssh", {}) == "ssh"


def test_the_connection_lock_is_reentrant() -> None:
    """The reconnect path runs commands (``id -u``) while it holds the connection's lock:
    it must be re-entrant, or the first command after a dropped connection would hang."""
    from harness.substrate.ssh.remote import Remote

    r = Remote(SshHost("127.0.0.1", 1))
    with r._lock:
        again = r._lock.acquire(blocking=False)
        assert again
        r._lock.release()


def test_the_driver_advertises_its_address_towards_a_cluster_master() -> None:
    from checkers.spark import _address_towards, _conf_pairs

    assert _address_towards("spark://127.0.0.1:7077") == "127.0.0.1"
    assert _address_towards("local[*]") is None
    assert _conf_pairs("spark://127.0.0.1:7077", None)["spark.driver.host"] == "127.0.0.1"
    assert _conf_pairs("local[2]", None)["spark.driver.host"] == "127.0.0.1"
