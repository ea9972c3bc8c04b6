"""Plain aligned text tables and the few number words every layer prints the same way.

Below reports, check, bench and the CLI so that none of them has to borrow from another.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned text table."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


#: A gap this close below zero is float rounding of a time that meets its bound (truth meets
#: within the same tolerance); anything lower is shown as it is: a bound a schedule beats is a bug.
ROUNDING = 1e-9


def percent(gap: float | None) -> str:
    if gap is None:
        return "-"
    return f"{100 * (0.0 if -ROUNDING <= gap < 0 else gap):.2f} %"
