"""JSON values as the checkers hold them: strings always valid Unicode.

Why: a Recorder writes any Python string, a lone surrogate included (as the escape
``"\\ud800"``), but Arrow and Parquet store only UTF-8 and msgspec refuses such an escape. Both
engines, Spark's and the Python reference, therefore hold such a string as its JSON text (ASCII,
and different strings stay different), so they judge and show the same values.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from history.reader import loads_strict
from history.schema import encode_json

_decode = msgspec.json.decode

#: What :func:`json_value` gives for bytes that are not JSON.
NOT_JSON: Final = object()


def json_value(value: bytes) -> Any:
    """msgspec's reading of a value, else Python's: msgspec refuses a few things a Recorder can
    write (a lone surrogate escape, as ``"\\ud800"``), which the reader accepts."""
    try:
        return _decode(value)
    except msgspec.DecodeError:
        pass
    try:
        return utf8_safe(loads_strict(value))
    except ValueError:
        return NOT_JSON


def utf8_safe(x: Any) -> Any:
    """``x`` with every string Arrow cannot store (a lone surrogate is not UTF-8) replaced by
    its JSON text, which is ASCII and tells different strings apart."""
    if type(x) is str:
        if x.isascii():
            return x
        try:
            x.encode()
        except UnicodeEncodeError:
            return encode_json(x)
        return x
    if type(x) is list:
        return [utf8_safe(e) for e in x]
    if type(x) is dict:
        return {utf8_safe(k): utf8_safe(e) for k, e in x.items()}
    return x
