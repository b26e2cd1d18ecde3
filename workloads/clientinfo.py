"""Client-side details the eos workload needs and confluent-kafka does not hand out directly.

Kept apart from the processor loop so they can be unit-tested without a cluster: decoding the
consumer group metadata (generation and member id are what KIP-447 fences zombies on, so the
history must carry them) and turning client errors into JSON. How record headers are stored
in the history is the history format's: :func:`history.eos_records.decode_headers`.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

_CGMD_MAGIC = b"CGMDv2:"


def parse_group_metadata(blob: bytes) -> dict[str, Any]:
    """Decode librdkafka's serialised consumer group metadata.

    confluent-kafka's ``consumer_group_metadata()`` returns the opaque bytes written by
    ``rd_kafka_consumer_group_metadata_write``: the magic ``CGMDv2:``, the generation id as a
    native int32, the NUL-terminated group id and member id, a null flag byte and, when that
    flag is 0, the NUL-terminated group instance id. Anything else decodes to ``{}`` rather
    than failing: the metadata is evidence, never a reason to stop processing.
    """
    if not isinstance(blob, bytes | bytearray) or not blob.startswith(_CGMD_MAGIC):
        return {}
    try:
        pos = len(_CGMD_MAGIC)
        (generation,) = struct.unpack_from("=i", blob, pos)
        pos += 4
        end = blob.index(b"\0", pos)
        group = blob[pos:end].decode()
        pos = end + 1
        end = blob.index(b"\0", pos)
        member = blob[pos:end].decode()
        pos = end + 1
        instance: str | None = None
        if pos < len(blob) and blob[pos] == 0:
            end = blob.index(b"\0", pos + 1)
            instance = blob[pos + 1 : end].decode()
    except (struct.error, ValueError, UnicodeDecodeError):
        return {}
    return {
        "generation": generation,
        "group_id": group,
        "member_id": member,
        "group_instance_id": instance,
    }


def error_info(exc: BaseException, stage: str) -> dict[str, Any]:
    """A JSON description of a client error: what failed, where, and how the client rates it."""
    from confluent_kafka import KafkaError, KafkaException

    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if isinstance(err, KafkaError):
        return {
            "stage": stage,
            "code": err.name(),
            "message": err.str(),
            "fatal": bool(err.fatal()),
            "abortable": bool(err.txn_requires_abort()),
            "retriable": bool(err.retriable()),
        }
    return {
        "stage": stage,
        "code": type(exc).__name__,
        "message": str(exc),
        "fatal": False,
        "abortable": False,
        "retriable": False,
    }


def is_fenced(info: dict[str, Any]) -> bool:
    """Did another producer (or the coordinator) take this producer's transactional id away?"""
    return info.get("code") in {
        "_FENCED",
        "PRODUCER_FENCED",
        "INVALID_PRODUCER_EPOCH",
        "TRANSACTIONAL_ID_NOT_FOUND",
    }


#: The errors of a login the cluster refused: Kafka's, and librdkafka's own for it.
AUTHENTICATION_FAILED = ("SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION")


def refused_by_cluster(info: dict[str, Any]) -> bool:
    """Did the cluster refuse the client: an operation for want of an ACL
    (``*_AUTHORIZATION_FAILED``), or its login (a rotated password, found out at the next
    re-authentication)? A successor started later may fare better; retrying here never."""
    code = str(info.get("code", ""))
    return code.endswith("_AUTHORIZATION_FAILED") or code in AUTHENTICATION_FAILED


def warn(text: str) -> None:
    """Diagnostics go to stderr, which the supervisor sends to the instance's log file."""
    print(text, file=sys.stderr, flush=True)
