"""One SSH connection to a machine of the SSH backend, with root, as paramiko gives it.

Every command runs through ``sh -c`` as root: directly when the login user is root, else
through ``sudo -n`` (passwordless sudo), found out once at connection time. Files go both ways
through the command channel itself (``cat``, ``tar``), not SFTP, so they go through the same
root as the commands do. One connection serves every thread (the nemesis and the run):
paramiko multiplexes channels over one transport, and a transport that dropped is reopened on
the next command. Every connection checks the machine's host key first
(``harness.substrate.ssh.hostkeys``).
"""

from __future__ import annotations

import logging
import shlex
import threading
from typing import IO, Any

from common.errors import HarnessError
from harness.substrate.ssh.hosts import HostKeyTrust, SshHost

log = logging.getLogger("harness.substrate.ssh.remote")

CONNECT_TIMEOUT = 10.0


class Remote:
    """A logged-in machine: ``run`` a command as root, ``read`` and ``write`` its files."""

    def __init__(
        self,
        host: SshHost,
        connect_timeout: float = CONNECT_TIMEOUT,
        trust: HostKeyTrust | None = None,
    ) -> None:
        self.host = host
        #: How the machine's host key is checked: the hosts file's ``HostsFile.trust``.
        self.trust = trust or HostKeyTrust()
        self.connect_timeout = connect_timeout
        self._client: Any = None
        self._prefix = ""
        self._lock = threading.RLock()  # connect() runs commands while holding it

    def __repr__(self) -> str:
        return f"Remote({self.host.label})"

    # --- the connection ---------------------------------------------------------------

    def connect(self) -> Remote:
        """Log in and find the way to root; every failure is one line naming the machine.
        The machine's host key is checked first (``harness.substrate.ssh.hostkeys``): one
        that differs from the recorded one is refused whatever ``trust`` allows."""
        try:
            import paramiko
        except ImportError:
            raise HarnessError(
                "the SSH backend needs the ssh extra: pip install 'kafka-eos-harness[ssh]'"
            ) from None
        from harness.substrate.ssh.hostkeys import changed_key_error, prepare_client

        h = self.host
        client = paramiko.SSHClient()
        source = prepare_client(client, h, self.trust)
        try:
            client.connect(
                h.host,
                port=h.port,
                username=h.user,
                key_filename=h.key,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
                allow_agent=h.key is None,
                look_for_keys=h.key is None,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise changed_key_error(h, exc, source) from None
        except HarnessError:  # the policy's refusal of an unknown key
            client.close()
            raise
        except paramiko.AuthenticationException:
            key = f"key {h.key}" if h.key else "the agent's and the default keys"
            raise HarnessError(f"ssh {h.label}: authentication failed with {key}") from None
        except paramiko.ssh_exception.NoValidConnectionsError:
            raise HarnessError(f"ssh {h.label}: the connection was refused") from None
        except TimeoutError:
            raise HarnessError(
                f"ssh {h.label}: no answer within {self.connect_timeout:.0f} s"
            ) from None
        except (OSError, paramiko.SSHException) as exc:
            raise HarnessError(f"ssh {h.label}: {exc}") from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
        self._client = client
        self._prefix = ""
        code, out, _ = self.run("id -u", check=False)
        if code == 0 and out.strip() == "0":
            return self
        self._prefix = "sudo -n "
        code, _, _ = self.run("true", check=False)
        if code != 0:
            self.close()
            raise HarnessError(
                f"ssh {h.label}: user {h.user} is not root and has no passwordless sudo "
                "(the brokers' faults need root: iptables, signals)"
            )
        return self

    def _transport_client(self) -> Any:
        with self._lock:
            t = self._client.get_transport() if self._client is not None else None
            if t is None or not t.is_active():
                log.info("ssh %s: reconnecting", self.host.label)
                self.connect()
            return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # --- commands ---------------------------------------------------------------------

    def _open(self, cmd: str, timeout: float | None) -> tuple[Any, Any, Any]:
        full = f"{self._prefix}sh -c {shlex.quote(cmd)}"
        try:
            return self._transport_client().exec_command(full, timeout=timeout)
        except Exception:
            # A transport that died between the check and the command: once more, fresh.
            self.close()
            return self._transport_client().exec_command(full, timeout=timeout)

    def run(
        self,
        cmd: str,
        *,
        check: bool = True,
        timeout: float | None = 120.0,
        stdin: bytes | IO[bytes] | None = None,
    ) -> tuple[int, str, str]:
        """``cmd`` in ``sh -c`` as root: (exit status, stdout, stderr). ``check``: a non-zero
        status is a one-line error naming the machine and the command's last line of output."""
        code, out, err = self.run_bytes(cmd, timeout=timeout, stdin=stdin)
        text = out.decode(errors="replace"), err.decode(errors="replace")
        if check and code != 0:
            detail = (text[1].strip() or text[0].strip()).splitlines()[-1:] or ["no output"]
            raise HarnessError(
                f"ssh {self.host.label}: {cmd.split()[0] if cmd.split() else cmd} failed "
                f"({code}): {detail[0][:200]}"
            )
        return code, text[0], text[1]

    def run_bytes(
        self, cmd: str, *, timeout: float | None = 120.0, stdin: bytes | IO[bytes] | None = None
    ) -> tuple[int, bytes, bytes]:
        chan_in, chan_out, chan_err = self._open(cmd, timeout)
        try:
            if stdin is not None:
                if isinstance(stdin, bytes):
                    chan_in.write(stdin)
                else:
                    while chunk := stdin.read(1 << 20):
                        chan_in.write(chunk)
                chan_in.channel.shutdown_write()
            err_box: list[bytes] = []
            reader = threading.Thread(target=lambda: err_box.append(chan_err.read()), daemon=True)
            reader.start()
            out = chan_out.read()
            reader.join(timeout)
            code = chan_out.channel.recv_exit_status()
        except TimeoutError:
            raise HarnessError(
                f"ssh {self.host.label}: {cmd.split()[0]} took more than {timeout:.0f} s"
            ) from None
        finally:
            chan_in.close()
        return code, out, err_box[0] if err_box else b""

    def stream_out(self, cmd: str, sink: IO[bytes], timeout: float | None = 600.0) -> None:
        """Copy ``cmd``'s standard output into ``sink`` as it comes (a tar of a directory)."""
        _chan_in, chan_out, chan_err = self._open(cmd, timeout)
        while chunk := chan_out.read(1 << 20):
            sink.write(chunk)
        code = chan_out.channel.recv_exit_status()
        if code != 0:
            err = chan_err.read().decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise HarnessError(f"ssh {self.host.label}: {cmd.split()[0]} failed: {err[0][:200]}")

    def read(self, path: str) -> bytes | None:
        """A file's bytes, or None when it cannot be read."""
        code, out, _ = self.run_bytes(f"cat {shlex.quote(path)}")
        return out if code == 0 else None

    def write(self, path: str, data: bytes | str, mode: str = "0644") -> None:
        payload = data.encode() if isinstance(data, str) else data
        q = shlex.quote(path)
        self.run(f"mkdir -p $(dirname {q}) && cat > {q} && chmod {mode} {q}", stdin=payload)
