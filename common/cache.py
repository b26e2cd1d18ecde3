"""Where the harness keeps what it downloads and builds (Kafka installations, client builds)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache directory; override with KAFKA_HARNESS_CACHE."""
    env = os.environ.get("KAFKA_HARNESS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kafka-harness"
