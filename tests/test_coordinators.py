"""Coordinator partitioning must match Java's String.hashCode and Kafka's Utils.abs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.kafka.coordinators import java_string_hash, kafka_abs, partition_for


def test_known_java_hashes() -> None:
    # Values of "…".hashCode() computed by the JVM.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("é") == 233


def test_abs_of_min_int_is_zero() -> None:
    assert kafka_abs(-(1 << 31)) == 0
    assert partition_for("polygenelubricants", 50) == 0


@given(st.text(max_size=40), st.integers(min_value=1, max_value=100))
def test_partition_in_range(key: str, n: int) -> None:
    assert 0 <= partition_for(key, n) < n
