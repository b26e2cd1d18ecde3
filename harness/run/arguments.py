"""A run's command line: the flags that every command making runs declares, and the one way
a run's options are built from them.

``python -m harness run``, ``campaign`` and ``client-check`` declare their common flags with
:func:`add_run_arguments`, the pytest plugin its ``--nemesis`` with
:func:`add_nemesis_arguments`, and all of them build their runs' options with
:func:`options_from_args` (a matrix cell is a ``python -m harness run`` command line, so its
options come from the same function). What that function returns is complete: the workload's
options filled in and validated once, the fault kinds checked against what ``--nemesis`` names
(``harness.run.nemesis.fault_kinds``) and the cluster's shape checked, all before a cluster
exists.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from harness.kafka.versions import DEFAULT_KAFKA_VERSION
from harness.run.options import RunOptions
from harness.run.runner import build_nemeses, cluster_config_of
from harness.run.workloads import DEFAULT, complete, workload_options_from_args
from harness.substrate.api import shape_from_args

#: ``--nemesis`` when a command line does not say, for every command: no faults. (The pytest
#: plugin's flag has no default: unset, each scenario keeps the faults it names.)
NEMESIS_DEFAULT = "none"


def add_nemesis_arguments(
    add: Callable[..., Any],
    *,
    default: str | None = NEMESIS_DEFAULT,
    why: str = "",
    timing: bool = True,
) -> None:
    """``--nemesis`` (and, with ``timing``, ``--nemesis-interval`` and ``--nemesis-duration``)
    through ``add``: an argparse parser's ``add_argument`` or a pytest option group's
    ``addoption``. ``why`` says in the help why a command's default is not
    :data:`NEMESIS_DEFAULT`."""
    from nemeses.kinds import KINDS
    from nemeses.recipes import RECIPES

    said = why or f"default {default}"
    add(
        "--nemesis",
        default=default,
        metavar="KINDS",
        help=f"none, all, a comma list of fault kinds ({', '.join(KINDS)}), or a named recipe "
        f"({', '.join(RECIPES)}; see README, Faults); {said}",
    )
    if timing:
        add("--nemesis-interval", type=float, default=10.0, metavar="S")
        add(
            "--nemesis-duration",
            type=float,
            default=10.0,
            metavar="S",
            help="a fault's typical length (each drawn from 0.5-1.5 times it); a zombie's "
            "pause lasts the session timeout plus 5-8 s, or this if longer",
        )


def add_run_arguments(
    p: argparse.ArgumentParser,
    *,
    time_limit: float = 60.0,
    seed: int | None = None,
    seeded: bool = True,
    nemesis: bool = True,
) -> None:
    """The flags that every command making runs shares: ``--time-limit``, ``--seed`` (its
    default ``seed``, None: random; not ``seeded``: a command that seeds its runs itself),
    ``--kafka-version``, ``--transaction-version``, ``--store`` and, unless ``nemesis`` is
    False (the command fixes the faults itself), the ``--nemesis`` flags."""
    p.add_argument(
        "--time-limit", type=float, default=time_limit, metavar="S", help="seconds of load"
    )
    if seeded:
        said = "default: random" if seed is None else f"default {seed}"
        p.add_argument("--seed", type=int, default=seed, help=f"RNG seed ({said})")
    p.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    p.add_argument("--transaction-version", type=int, choices=[0, 1, 2], default=None)
    p.add_argument("--store", default="store", metavar="DIR")
    if nemesis:
        add_nemesis_arguments(p.add_argument)


def options_from_args(
    args: argparse.Namespace, *, fields: Mapping[str, Any] | None = None, **given: Any
) -> RunOptions:
    """THE way a run's options are built: from parsed flags (a command's, or a namespace the
    pytest plugin fills), with ``given`` run options over them (a campaign's seed, a
    client-check case's faults) and ``fields`` of the workload's options over its flags (a
    variant's, the names of a run on a shared cluster). A flag a command does not declare takes
    :class:`RunOptions`' default. Bad input is a one-line HarnessError, before any cluster."""

    def value(name: str, default: Any = None) -> Any:
        return given.pop(name) if name in given else getattr(args, name, default)

    time_limit = value("time_limit", 60.0)
    if time_limit <= 0:
        raise HarnessError("--time-limit must be positive")
    seed = value("seed")
    seed = seed if seed is not None else random.randrange(1 << 31)
    workload = value("workload", DEFAULT)
    wopts = given.pop("workload_options", None)
    if wopts is None:
        wopts = workload_options_from_args(args, seed, fields, workload=workload)
    replay = value("replay")
    shape = shape_from_args(args) if hasattr(args, "nodes") else {}
    options = RunOptions(
        workload=workload,
        time_limit=time_limit,
        seed=seed,
        kafka_version=value("kafka_version") or DEFAULT_KAFKA_VERSION,
        transaction_version=value("transaction_version"),
        store=Path(value("store", "store")),
        nemesis=value("nemesis", NEMESIS_DEFAULT),
        nemesis_interval=value("nemesis_interval", 10.0),
        nemesis_duration=value("nemesis_duration", 10.0),
        replay=Path(replay) if replay else None,
        workload_options=wopts,
        **{
            k: value(k, v)
            for k, v in (
                ("network", "auto"),
                ("backend", "auto"),
                ("hosts", None),
                ("accept_new_host_keys", False),
                ("withhold_acl", None),
            )
        },
        **{**shape, **given},
    )
    # Validated once here (the workload's options, its client's manifest); unknown or
    # impossible fault kinds and impossible cluster shapes fail before a cluster is built.
    options = complete(options)
    build_nemeses(options)
    cluster_config_of(options, None).validate()
    return options
