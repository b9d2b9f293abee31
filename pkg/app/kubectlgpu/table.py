"""kubectl's output forms for the plugin's views: aligned columns, ``-o wide``, ``-o json|yaml``.

A view is a list of rows, each a structured ``item`` (what ``-o json|yaml`` prints, raw numbers
and timestamps, stable keys for scripts) and its ``cells`` (what the table prints, humanised).
Columns are kubectl's: upper-case headers, three spaces apart, the wide-only ones appended.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TextIO

import yaml

OUTPUTS = ("wide", "json", "yaml")


@dataclass(frozen=True)
class Column:
    header: str
    wide: bool = False  # shown only with -o wide


@dataclass
class Row:
    cells: dict[str, str]  # header -> text
    item: dict[str, Any] = field(default_factory=dict)


def write(
    out: TextIO, *, kind: str, columns: Sequence[Column], rows: Sequence[Row], output: str | None
) -> None:
    """Prints ``rows`` as ``output`` asks (None: the table without wide columns)."""
    if output in ("json", "yaml"):
        document = {"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": kind, "items": [r.item for r in rows]}
        if output == "json":
            out.write(json.dumps(document, indent=2) + "\n")
        else:
            out.write(yaml.safe_dump(document, sort_keys=False))
        return
    shown = [c.header for c in columns if output == "wide" or not c.wide]
    lines = [shown, *([row.cells.get(h, "") for h in shown] for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(shown))]
    for line in lines:
        out.write("   ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() + "\n")


_BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi")


def bytes_text(value: int) -> str:
    """``1610612736`` -> ``1.5Gi``; below 1 KiB the bytes themselves (``512``)."""
    if value < 1024:
        return str(value)
    number, index = value / 1024, 0
    while number >= 1024 and index < len(_BINARY) - 1:
        number, index = number / 1024, index + 1
    return f"{number:.1f}".removesuffix(".0") + _BINARY[index]


def age_text(delta: timedelta) -> str:
    """kubectl's short ages: ``45s``, ``3m20s`` under ten minutes, ``17m``, ``5h``, ``3d``; a
    sample from the future (the node's clock ahead of this machine's) shows as ``0s``."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    return f"{hours}h" if hours < 48 else f"{hours // 24}d"


def timestamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
