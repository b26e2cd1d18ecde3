"""``KEY=VALUE`` settings given on a command line: broker settings (``--broker-config``) and
client settings (``--client-config``) are read by this one parser, so both refuse the same
mistakes in the same words."""

from __future__ import annotations

from collections.abc import Iterable

from common.errors import HarnessError


def parse_setting(text: str, flag: str) -> tuple[str, str]:
    """``"key=value"`` as ``("key", "value")`` (both stripped; the value may be empty and may
    itself contain ``=``); a HarnessError naming ``flag`` for anything else."""
    key, eq, value = text.partition("=")
    if not eq:
        raise HarnessError(f"{flag} expects KEY=VALUE, got {text!r}")
    if not key.strip():
        raise HarnessError(f"{flag} has an empty key in {text!r}")
    return key.strip(), value.strip()


def parse_settings(pairs: Iterable[str], flag: str) -> dict[str, str]:
    """Every ``KEY=VALUE`` of a repeated flag, in order; a key given twice keeps its last value."""
    return dict(parse_setting(p, flag) for p in pairs)


def format_settings(settings: dict[str, str], flag: str) -> list[str]:
    """The inverse of :func:`parse_settings`: the flag once per setting, as a command line
    spells it."""
    out: list[str] = []
    for key, value in settings.items():
        out += [flag, f"{key}={value}"]
    return out
