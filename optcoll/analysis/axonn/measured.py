"""Measured bandwidths per process group, in the form of AxoNN's own configuration model.

Megatron-AxoNN (``examples/comm_model.py`` at 8a4ae24, ``get_bw(ip, my, machine)``) gives the
ring model a measured bandwidth per group instead of a nominal one, looked up by the group's
size ``my`` and its level ``ip``: the rank distance between consecutive members (the product of
the sizes of the faster grid dimensions, X before Y before Z before D, ``Grid.stride``). A
lookup with no entry makes AxoNN skip the configuration; so does this table. AxoNN divides bytes
by 1024^3 and reads its table in the same unit, so its "GB/s" are GiB/s.

The built-in table is AxoNN's published one for Perlmutter (4 A100s per node), first matching
entry wins, as AxoNN's if-chain:

=========  =========  ==========
level ip   size my    GiB/s
=========  =========  ==========
1          2          76
1          4          225
1          8 and up   80
2          2          76
2          4 and up   40
4 and up   any        20
=========  =========  ==========

A measured bandwidth is what a group saw with the other groups of its dimension running, so no
sharing rule divides it further. A table file (TOML) lists the same entries::

    name = "my cluster"
    source = "nccl-tests all_reduce_perf, 2025-06"
    [[bandwidth]]
    level = 1            # or "4+": this level and above
    size = "8+"          # or 2: this size only
    bandwidth = "80 GiB/s"
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optcoll.errors import InputError
from optcoll.inputfiles import known_keys, read_toml
from optcoll.units import parse_bandwidth

GIB = 2**30


@dataclass(frozen=True)
class Entry:
    level: int
    level_and_up: bool
    size: int
    size_and_up: bool
    bandwidth: float  # B/s

    def matches(self, level: int, size: int) -> bool:
        return ((level >= self.level if self.level_and_up else level == self.level)
                and (size >= self.size if self.size_and_up else size == self.size))


@dataclass(frozen=True)
class BandwidthTable:
    name: str
    source: str
    entries: tuple[Entry, ...]

    def bandwidth(self, level: int, size: int) -> float | None:
        """B/s for a group of ``size`` GPUs at ``level``; None where the table has no entry."""
        return next((e.bandwidth for e in self.entries if e.matches(level, size)), None)

    def describe(self) -> str:
        return f"measured bandwidths {self.name} ({self.source})"


def _bound(value: Any, key: str, where: str, source: str | None = None) -> tuple[int, bool]:
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    up = text is not None and text.endswith("+")
    digits = text[:-1].strip() if up else text
    if digits is None or not digits.isdigit() or int(digits) < 1:
        raise InputError(f"must be a positive integer, or one followed by + (that and above), got {value!r}",
                         source=source, field=f"{where}{key}")
    return int(digits), up


def _e(level: int | str, size: int | str, gib: float) -> Entry:
    lv, lv_up = _bound(level, "level", "")
    sz, sz_up = _bound(size, "size", "")
    return Entry(lv, lv_up, sz, sz_up, gib * GIB)


AXONN_PERLMUTTER = BandwidthTable(
    "perlmutter (AxoNN)", "Megatron-AxoNN 8a4ae24 examples/comm_model.py get_bw",
    (_e(1, 2, 76), _e(1, 4, 225), _e(1, "8+", 80), _e(2, 2, 76), _e(2, "4+", 40), _e("4+", "2+", 20)))

#: Machine model name → its built-in table (``--bandwidths measured``).
BUILTIN = {"perlmutter": AXONN_PERLMUTTER}


def parse_bandwidth_table(data: Any, source: str = "bandwidths.toml") -> BandwidthTable:
    known_keys(data, "", ("name", "source", "bandwidth"), source, sections=True)
    rows = data.get("bandwidth")
    if not isinstance(rows, list) or not rows:
        raise InputError("needs at least one [[bandwidth]] entry (level, size, bandwidth)", source=source,
                         field="bandwidth")
    entries = []
    for k, row in enumerate(rows):
        where = f"bandwidth[{k}]."
        known_keys(row, f"bandwidth[{k}]", ("level", "size", "bandwidth"), source)
        for key in ("level", "size", "bandwidth"):
            if key not in row:
                raise InputError("is missing", source=source, field=f"{where}{key}")
        try:
            bandwidth = parse_bandwidth(row["bandwidth"])
        except InputError as exc:
            raise exc.located(source, f"{where}bandwidth") from None
        if bandwidth <= 0:
            raise InputError(f"must be positive, got {row['bandwidth']!r}", source=source, field=f"{where}bandwidth")
        level, level_up = _bound(row["level"], "level", where, source)
        size, size_up = _bound(row["size"], "size", where, source)
        entries.append(Entry(level, level_up, size, size_up, bandwidth))
    return BandwidthTable(str(data.get("name", Path(source).stem)), str(data.get("source", source)),
                          tuple(entries))


def bandwidth_table(choice: str, machine: str) -> BandwidthTable | None:
    """``--bandwidths``: "nominal" (None: the machine model's link bandwidths), "measured" (the
    built-in table of ``machine``), or a table file."""
    if choice == "nominal":
        return None
    if choice == "measured":
        if machine not in BUILTIN:
            raise InputError(f"no built-in measured table for machine {machine!r} (known: "
                             f"{', '.join(BUILTIN)}); pass a table file", field="--bandwidths")
        return BUILTIN[machine]
    return parse_bandwidth_table(read_toml(choice), choice)
