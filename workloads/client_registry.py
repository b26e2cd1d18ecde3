"""The registry of clients: one manifest per client in ``workloads/manifests/<name>.toml``.

Why a registry: a client joins the project by saying, in one file, what it is (language,
library and where its version is pinned), how it is built at install, how its processor is
started and what of the contract (docs/client-contract.md) it implements. A workload starts
any manifest's process the same way (``<start.WORKLOAD...> --config JSON``, or the harness
module its ``adapter.WORKLOAD`` names for a tool that takes no such configuration) and asks the
manifest, never the name, what a client is and can do: whether a nemesis arms it by signal or
only by the file, whether it has hook points and the zombie signal, which variants and group
protocols it runs, whether it is fed before it starts, which client runs when none is asked
for (``default``). ``builtin`` clients need no build (this interpreter's processors, Kafka's own
tool), ``kafka-java`` ones are compiled against each run's Kafka version by the cluster
(``harness.kafka.javaclients``); every other client is built here from its sources into the
cache, once per source content. No code outside a client's manifest and its own sources names
a client (``tests/test_client_names.py``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from common.cache import cache_root
from common.errors import HarnessError
from common.staging import staged_dir
from workloads.java_clients import JVM_OPTS

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MANIFEST_DIR = Path(__file__).resolve().parent / "manifests"
#: More manifest directories, ``:``-separated: clients of the user's own, outside the project.
MANIFESTS_ENV = "KAFKA_HARNESS_MANIFESTS"
BUILD_KINDS = ("builtin", "kafka-java", "go", "npm", "script")
#: The kinds the harness has at hand or builds per Kafka version: nothing to build here.
HARNESS_KINDS = ("builtin", "kafka-java")
ARM_WAYS = ("signal", "file", "none")
_TOP = {"name", "summary", "language", "library", "registry", "workloads", "contract", "build",
        "start", "adapter", "abilities", "default", "findings"}  # fmt: skip
_ABILITIES = {
    "transaction_versions", "variants", "group_protocols", "arm", "hooks", "zombie", "aborts",
    "client_config", "probe_client_config", "txn_delay", "feed_first", "security",
}  # fmt: skip
_BUILD = {"kind", "dir", "binary", "shared", "env"}
#: What a build may take at most: the first one downloads the pinned modules.
BUILD_TIMEOUT_S = 600


@dataclass(frozen=True)
class Abilities:
    """What of the contract a client implements (docs/client-contract.md, "Abilities")."""

    #: The transaction versions its producer speaks (0: before KIP-890; 2: KIP-890 part 2).
    transaction_versions: tuple[int, ...]
    variants: tuple[str, ...]
    group_protocols: tuple[str, ...]
    #: How a nemesis arms a moment: ``signal`` (the file, then SIGUSR2), ``file`` (only the
    #: file; the processor looks at it at each hook point), ``none`` (no moments).
    arm: str
    hooks: bool
    zombie: bool
    aborts: bool
    #: What ``--client-config`` it takes, in words; empty: none (refused before a run).
    client_config: str
    #: Whether ``--client-config`` is tried on confluent-kafka (in the client's Python) before
    #: a run: the settings are that library's.
    probe_client_config: bool = False
    #: Whether it takes ``--txn-delay-ms`` (a pause between a transaction's operations).
    txn_delay: bool = True
    #: Whether it must be fed before it starts: it exits once it has processed what its
    #: partitions held when they were assigned (Kafka's copier), so the seeder runs first.
    feed_first: bool = False
    #: Whether it takes the contract's ``security`` object (``--security tls|sasl_ssl``).
    security: bool = False


@dataclass(frozen=True)
class Manifest:
    name: str
    summary: str
    language: str
    library: str
    registry: str
    workloads: tuple[str, ...]
    #: Whether its processor is held to the contract (``python -m harness client-check``).
    contract: bool
    build_kind: str
    build_dir: Path | None
    binary: str | None
    #: Files of the project copied beside an npm client's own sources at its build (code its
    #: processor shares with other clients' processors).
    shared: tuple[Path, ...]
    #: Environment of the build command (a native addon's build switches).
    build_env: dict[str, str]
    #: The processor's argv per workload, before ``--config JSON`` (placeholders: see
    #: :func:`command`).
    start: dict[str, tuple[str, ...]]
    #: Per workload, the harness module that starts the client and writes its history from
    #: its output (a tool that takes no ``--config`` and records no op): its ``spawn``.
    adapter: dict[str, str]
    abilities: Abilities
    path: Path
    #: Whether it is the client a workload runs when ``--client`` is not given.
    default: bool = False
    #: The documented findings (docs/findings.md) its library is known for.
    findings: tuple[str, ...] = ()

    @property
    def builtin(self) -> bool:
        """Built by nobody: the harness has it at hand (or the cluster builds it per version)."""
        return self.build_kind in HARNESS_KINDS


def _bad(path: Path, why: str) -> HarnessError:
    return HarnessError(f"{path}: bad client manifest: {why}")


def _strings(path: Path, raw: Any, key: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise _bad(path, f"{key} must be a list of strings")
    return tuple(raw)


def _env(path: Path, raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise _bad(path, "build.env must be a table of strings")
    return dict(raw)


def parse(path: Path) -> Manifest:
    """One manifest file, checked: unknown keys and missing ones are one-line errors."""
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise _bad(path, str(e)) from None
    for table, known in (
        (raw, _TOP),
        (raw.get("abilities", {}), _ABILITIES),
        (raw.get("build", {}), _BUILD),
    ):
        extra = set(table) - known
        if extra:
            raise _bad(path, f"unknown key {sorted(extra)[0]!r}")
    try:
        ab = raw["abilities"]
        build = raw["build"]
        tvs = ab["transaction_versions"]
        if not isinstance(tvs, list) or not all(isinstance(x, int) for x in tvs):
            raise _bad(path, "abilities.transaction_versions must be a list of integers")
        abilities = Abilities(
            transaction_versions=tuple(tvs),
            variants=_strings(path, ab["variants"], "abilities.variants"),
            group_protocols=_strings(path, ab["group_protocols"], "abilities.group_protocols"),
            arm=str(ab["arm"]),
            hooks=bool(ab["hooks"]),
            zombie=bool(ab["zombie"]),
            aborts=bool(ab["aborts"]),
            client_config=str(ab["client_config"]),
            probe_client_config=bool(ab.get("probe_client_config", False)),
            txn_delay=bool(ab.get("txn_delay", True)),
            feed_first=bool(ab.get("feed_first", False)),
            security=bool(ab.get("security", False)),
        )
        kind = str(build["kind"])
        # The project's own manifests name paths of the project; a user's, paths beside it.
        base = PROJECT_ROOT if path.parent == MANIFEST_DIR else path.parent
        start = {w: _strings(path, argv, f"start.{w}") for w, argv in raw.get("start", {}).items()}
        adapter = {w: str(module) for w, module in raw.get("adapter", {}).items()}
        m = Manifest(
            name=str(raw["name"]),
            summary=str(raw["summary"]),
            language=str(raw["language"]),
            library=str(raw["library"]),
            registry=str(raw["registry"]),
            workloads=_strings(path, raw["workloads"], "workloads"),
            contract=bool(raw["contract"]),
            build_kind=kind,
            build_dir=base / build["dir"] if "dir" in build else None,
            binary=build.get("binary"),
            shared=tuple(base / f for f in _strings(path, build.get("shared", []), "build.shared")),
            build_env=_env(path, build.get("env", {})),
            start=start,
            adapter=adapter,
            abilities=abilities,
            path=path,
            default=bool(raw.get("default", False)),
            findings=_strings(path, raw.get("findings", []), "findings"),
        )
    except KeyError as e:
        raise _bad(path, f"missing key {e.args[0]!r}") from None
    if m.name != path.stem:
        raise _bad(path, f"name {m.name!r} is not the file's name")
    if kind not in BUILD_KINDS:
        raise _bad(path, f"build.kind must be one of {', '.join(BUILD_KINDS)}")
    if abilities.arm not in ARM_WAYS:
        raise _bad(path, f"abilities.arm must be one of {', '.join(ARM_WAYS)}")
    if not m.builtin:
        if m.build_dir is None or (kind == "go" and not m.binary):
            raise _bad(path, "a built client needs build.dir (and build.binary for go)")
        absent = [f for f in m.shared if not f.is_file()]
        if absent:
            raise _bad(path, f"build.shared: {absent[0]} is not a file")
        if m.shared and kind != "npm":
            raise _bad(path, "build.shared is for npm clients (node resolves modules beside them)")
    missing = [w for w in m.workloads if w not in m.start and w not in m.adapter]
    if missing:
        raise _bad(path, f"no start.{missing[0]} (or adapter.{missing[0]}) for a workload it lists")
    return m


def manifest_dirs() -> list[Path]:
    """The project's manifest directory, then the user's (``KAFKA_HARNESS_MANIFESTS``)."""
    extra = [Path(p).resolve() for p in os.environ.get(MANIFESTS_ENV, "").split(":") if p]
    for d in extra:
        if not d.is_dir():
            raise HarnessError(f"{MANIFESTS_ENV}: {d} is not a directory")
    return [MANIFEST_DIR, *extra]


def manifests() -> dict[str, Manifest]:
    """Every registered client, by name; a user's manifest cannot take a project client's
    name. Read once per value of ``KAFKA_HARNESS_MANIFESTS`` (every run, spawn and CLI
    choice asks)."""
    return dict(_load(os.environ.get(MANIFESTS_ENV, "")))


@functools.cache
def _load(_dirs: str) -> dict[str, Manifest]:
    out: dict[str, Manifest] = {}
    for d in manifest_dirs():
        for m in map(parse, sorted(d.glob("*.toml"))):
            if m.name in out:
                raise HarnessError(f"{m.path}: client {m.name!r} is already {out[m.name].path}")
            if m.default and d != MANIFEST_DIR:
                raise _bad(m.path, "default is for the project's own clients")
            out[m.name] = m
    return out


def names(workload: str) -> tuple[str, ...]:
    """The clients that run ``workload``: the default first, then those the harness has at
    hand (of the contract first), then the built ones, by name."""
    found = [m for m in manifests().values() if workload in m.workloads]
    found.sort(key=lambda m: (not m.default, not m.builtin, not m.contract, m.name))
    return tuple(m.name for m in found)


def default(workload: str) -> str:
    """The client ``workload`` runs when none is asked for: the one whose manifest says
    ``default = true`` (the first of :func:`names` if none does)."""
    found = names(workload)
    if not found:
        raise HarnessError(f"no registered client runs the {workload} workload")
    return found[0]


def get(name: str) -> Manifest:
    known = manifests()
    if name not in known:
        raise HarnessError(f"unknown client {name!r}; registered: {', '.join(sorted(known))}")
    return known[name]


def findings(name: str) -> list[str]:
    """The documented findings the client ``name`` is known for (its manifest's ``findings``;
    none for an unknown client): what a run records for the checkers, which cannot read
    manifests."""
    m = manifests().get(name)
    return list(m.findings) if m is not None else []


def contract_clients() -> tuple[str, ...]:
    return tuple(n for n, m in sorted(manifests().items()) if m.contract)


# --- building ------------------------------------------------------------------------------------


def _sources(m: Manifest) -> list[Path]:
    assert m.build_dir is not None
    if m.build_kind == "go":
        return sorted([*m.build_dir.glob("*.go"), m.build_dir / "go.mod", m.build_dir / "go.sum"])
    if m.build_kind == "npm":
        lock = [m.build_dir / "package.json", m.build_dir / "package-lock.json"]
        return sorted([*m.build_dir.glob("*.js"), *lock, *m.shared])
    return []  # a script runs from its directory as it is


def digest(m: Manifest) -> str:
    """A short hash of the client's sources (names and contents)."""
    h = hashlib.sha256()
    for p in _sources(m):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    for key, value in sorted(m.build_env.items()):
        h.update(f"{key}={value}".encode() + b"\0")
    return h.hexdigest()[:16]


def build_path(m: Manifest) -> Path:
    """Where the build of the current sources lives (built or not): the executable of a Go
    client, the directory (sources and node_modules) of an npm one."""
    home = cache_root() / "clients" / m.name / digest(m)
    return home / m.binary if m.build_kind == "go" and m.binary else home


def _first_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in lines:
        if ": " in ln and (".go:" in ln or "error" in ln.lower()):
            return ln
    return lines[0] if lines else "the build failed without output"


def _toolchain(m: Manifest) -> list[str]:
    """The build command of the client's kind, its tool found on PATH."""
    tool, argv = {
        "go": ("go", ["build", "-trimpath", "-o", "{out}", "."]),
        "npm": ("npm", ["ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"]),
    }[m.build_kind]
    found = shutil.which(tool)
    if found is None:
        raise HarnessError(
            f"client {m.name}: {tool} is not on PATH; ./bootstrap.sh says what to install"
        )
    return [found, *argv]


def ensure_built(m: Manifest) -> Path:
    """The client's executable (go) or directory (npm), built from its sources if this
    content was never built.

    Safe from several processes at once: each builds in a temporary sibling directory and one
    ``rename`` publishes it; the loser of a race keeps the winner's build.
    """
    if m.builtin:
        raise HarnessError(f"client {m.name!r} is built into the harness")
    if m.build_kind == "script":
        assert m.build_dir is not None
        if not m.build_dir.is_dir():
            raise HarnessError(f"client {m.name}: {m.build_dir} is not a directory")
        return m.build_dir
    out = build_path(m)
    if out.exists():
        return out
    argv = _toolchain(m)
    home = out.parent if m.build_kind == "go" else out
    with staged_dir(home) as work:
        cwd = m.build_dir
        if m.build_kind == "npm":
            for src in _sources(m):  # node resolves modules beside the script: build a copy
                shutil.copy2(src, work / src.name)
            cwd = work
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly", **m.build_env}
        try:
            done = subprocess.run(
                [a.replace("{out}", str(work / out.name)) for a in argv],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise HarnessError(f"building client {m.name} took over {BUILD_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise HarnessError(
                f"building client {m.name} failed: {_first_error(done.stderr + done.stdout)}"
            )
    if not out.exists():
        raise HarnessError(f"client {m.name}: its build {out} is incomplete")
    return out


#: The start argument that stands for the cluster's command line of a ``kafka-java`` client's
#: class (the argument after it): java, :data:`JVM_OPTS`, the classpath of the run's Kafka.
KAFKA_JAVA = "{kafka-java}"


class JavaLauncher(Protocol):
    def java_client_command(
        self, main_class: str, jvm_opts: tuple[str, ...] = ...
    ) -> list[str]: ...


def runs_on_python(m: Manifest, workload: str) -> bool:
    """Whether the client's process for ``workload`` runs on a Python interpreter of the
    user's choice (``--client-python``): its start names ``{python}``."""
    return any("{python}" in part for part in m.start.get(workload, ()))


def command(
    m: Manifest,
    workload: str,
    cluster: JavaLauncher | None = None,
    python: str | None = None,
) -> list[str]:
    """The argv that starts the client's process for ``workload`` (before ``--config``).

    Placeholders of ``start``: ``{binary}`` the Go build; ``{dir}`` the npm build or the
    script's directory; ``{python}`` ``python`` or else the harness's interpreter;
    ``{kafka-java}`` (an argument of its own, the class after it) the ``cluster``'s command
    line of a ``kafka-java`` client's class."""
    if workload not in m.start:
        raise HarnessError(f"client {m.name} has no {workload} process")
    subst = {"{python}": python or sys.executable}
    if not m.builtin:
        built = ensure_built(m)
        home = built.parent if m.build_kind == "go" else built  # npm: the build; script: its dir
        subst.update({"{binary}": str(built), "{dir}": str(home)})
    argv = list(m.start[workload])
    if argv and argv[0] == KAFKA_JAVA:
        if cluster is None or len(argv) < 2:
            raise HarnessError(f"client {m.name}: {KAFKA_JAVA} needs a cluster and a class")
        argv = [*cluster.java_client_command(argv[1], JVM_OPTS), *argv[2:]]
    out = []
    for part in argv:
        for key, value in subst.items():
            part = part.replace(key, value)
        out.append(part)
    return out


def adapter(m: Manifest, workload: str) -> ModuleType | None:
    """The harness module that starts the client for ``workload`` itself (``adapter``), or
    None: :func:`command` starts it."""
    name = m.adapter.get(workload)
    return None if name is None else importlib.import_module(name)
