"""AlltoAllv traffic (docs/model.md §4): the bytes each rank sends each other rank, as an
N × N matrix read from a file or drawn from a seeded generator of mixture-of-experts traffic.

Files: CSV (one row per sending rank, one number per receiving rank, commas or whitespace
between them; blank lines and # comments skipped) or TOML (``sizes = [[...], ...]``). Entries are numbers in the unit the instance
names (bytes unless it says ``unit = "MiB"`` or the like). The diagonal must be 0: what a rank
keeps for itself never moves. Any wrong entry is one ``InputError`` naming the file and the
entry (CSV: line and column, counted from 1 as editors do; TOML: ``sizes[i][j]``).

The generator (``moe``): every rank routes ``tokens`` tokens to ``top_k`` experts each, one
expert per rank, expert popularity Zipf-like with exponent ``skew`` over a seeded random order of
the ranks (so a few ranks are hot, as in MoE training with an imperfect router); the tokens a
rank routes to itself stay local. Entries are scaled so that the mean bytes a rank sends is the
instance's ``size``.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from optcoll.errors import InputError
from optcoll.inputfiles import read_text, read_toml

GENERATORS = ("moe",)


def _number(text: str, source: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"not a number: {text!r}", source=source, field=where) from None


def _csv_rows(path: str | os.PathLike) -> list[tuple[list[float], list[str]]]:
    """Per data line (blank lines and lines starting with # skipped): its numbers and the names
    of its entries."""
    source = str(path)
    rows = []
    for line, text in enumerate(read_text(path).splitlines(), start=1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        cells = [cell.strip() for cell in text.split(",")] if "," in text else text.split()
        names = [f"line {line}, column {col}" for col in range(1, len(cells) + 1)]
        rows.append(([_number(c, source, name) for c, name in zip(cells, names)], names))
    return rows


def _toml_rows(path: str | os.PathLike) -> list[tuple[list[float], list[str]]]:
    source = str(path)
    data = read_toml(path)
    extra = sorted(set(data) - {"sizes"})
    if extra:
        raise InputError(f"unknown key {extra[0]!r}; a traffic matrix file holds only 'sizes'",
                         source=source, field=extra[0])
    sizes = data.get("sizes")
    if not isinstance(sizes, list) or not all(isinstance(row, list) for row in sizes):
        raise InputError("missing or not a list of rows of numbers", source=source, field="sizes")
    rows = []
    for i, row in enumerate(sizes):
        names = [f"sizes[{i}][{j}]" for j in range(len(row))]
        for value, name in zip(row, names):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"not a number: {value!r}", source=source, field=name)
        rows.append(([float(v) for v in row], names))
    return rows


def read_matrix(path: str | os.PathLike, ranks: int, unit_bytes: float = 1.0) -> np.ndarray:
    """The ``ranks`` × ``ranks`` matrix of bytes in a CSV or TOML file (module docstring)."""
    source = str(path)
    suffix = Path(path).suffix.lower()
    if suffix not in (".csv", ".toml"):
        raise InputError("a traffic matrix must be a .csv or .toml file", source=source)
    rows = _toml_rows(path) if suffix == ".toml" else _csv_rows(path)
    if len(rows) != ranks:
        raise InputError(f"has {len(rows)} rows, but the communicator has {ranks} ranks (one row per "
                         "sending rank)", source=source)
    for i, (values, names) in enumerate(rows):
        if len(values) != ranks:
            where = names[0].split(",")[0] if "," in names[0] else f"sizes[{i}]"
            raise InputError(f"has {len(values)} entries, expected {ranks} (one per receiving rank)",
                             source=source, field=where)
        for j, (value, name) in enumerate(zip(values, names)):
            if not math.isfinite(value):
                raise InputError(f"size must be a finite number, got {value!r}", source=source, field=name)
            if value < 0:
                raise InputError(f"size must not be negative, got {value!r}", source=source, field=name)
            if i == j and value != 0:
                raise InputError(f"the diagonal must be 0 (rank {i} sends nothing to itself), got "
                                 f"{value!r}", source=source, field=name)
    matrix = np.array([values for values, _ in rows], dtype=float) * unit_bytes
    if not np.any(matrix > 0):
        raise InputError("every size is 0: nothing to exchange", source=source)
    return matrix


def moe_traffic(ranks: int, mean_bytes: float, *, skew: float = 1.0, top_k: int = 2,
                tokens: int = 4096, seed: int = 0) -> np.ndarray:
    """Seeded mixture-of-experts AlltoAllv traffic (module docstring)."""
    if ranks < 2:
        raise InputError("needs at least 2 ranks", field="alltoallv.generator")
    if not (math.isfinite(skew) and skew >= 0):
        raise InputError(f"must be a non-negative number, got {skew!r}", field="alltoallv.skew")
    for name, value in (("top_k", top_k), ("tokens", tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"must be a positive integer, got {value!r}", field=f"alltoallv.{name}")
    if top_k > ranks:
        raise InputError(f"must be at most the number of ranks ({ranks}), got {top_k}",
                         field="alltoallv.top_k")
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, ranks + 1) ** skew
    popularity = popularity[rng.permutation(ranks)]
    popularity /= popularity.sum()
    counts = np.stack([rng.multinomial(tokens * top_k, popularity) for _ in range(ranks)])
    np.fill_diagonal(counts, 0)
    if not counts.any():
        counts = np.ones((ranks, ranks), dtype=np.int64) - np.eye(ranks, dtype=np.int64)
    return counts * (mean_bytes * ranks / counts.sum())
