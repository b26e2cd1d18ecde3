"""The documentation holds: the README stays short and its links resolve, the site builds in
strict mode (no broken link or anchor, no page left out of the navigation), the command-line
reference is what the parsers say, and the pytest plugin's worked example runs as written."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_the_readme_is_short_and_its_links_resolve() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links onward"
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert missing == []
    assert not re.search(r"#\d+\b|\bissue\b", text), "no issue numbers in the README"


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    proc = _build(ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "cli" / "index.html").is_file()
    assert (tmp_path / "site" / "findings" / "index.html").is_file()


@pytest.mark.parametrize(
    ("plant", "says"),
    [
        (("orphan.md", "# An orphan\n"), "orphan.md"),
        (("concepts.md", "[a](running.md#no-such-anchor)\n"), "no-such-anchor"),
        (("concepts.md", "[a](no-such-page.md)\n"), "no-such-page.md"),
    ],
)
def test_a_broken_site_fails_the_build(tmp_path: Path, plant: tuple[str, str], says: str) -> None:
    """The strict build is a real check: a page left out of the navigation, a link to a
    missing anchor or page each fail it."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    name, text = plant
    with (copy / "docs" / name).open("a") as fh:
        fh.write(text)
    proc = _build(copy, tmp_path / "site")
    assert proc.returncode != 0
    assert says in proc.stderr


def test_the_cli_reference_is_what_the_parsers_say() -> None:
    from harness.clidoc import render

    page = (ROOT / "docs" / "cli.md").read_text()
    assert page == render(), "regenerate it: python -m harness.clidoc > docs/cli.md"
    for flag in ("--client-python", "--nemesis", "--replay", "--spark-master", "--variants"):
        assert flag in page


@pytest.mark.cluster
def test_the_plugin_s_worked_example_runs_in_another_project(tmp_path: Path) -> None:
    """docs/plugin.md's example, as written there, in an empty project: the plugin's
    fixtures start a real cluster, run the scenario and judge it."""
    page = (ROOT / "docs" / "plugin.md").read_text()
    (example,) = re.findall(r"```python\n(.*?)```", page, re.S)
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_exactly_once.py").write_text(example)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--store", str(tmp_path / "store"), "test_exactly_once.py"],
        cwd=project, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout
    reports = list((tmp_path / "store").rglob("report.html"))
    assert len(reports) == 1
