"""A direct Metadata request to one chosen broker, over Kafka's wire protocol.

Client libraries send metadata requests to whichever broker they like. During a partition
that is wrong for a harness: an isolated broker keeps serving its stale view (it still
believes it leads), so "who leads now" must be asked of every broker separately and the
freshest answer (highest leader epoch) believed. Metadata v7 is the oldest version that
carries leader epochs and is still served by Kafka 3.x and 4.x (4.0 dropped v0-v3).
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass

from common.kafkaconf import harness_security

METADATA_KEY = 3
METADATA_VERSION = 7


@dataclass(frozen=True)
class PartitionView:
    """One broker's view of one partition."""

    source: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: int


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        out = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return out

    def i8(self) -> int:
        return self.take(">b")[0]

    def i16(self) -> int:
        return self.take(">h")[0]

    def i32(self) -> int:
        return self.take(">i")[0]

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def int_array(self) -> tuple[int, ...]:
        n = self.i32()
        return tuple(self.i32() for _ in range(max(n, 0)))


def _encode_request(topics: list[str], correlation_id: int) -> bytes:
    client = b"kafka-harness"
    body = struct.pack(">hhih", METADATA_KEY, METADATA_VERSION, correlation_id, len(client))
    body += client + struct.pack(">i", len(topics))
    for t in topics:
        raw = t.encode()
        body += struct.pack(">h", len(raw)) + raw
    body += struct.pack(">b", 0)  # allow_auto_topic_creation = false
    return struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    security = harness_security(f"{host}:{port}")
    if security is None:
        return sock
    context = ssl.create_default_context(cafile=security["ca"])
    context.load_cert_chain(security["certificate"], security["key"])
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise


def fetch_partitions(
    host: str, port: int, topics: list[str], source: int, timeout: float = 3.0
) -> dict[tuple[str, int], PartitionView]:
    """Ask the broker at ``host:port`` (node ``source``) for its view of ``topics``."""
    return fetch_metadata(host, port, topics, source, timeout)[1]


def fetch_metadata(
    host: str, port: int, topics: list[str], source: int, timeout: float = 3.0
) -> tuple[set[int], dict[tuple[str, int], PartitionView]]:
    """The broker's live (registered, unfenced) broker ids and its view of ``topics``; over
    TLS with the harness's certificate when a secured cluster is up."""
    with _connect(host, port, timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_encode_request(topics, correlation_id=1))
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        r = _Reader(_recv_exact(sock, size))
    r.i32()  # correlation id
    r.i32()  # throttle time
    brokers: set[int] = set()
    for _ in range(r.i32()):  # brokers: id, host, port, rack
        brokers.add(r.i32())
        r.string()
        r.i32()
        r.string()
    r.string()  # cluster id
    r.i32()  # controller id
    out: dict[tuple[str, int], PartitionView] = {}
    for _ in range(r.i32()):
        r.i16()  # topic error
        name = r.string() or ""
        r.i8()  # is_internal
        for _ in range(r.i32()):
            err = r.i16()
            index = r.i32()
            leader = r.i32()
            epoch = r.i32()
            replicas = r.int_array()
            isr = r.int_array()
            r.int_array()  # offline replicas
            out[(name, index)] = PartitionView(source, leader, epoch, replicas, isr, err)
    return brokers, out
