"""Builds published whole: made in a temporary sibling directory, then renamed into place.

Why: a build that several processes may want at once (a matrix's workers, a campaign and a
test session) must never be seen half-made, and must not need a lock held for minutes. Each
builder works in its own sibling directory; one ``rename`` publishes it, atomically. A builder
that loses the race (the target exists by then) keeps the winner's identical build and drops
its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def staged_dir(target: Path) -> Iterator[Path]:
    """A fresh directory beside ``target`` to build in; renamed to ``target`` when the block
    ends without an exception, removed in every case. The caller checks afterwards that
    ``target`` is complete (it may be another builder's)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    try:
        yield work
        with contextlib.suppress(OSError):  # another builder published first
            os.rename(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["staged_dir"]
