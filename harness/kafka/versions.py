"""Which Apache Kafka versions exist on Maven Central, and how they sort.

A version counts as released only when both the broker (``kafka_2.13``) and the tools
(``kafka-tools``) artifacts are published: Maven Central sometimes holds a partial upload
(the broker jar of a release whose tools jar is not there yet), and the harness needs both.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from functools import total_ordering

from common.errors import HarnessError

#: The newest Kafka release on Maven Central when this was written (both artifacts present);
#: the whole test suite and every client of the registry run on it.
DEFAULT_KAFKA_VERSION = "4.4.0"

#: The oldest line the harness supports (KRaft with a static voter set and kafka-tools on Maven).
MIN_SUPPORTED = (3, 7, 0)

MAVEN_REPO = os.environ.get("KAFKA_HARNESS_MAVEN_REPO", "https://repo.maven.apache.org/maven2")
_ARTIFACTS = ("kafka_2.13", "kafka-tools")
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-(.+))?$")


@total_ordering
class KafkaVersion:
    """A parsed ``X.Y.Z[-qualifier]``; numeric ordering so 4.10.0 sorts after 4.9.0."""

    __slots__ = ("major", "minor", "patch", "qualifier", "text")

    def __init__(self, text: str) -> None:
        m = _VERSION_RE.match(text.strip())
        if not m:
            raise HarnessError(f"not a Kafka version: {text!r} (expected X.Y.Z, e.g. 3.9.1)")
        self.text = text.strip()
        self.major, self.minor, self.patch = (int(m.group(i)) for i in (1, 2, 3))
        self.qualifier = m.group(4) or ""

    @property
    def key(self) -> tuple[int, int, int, int, str]:
        # A release sorts after its own pre-releases (4.0.0-rc1 < 4.0.0).
        return (self.major, self.minor, self.patch, 0 if self.qualifier else 1, self.qualifier)

    @property
    def is_release(self) -> bool:
        return not self.qualifier

    @property
    def supports_transaction_version(self) -> bool:
        """Kafka 4.x lets the format step choose transaction.version 0 or 2 (KIP-890)."""
        return self.major >= 4

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KafkaVersion) and self.key == other.key

    def __lt__(self, other: KafkaVersion) -> bool:
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"KafkaVersion({self.text!r})"


def sort_versions(texts: list[str]) -> list[str]:
    """Newest first, numerically."""
    return [str(v) for v in sorted((KafkaVersion(t) for t in texts), reverse=True)]


def _fetch_metadata_versions(artifact: str, timeout: float) -> set[str]:
    url = f"{MAVEN_REPO}/org/apache/kafka/{artifact}/maven-metadata.xml"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            root = ET.fromstring(resp.read())
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HarnessError(
            f"cannot reach Maven Central at {MAVEN_REPO} ({reason}); no network? "
            "Versions already installed still work offline."
        ) from None
    except ET.ParseError as exc:
        raise HarnessError(
            f"Maven Central returned unreadable metadata for {artifact}: {exc}"
        ) from None
    return {v.text.strip() for v in root.iter("version") if v.text}


def released_versions(timeout: float = 20.0) -> list[str]:
    """Released Kafka versions (both artifacts present, no qualifier), newest first."""
    return released_versions_from({a: _fetch_metadata_versions(a, timeout) for a in _ARTIFACTS})


def released_versions_from(sets: dict[str, set[str]]) -> list[str]:
    both = set.intersection(*sets.values())
    usable = []
    for text in both:
        if not _VERSION_RE.match(text):
            continue
        v = KafkaVersion(text)
        if v.is_release and v.key[:3] >= MIN_SUPPORTED:
            usable.append(text)
    return sort_versions(usable)


def nearest_versions(wanted: str, available: list[str], n: int = 3) -> list[str]:
    """The released versions next to ``wanted`` in version order, nearest first."""
    try:
        w = KafkaVersion(wanted)
    except HarnessError:
        return available[:n]
    ordered = sorted(KafkaVersion(t) for t in available)
    below = [v for v in ordered if v < w][::-1]
    above = [v for v in ordered if v > w]
    out: list[str] = []
    while (below or above) and len(out) < n:
        if below:
            out.append(str(below.pop(0)))
        if above and len(out) < n:
            out.append(str(above.pop(0)))
    return out


def check_version(wanted: str, timeout: float = 20.0) -> KafkaVersion:
    """Validate that ``wanted`` is a released, supported version, or raise a one-line error."""
    v = KafkaVersion(wanted)
    if v.key[:3] < MIN_SUPPORTED:
        raise HarnessError(
            f"Kafka {wanted} is older than the oldest supported line "
            f"{'.'.join(map(str, MIN_SUPPORTED[:2]))} (KRaft with a static voter set)"
        )
    sets = {a: _fetch_metadata_versions(a, timeout) for a in _ARTIFACTS}
    available = released_versions_from(sets)
    if wanted not in available:
        near = ", ".join(nearest_versions(wanted, available))
        missing = [a for a, vs in sets.items() if wanted not in vs]
        partial = (
            f" (only a partial upload: {', '.join(missing)} missing)"
            if len(missing) < len(sets)
            else ""
        )
        raise HarnessError(
            f"Kafka {wanted} is not a released version on Maven Central{partial}; nearest: {near}"
        )
    return v


def versions_report(
    available: list[str], installed: set[str], seen_before: set[str] | None
) -> list[dict[str, object]]:
    """Rows for ``python -m harness versions``: newest first, installed and new marked.

    ``seen_before`` is the set of versions known at the last matrix run (None when there has
    been none: then nothing is called new, since everything would be).
    """
    return [
        {
            "version": v,
            "installed": v in installed,
            "new": seen_before is not None and v not in seen_before,
        }
        for v in sort_versions(available)
    ]
