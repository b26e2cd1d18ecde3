"""The eos workload's record contract: output headers and the value encoding.

Why in ``history/``: a drained output record is history (the final ``read`` ops carry it
verbatim), and the checkers join it back to its input through exactly these names and this
encoding. The writers (``workloads.eos.processor``, ``workloads.seeder``) and the readers
(``checkers.eos.frames``, ``checkers.eos.pyref_parse``, the harness's drain tally) import
them from here, so a header name or the transform cannot drift between who writes a record
and who judges it. Documented in ``docs/history-format.md``, "Workload eos", "Records".
Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

#: Output record headers (names on the wire). Every value is UTF-8 text; the history stores
#: a record's headers as a JSON object ``{name: text}`` (see :func:`decode_headers`).
H_SRC_TOPIC: Final = "src-topic"
H_SRC_PARTITION: Final = "src-partition"
H_SRC_OFFSET: Final = "src-offset"
H_INSTANCE: Final = "instance"
H_TXN_ID: Final = "transactional-id"
H_GENERATION: Final = "generation"
H_MEMBER_ID: Final = "member-id"
H_TXN_SEQ: Final = "txn-seq"

#: What the transform puts in front of an input value.
OUTPUT_PREFIX: Final = "out-"
#: Seeded input values are ``v`` and six digits; poison values ``x`` and six digits.
SEED_PREFIX: Final = "v"
POISON_PREFIX: Final = "x"
VALUE_DIGITS: Final = 6
#: A bare seeded value as a regular expression (for Spark's ``rlike``).
SEED_PATTERN: Final = rf"^{SEED_PREFIX}[0-9]{{{VALUE_DIGITS}}}$"


def seed_value(i: int) -> str:
    """The i-th committed input value: unique, sortable, recognisable in a log dump."""
    return f"{SEED_PREFIX}{i:0{VALUE_DIGITS}d}"


def poison_value(i: int) -> str:
    """The i-th value the seeder writes in a transaction it aborts: must never be processed."""
    return f"{POISON_PREFIX}{i:0{VALUE_DIGITS}d}"


def transform(value: str) -> str:
    """The processing step: pure, so a checker can map every output back to its input."""
    return OUTPUT_PREFIX + value


def is_seed_value(value: str) -> bool:
    """Whether ``value`` has the shape of a seeded input value (see :data:`SEED_PATTERN`)."""
    digits = value[len(SEED_PREFIX) :]
    return (
        value.startswith(SEED_PREFIX)
        and len(digits) == VALUE_DIGITS
        and digits.isascii()
        and digits.isdigit()
    )


def input_of(output: str) -> str | None:
    """Inverse of :func:`transform`; ``None`` for a value no processor could have written.

    Kafka's Java copier (the second client) copies values unchanged, so a bare seed value
    maps to itself; a poison value (``x…``) never maps to an input.
    """
    if output.startswith(OUTPUT_PREFIX):
        return output[len(OUTPUT_PREFIX) :]
    if is_seed_value(output):
        return output
    return None


def source_position(headers: dict[str, str | None]) -> tuple[int, int] | None:
    """The input ``(partition, offset)`` an output's headers name; ``None`` if they do not.

    Outputs of the Java copier carry no headers; :func:`input_of` of their value identifies
    their input instead.
    """
    try:
        p, o = headers.get(H_SRC_PARTITION), headers.get(H_SRC_OFFSET)
        return None if p is None or o is None else (int(p), int(o))
    except (TypeError, ValueError):
        return None


def decode_headers(headers: list[tuple[str, bytes | None]] | None) -> dict[str, str | None]:
    """Record headers as the history stores them: ``{name: UTF-8 text or None}``."""
    out: dict[str, str | None] = {}
    for name, raw in headers or []:
        out[name] = None if raw is None else raw.decode("utf-8", "replace")
    return out
