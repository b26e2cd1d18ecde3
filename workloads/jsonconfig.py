"""Strict reading of the configurations that travel as JSON (a client process's ``--config``,
a workload's options).

One reader, so every configuration refuses the same mistakes in the same words: text that is
not JSON, JSON that is not an object, keys the dataclass does not declare (a typo must not
silently fall back to a default), and values the dataclass cannot be built from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

from common.errors import HarnessError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def from_json(
    cls: type[T],
    raw: str | Mapping[str, Any],
    what: str,
    error: Callable[[str], Exception] = HarnessError,
    nested: Mapping[str, Callable[[Any], Any]] | None = None,
) -> T:
    """``cls(**raw)`` for a dataclass, or ``error(message)`` naming ``what`` was wrong;
    ``raw`` is JSON text or an object already parsed.

    ``nested`` converts the values of the named keys first (a nested dataclass given as an
    object); a conversion that fails counts as a bad value.
    """
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise error(f"{what} options are not JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise error(f"{what} options must be a JSON object")
    unknown = sorted(set(raw) - {f.name for f in fields(cls)})
    if unknown:
        raise error(f"unknown {what} option(s): {', '.join(unknown)}")
    try:
        values = dict(raw)
        for key, convert in (nested or {}).items():
            if key in values:
                values[key] = convert(values[key])
        return cls(**values)
    except TypeError as exc:
        raise error(f"bad {what} options: {exc}") from None


def to_json(config: Any) -> str:
    """A process configuration (a dataclass) as the one-line JSON its ``--config`` takes.
    ``security`` only on a secured cluster: a client that cannot take it never runs on one,
    and refuses a field it does not know (the contract's unknown-field rule)."""
    from dataclasses import asdict

    out = asdict(config)
    if out.get("security") is None:
        out.pop("security", None)
    return json.dumps(out, separators=(",", ":"))
