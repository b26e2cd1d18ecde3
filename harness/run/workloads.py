"""The registry of workloads: the one place the harness learns which workloads exist.

A workload is its declaration (``workloads.<name>.SPEC``: options, flags, history files,
checker suite names, figures) composed with its driver (``workloads.<name>.driver.<name>``).
The runner, ``python -m harness run``, the campaign, the matrix, the pytest plugin and the
report look workloads up here by name; none of them names one. Adding a workload is a module
in ``workloads/``, a driver in ``workloads/<name>/driver.py``, a line in :data:`BUILTIN` and, for a
new kind of check, a suite in ``checkers.suites``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from common.errors import HarnessError
from common.settings import parse_settings
from harness.kafka.versions import KafkaVersion
from harness.run.options import RunOptions
from workloads import client_registry
from workloads.connect import driver as connect
from workloads.drive import Workload
from workloads.eos import driver as eos
from workloads.offsets import driver as offsets
from workloads.queue import driver as queue
from workloads.share import driver as share
from workloads.spec import Option, WorkloadOptions, WorkloadSpec
from workloads.streams import driver as streams

BUILTIN: tuple[Workload, ...] = (
    eos.WORKLOAD,
    queue.WORKLOAD,
    connect.WORKLOAD,
    streams.WORKLOAD,
    share.WORKLOAD,
    offsets.WORKLOAD,
)

_REGISTRY: dict[str, Workload] = {w.name: w for w in BUILTIN}
#: The workload of a run that does not say (``--workload``'s default, and a run stored before
#: runs named theirs): the first built-in one, the project's main job.
DEFAULT = BUILTIN[0].name


def register(workload: Workload) -> Workload:
    """Make a workload known (a test registers a fake one; returns it for chaining)."""
    _REGISTRY[workload.name] = workload
    return workload


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def names() -> list[str]:
    return sorted(_REGISTRY)


def get(name: str) -> Workload:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise HarnessError(f"unknown workload {name!r} (known: {', '.join(names())})") from None


def spec_of(name: str | None) -> WorkloadSpec | None:
    """The declaration of a stored run's workload (None for one no longer registered)."""
    workload = _REGISTRY.get(name or DEFAULT)
    return workload.spec if workload else None


#: The workloads whose processes take the client contract's ``security`` object.
SECURED_WORKLOADS = ("eos", "connect", "streams")


def complete(options: RunOptions) -> RunOptions:
    """``options`` with its workload's options filled in (the defaults, seeded with the run's
    seed, when none were given), validated and adjusted to the run by the driver; options
    already completed are returned as they are (a run validates its options once)."""
    if options.completed:
        return options
    workload = get(options.workload)
    wopts = options.workload_options
    if wopts is None:
        wopts = workload.spec.options_from_dict({"seed": options.seed})
    elif not isinstance(wopts, workload.spec.options_type):
        raise HarnessError(
            f"workload {options.workload} takes {workload.spec.options_type.__name__}, "
            f"got {type(wopts).__name__}"
        )
    wopts.validate()
    _check_security(options, wopts)
    need = workload.spec.needs_kafka(wopts)
    if need is not None and KafkaVersion(options.kafka_version) < KafkaVersion(need[0]):
        raise HarnessError(f"{need[1]} needs Kafka {need[0]} or newer, not {options.kafka_version}")
    return replace(workload.prepare(replace(options, workload_options=wopts)), completed=True)


def security_problem(mode: str, workload: str, wopts: WorkloadOptions) -> str | None:
    """Why a run of ``workload`` with ``wopts`` cannot run on a cluster secured so, or None:
    it needs a workload whose processes take the contract's ``security`` object and a client
    that does (its manifest's ``abilities.security``)."""
    if mode == "plaintext":
        return None
    if workload not in SECURED_WORKLOADS:
        *rest, last = SECURED_WORKLOADS
        return f"--security {mode}: runs the {', '.join(rest)} and {last} workloads, not {workload}"
    client = getattr(wopts, "client", None)
    if client is not None and not client_registry.get(client).abilities.security:
        secured = [n for n, m in client_registry.manifests().items() if m.abilities.security]
        return (
            f"--security {mode}: client {client} takes no security settings "
            f"(these do: {', '.join(secured)})"
        )
    return None


def _check_security(options: RunOptions, wopts: WorkloadOptions) -> None:
    if options.security == "plaintext" and options.withhold_acl is not None:
        raise HarnessError("--withhold-acl needs --security tls or sasl_ssl")
    problem = security_problem(options.security, options.workload, wopts)
    if problem is not None:
        raise HarnessError(problem)
    held = {a.resource for a in get(options.workload).spec.acls(wopts)}
    if options.withhold_acl is not None and options.withhold_acl not in held:
        raise HarnessError(
            f"--withhold-acl {options.withhold_acl}: the {options.workload} workload's clients "
            f"hold no ACL on one (they hold: {', '.join(sorted(held))})"
        )


# --- the command line ---------------------------------------------------------------------


def _flags(names: list[str] | None = None) -> list[Option]:
    """Every flag of the named workloads (default: all), each once (the first declaration's
    parsing)."""
    seen: dict[str, Option] = {}
    for w in _REGISTRY.values():
        if names is None or w.name in names:
            for o in w.spec.cli:
                seen.setdefault(o.dest, o)
    return list(seen.values())


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """``--workload`` and the flags of every workload."""
    p.add_argument("--workload", choices=names(), default=DEFAULT)
    add_workload_flags(p)


def add_workload_flags(
    p: argparse.ArgumentParser, names: list[str] | None = None, skip: tuple[str, ...] = ()
) -> None:
    """The flags of the named workloads (default: all) but ``skip``; a flag's help names who
    reads it. ``settings`` flags are repeatable ``KEY=VALUE`` (read by
    :func:`workload_values`)."""
    readers: dict[str, list[str]] = {}
    #: A shared flag takes what any of its workloads takes; each workload refuses the rest.
    choices: dict[str, list[Any]] = {}
    for w in _REGISTRY.values():
        if names is None or w.name in names:
            for o in w.spec.cli:
                readers.setdefault(o.dest, []).append(f"{w.name}: {o.help}" if o.help else w.name)
                for c in o.choices or ():
                    if c not in choices.setdefault(o.dest, []):
                        choices[o.dest].append(c)
    for o in _flags(names):
        if o.flag in skip:
            continue
        kwargs: dict[str, Any] = {"dest": o.dest, "default": argparse.SUPPRESS}
        kwargs["help"] = "; ".join(readers[o.dest])
        if o.action == "settings":
            kwargs["action"] = "append"
            kwargs["metavar"] = o.metavar or "KEY=VALUE"
        elif o.action:
            kwargs["action"] = o.action
        else:
            kwargs["type"] = o.type
            kwargs["metavar"] = o.metavar
            if o.choices:
                kwargs["choices"] = choices[o.dest]
        p.add_argument(o.flag, **kwargs)


def workload_values(args: argparse.Namespace, spec: WorkloadSpec) -> dict[str, Any]:
    """The options fields of ``spec`` that the parsed flags give (a flag not given: absent)."""
    values: dict[str, Any] = {}
    for o in spec.cli:
        if hasattr(args, o.dest):
            value = getattr(args, o.dest)
            values[o.field] = parse_settings(value, o.flag) if o.action == "settings" else value
    return values


def workload_options_from_args(
    args: argparse.Namespace,
    seed: int,
    extra: Mapping[str, Any] | None = None,
    *,
    workload: str | None = None,
) -> Any:
    """The options of ``workload`` (default ``args.workload``) from the parsed flags (and
    ``extra`` fields over them), not yet validated: :func:`complete` validates them, once. A
    flag of another workload is an error: a command line never carries an option that does
    nothing."""
    spec = get(workload or args.workload).spec
    mine = {o.dest for o in spec.cli}
    foreign = sorted(o.flag for o in _flags() if hasattr(args, o.dest) and o.dest not in mine)
    if foreign:
        raise HarnessError(f"{', '.join(foreign)}: not an option of --workload {spec.name}")
    return spec.options_type.from_dict(
        {**workload_values(args, spec), "seed": seed, **(extra or {})}
    )
