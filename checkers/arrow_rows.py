"""Rows gathered in Python, as an Arrow table: the one conversion the history sinks share."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def rows_table(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    """``rows`` (tuples in ``schema``'s column order) as a table; one append per row while
    scanning is cheaper than one per column, so rows are turned into columns only here."""
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in schema.names]
    return pa.table(
        [pa.array(c, type=t) for c, t in zip(cols, schema.types, strict=True)], schema=schema
    )
