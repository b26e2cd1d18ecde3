"""Clients are only their manifests: no code of the harness names one.

A client is what ``workloads/manifests/<name>.toml`` says (docs/client-contract.md): how it is
started, what it can do, whether it is the default. Code that compared ``--client`` with a
name (``options.client == "copier"``) would make a new client a change of the harness, and
a renamed one a silent bug; so the non-test Python of the harness's packages holds no
registered client's name as a string literal, except in the client's own sources (its
manifest's ``build.dir``) and the few uses below that are not about a client.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

from workloads import client_registry as reg

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("workloads", "harness", "nemeses", "checkers")

#: (file, literal): why it is not a client's name. Keep it small: prefer removing the literal.
ALLOWED = {
    # The interpreter and the JVM as executables, not the clients of those names.
    ("harness/report/render.py", "python"): "the repro command line: python -m harness run",
    ("harness/run/runner.py", "python"): "config.json's key of the harness's Python version",
    ("harness/kafka/install.py", "java"): "shutil.which('java'): the JVM Kafka runs on",
    ("harness/substrate/docker/plan.py", "java"): "the JVM executable in the broker image",
    ("checkers/engines.py", "python"): "the checkers' engine names (--engine python)",
}
#: Catalogues of named runs: which client each scenario runs is data, like a test's
#: parameters (``eos-java-kills`` runs ``--client java``); nothing in them branches on it.
CATALOGUES = {"harness/nightly/scenarios.py"}


def _project_manifests() -> dict[str, reg.Manifest]:
    """The project's own clients (not a user's ``KAFKA_HARNESS_MANIFESTS``)."""
    return {m.name: m for m in map(reg.parse, sorted(reg.MANIFEST_DIR.glob("*.toml")))}


def _sources() -> list[Path]:
    return sorted(
        p
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if not p.name.startswith("test_") and p.name != "conftest.py"
    )


def _literals(path: Path) -> list[tuple[int, str]]:
    """The plain string literals of a file, with their lines."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str):
                out.append((tok.start[0], value))
    return out


def _own(m: reg.Manifest, path: Path) -> bool:
    return m.build_dir is not None and path.is_relative_to(m.build_dir)


def test_no_code_outside_a_client_s_manifest_and_sources_names_it() -> None:
    clients = _project_manifests()
    assert {"python", "java", "copier", "franz-go", "kafkajs", "confluent-js"} <= set(clients)
    found, allowed_seen = [], set()
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for line, value in _literals(path):
            m = clients.get(value)
            if m is None or _own(m, path) or rel in CATALOGUES:
                continue
            if (rel, value) in ALLOWED:
                allowed_seen.add((rel, value))
                continue
            found.append(f"{rel}:{line}: {value!r}")
    assert not found, "client names outside their manifests:\n" + "\n".join(found)
    # A stale entry hides nothing, but says something no longer true: remove it.
    assert allowed_seen == set(ALLOWED), set(ALLOWED) - allowed_seen


@pytest.mark.parametrize(
    ("source", "hits"),
    [
        ('if options.client == "copier":\n    pass\n', ["copier"]),
        ("x = f'{client}'\ny = 'java'\n", ["java"]),
        ('"""python is not named alone here"""\n', []),
    ],
)
def test_the_scan_finds_a_name_as_a_literal(tmp_path: Path, source: str, hits: list[str]) -> None:
    path = tmp_path / "mod.py"
    path.write_text(source)
    names = set(_project_manifests())
    assert [v for _, v in _literals(path) if v in names] == hits
