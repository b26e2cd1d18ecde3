"""Every fault-facing client object holds to ``history.clientcontrol.ClientControl`` in full.

A fault reaches a workload's processes only through that protocol, and every member is
required (no ``getattr`` fallbacks on the nemesis side): each workload package's ``control``
class and every fake the nemesis unit tests hand in must have every member, with the
protocol's kind (a property is a value, a method is callable with the same parameters) and
type. ``isinstance`` against a runtime-checkable protocol alone would only ask whether the
names exist.
"""

from __future__ import annotations

import importlib
import inspect
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from history.clientcontrol import ClientControl
from tests.fake_clients import NoClients
from workloads.control import SupervisedControl

ROOT = Path(__file__).resolve().parents[1]


def _members() -> dict[str, Any]:
    """The protocol's members by name: a property or a function."""
    return {
        name: value
        for name, value in vars(ClientControl).items()
        if not name.startswith("_") and (isinstance(value, property) or callable(value))
    }


def _conforms(value: Any, hint: Any) -> bool:
    """``value`` is of ``hint`` (``str``, ``float | None``, ``tuple[str, ...]``)."""
    if isinstance(hint, types.UnionType):
        return any(_conforms(value, arm) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint) or hint
    if origin is float:  # an int is as good a number of seconds
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin is tuple:
        (item, _ellipsis) = typing.get_args(hint)
        return isinstance(value, tuple) and all(isinstance(v, item) for v in value)
    return isinstance(value, origin)


def assert_conforms(obj: Any) -> None:
    assert isinstance(obj, ClientControl)
    members = _members()
    assert {"processor_pids", "processor_gids", "processor_roles", "hooks"} <= set(members)
    for name, member in members.items():
        assert hasattr(obj, name), f"{type(obj).__name__} lacks {name}"
        got = getattr(obj, name)
        if isinstance(member, property):
            hint = typing.get_type_hints(member.fget)["return"]
            assert not callable(got), f"{type(obj).__name__}.{name} is a method, not a value"
            assert _conforms(got, hint), f"{type(obj).__name__}.{name} = {got!r}, not {hint}"
        else:
            assert callable(got), f"{type(obj).__name__}.{name} is not callable"
            want = list(inspect.signature(member).parameters)[1:]  # without self
            assert list(inspect.signature(got).parameters) == want, f"{name}'s parameters"


def _cluster(tmp_path: Path) -> Any:
    return types.SimpleNamespace(dir=tmp_path, bootstrap="localhost:9092", env={})


def _eos(tmp_path: Path) -> Any:
    from workloads.eos.config import EosOptions
    from workloads.eos.supervisor import EosWorkload

    return EosWorkload(EosOptions(), _cluster(tmp_path), tmp_path)


def _streams(tmp_path: Path) -> Any:
    from workloads.streams.config import StreamsOptions
    from workloads.streams.supervisor import StreamsWorkload

    return StreamsWorkload(StreamsOptions(), _cluster(tmp_path), tmp_path)


def _connect(tmp_path: Path) -> Any:
    from workloads.connect.config import ConnectOptions
    from workloads.connect.supervisor import ConnectWorkload

    return ConnectWorkload(ConnectOptions(), _cluster(tmp_path), tmp_path)


def _queue(tmp_path: Path) -> Any:
    from workloads.queue.options import QueueOptions
    from workloads.queue.supervisor import QueueWorkload

    return QueueWorkload(QueueOptions(topic="t"), _cluster(tmp_path), tmp_path, time_limit=30)


def _share(tmp_path: Path) -> Any:
    from workloads.share.options import ShareOptions
    from workloads.share.supervisor import ShareWorkload

    return ShareWorkload(ShareOptions(topic="t"), _cluster(tmp_path), tmp_path, time_limit=30)


def _offsets(tmp_path: Path) -> Any:
    from workloads.offsets.options import OffsetsOptions
    from workloads.offsets.supervisor import OffsetsWorkload

    return OffsetsWorkload(OffsetsOptions(topic="t"), _cluster(tmp_path), tmp_path, time_limit=30)


#: Each workload package's supervisor, made without a cluster (nothing is started).
SUPERVISORS: dict[str, Callable[[Path], Any]] = {
    "eos": _eos,
    "streams": _streams,
    "connect": _connect,
    "queue": _queue,
    "share": _share,
    "offsets": _offsets,
}


def _control_class(package: str) -> type[SupervisedControl]:
    """The one class a package's ``control`` module defines on ``SupervisedControl``."""
    module = importlib.import_module(f"workloads.{package}.control")
    own = [
        c
        for c in vars(module).values()
        if isinstance(c, type)
        and issubclass(c, SupervisedControl)
        and c.__module__ == module.__name__
    ]
    assert len(own) == 1, f"workloads/{package}/control.py: {own}"
    return own[0]


def test_every_workload_package_has_a_control_module() -> None:
    packages = sorted(p.parent.name for p in (ROOT / "workloads").glob("*/driver.py"))
    assert packages == sorted(SUPERVISORS)


@pytest.mark.parametrize("package", sorted(SUPERVISORS))
def test_each_workload_s_control_object_has_every_member(package: str, tmp_path: Path) -> None:
    supervisor = SUPERVISORS[package](tmp_path)
    try:
        clients = _control_class(package)(supervisor)
        assert_conforms(clients)
        # No process runs: every question about processes has an explicit empty answer.
        assert clients.processor_pids() == {} and clients.processor_gids() == {}
        assert clients.transactional_ids() == {}
        assert clients.processor_ready(0) is False and clients.fired_hook(0) is None
        for role in (*clients.processor_roles, "no-such-role"):
            assert clients.aim_processor(role, 0) is None
        assert clients.bootstrap == "localhost:9092"
    finally:
        supervisor.close()


def test_abilities_are_the_workload_s_own(tmp_path: Path) -> None:
    """What a control object says it can do is what its workload can: the eos client's
    manifest, no hooks for the others, roles only for Connect's workers, crash spacing
    for the JVMs that rejoin slowly."""
    got: dict[str, Any] = {}
    for package, make in SUPERVISORS.items():
        supervisor = make(tmp_path / package)
        try:
            c = _control_class(package)(supervisor)
            got[package] = (c.hooks, c.pause_at_commit, c.processor_roles, c.crash_interval_s)
        finally:
            supervisor.close()
    assert got == {
        "eos": (True, True, (), None),
        "streams": (False, False, (), 20.0),
        "connect": (False, False, ("leader", "task-worker"), 30.0),
        "queue": (False, False, (), None),
        "share": (True, False, (), None),
        "offsets": (False, False, (), None),
    }


def _fakes() -> list[Any]:
    from tests import test_cut_processor, test_nemesis_faults, test_processor_aim
    from tests.toyworkload.control import ToyClients

    return [
        NoClients(),
        test_cut_processor.FakeClients(),
        test_cut_processor.ClientsWithoutGids(),
        test_nemesis_faults.Clients("localhost:1"),
        test_processor_aim.RoleClients(),
        ToyClients("localhost:1", "g", "in", "out"),
    ]


@pytest.mark.parametrize("fake", _fakes(), ids=lambda f: type(f).__qualname__)
def test_the_nemesis_tests_fakes_conform(fake: Any) -> None:
    assert_conforms(fake)


def test_the_fakes_with_processes_conform() -> None:
    from tests import test_nemesis_moments, test_processor_aim

    moments = test_nemesis_moments.FakeClients(1)
    respawning = test_processor_aim.Respawning()
    try:
        assert_conforms(moments)
        assert_conforms(respawning)
    finally:
        for p in moments.procs.values():
            p.kill()
            p.wait()
        respawning.close()


def test_a_missing_member_fails() -> None:
    class Partial(NoClients):
        processor_roles = None  # type: ignore[assignment]

    with pytest.raises(AssertionError, match="processor_roles"):
        assert_conforms(Partial())
