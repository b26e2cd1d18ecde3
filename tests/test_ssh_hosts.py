"""The SSH backend's logic without machines: the hosts file, the names and commands it uses
to find a run's leftovers, and that ``auto`` never picks it."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.errors import HarnessError
from harness.substrate.backends import choose_backend
from harness.substrate.ssh import machine
from harness.substrate.ssh.hosts import SshHost, load_hosts, render_hosts


def test_a_written_hosts_file_reads_back(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("k")
    hosts = [SshHost("10.0.0.1", 22, "root", str(key)), SshHost("node2", 2222, "ops", None)]
    path = tmp_path / "hosts.toml"
    path.write_text(render_hosts(hosts, lab="abc"))
    got = load_hosts(path)
    assert got.hosts == hosts and got.lab == "abc"


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
