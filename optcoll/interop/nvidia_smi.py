"""A machine model from ``nvidia-smi topo -m`` output.

The matrix names, for every pair of GPUs, how they connect: ``X`` (itself), ``NV#`` (a bonded set
of # NVLinks: # parallel links each way, each of ``nvlink_bandwidth``) or a PCIe/host path
(``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``; ``SOC`` in old drivers). PCIe paths become links
only when ``pcie_bandwidth`` is given: every GPU then gets a cable to one host switch node
``pcie`` (a flat model of the PCIe/CPU fabric, which carries data but holds no buffer). NIC rows
and columns (``NIC0``, ``mlx5_0``, ...), the affinity columns and the legend are read past.
Escape sequences a terminal would render (nvidia-smi underlines the header) are ignored.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from optcoll.errors import InputError
from optcoll.inputfiles import read_bytes
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.machines.modelfile import check_machine_size
from optcoll.units import format_bandwidth, format_time, parse_bandwidth, parse_time

PCIE_PATHS = frozenset({"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"})
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# At most 9 digits: any real count fits, and int() never meets an absurdly long one.
_GPU = re.compile(r"GPU(\d{1,9})$")
_NV = re.compile(r"NV([1-9]\d{0,8})$")
_AFFINITY_WORDS = frozenset({"CPU", "NUMA", "GPU", "Affinity", "ID"})


def _cell_ok(cell: str) -> bool:
    return cell in ("X", "N/A") or cell in PCIE_PATHS or _NV.match(cell) is not None


def _value(value: float | str, parse, name: str) -> float:
    if isinstance(value, str):
        return parse(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number or a value with units, got {value!r}", field=name)
    return float(value)


def machine_from_nvidia_smi(text: str, *, nvlink_bandwidth: float | str, nvlink_latency: float | str,
                            pcie_bandwidth: float | str | None = None,
                            pcie_latency: float | str = 0.0, name: str = "nvidia-smi",
                            source: str | None = None) -> Machine:
    """The machine in ``nvidia-smi topo -m`` text; bandwidths per NVLink per direction in bytes/s
    (or strings like "25 GB/s"), latencies in seconds (or "0.7 us")."""
    where = source or "<nvidia-smi>"
    nv_bw = _value(nvlink_bandwidth, parse_bandwidth, "nvlink_bandwidth")
    nv_lat = _value(nvlink_latency, parse_time, "nvlink_latency")
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    head = next((k for k, line in enumerate(lines) if _is_header(line.split())), None)
    if head is None:
        raise InputError("no topology matrix found (expected a header line starting with GPU0)",
                         source=where, field="line 1")
    columns = []
    for token in lines[head].split():
        if token in _AFFINITY_WORDS:
            break
        columns.append(token)
    gpu_cols = [k for k, c in enumerate(columns) if _GPU.match(c)]
    labels = [columns[k] for k in gpu_cols]
    if [int(_GPU.match(c).group(1)) for c in labels] != list(range(len(labels))):
        raise InputError(f"GPU columns {' '.join(labels)} are not GPU0, GPU1, ... in order",
                         source=where, field=f"line {head + 1}")
    cells: dict[str, tuple[int, list[str]]] = {}
    for k in range(head + 1, len(lines)):
        tokens = lines[k].split()
        if not tokens or tokens[0].rstrip(":") == "Legend":
            break
        if len(tokens) < len(columns) + 1:
            raise InputError(f"row {tokens[0]} has {len(tokens) - 1} entries, expected at least "
                             f"{len(columns)} (one per column {' '.join(columns)})",
                             source=where, field=f"line {k + 1}")
        row = tokens[1:len(columns) + 1]
        for c, cell in zip(columns, row):
            if not _cell_ok(cell):
                raise InputError(f"row {tokens[0]}, column {c}: unknown connection {cell!r} (expected "
                                 f"X, NV#, PIX, PXB, PHB, NODE or SYS)", source=where, field=f"line {k + 1}")
        if tokens[0] in cells:
            raise InputError(f"row {tokens[0]} appears twice", source=where, field=f"line {k + 1}")
        cells[tokens[0]] = (k + 1, row)
    missing = [g for g in labels if g not in cells]
    if missing:
        raise InputError(f"no row for {', '.join(missing)}", source=where, field=f"line {head + 1}")
    n = len(labels)
    links = [[0] * n for _ in range(n)]
    for i, gi in enumerate(labels):
        line_no, row = cells[gi]
        for j, col in enumerate(gpu_cols):
            cell = row[col]
            if (cell == "X") != (i == j):
                raise InputError(f"row {gi}, column {labels[j]}: {cell!r} "
                                 f"({'a GPU is X to itself' if i == j else 'X only on the diagonal'})",
                                 source=where, field=f"line {line_no}")
            nv = _NV.match(cell)
            links[i][j] = int(nv.group(1)) if nv else 0
            if j < i and links[i][j] != links[j][i]:
                raise InputError(f"row {gi} says {cell} to {labels[j]}, but row {labels[j]} says "
                                 f"{cells[labels[j]][1][gpu_cols[i]]} to {gi} (NVLinks are symmetric)",
                                 source=where, field=f"line {line_no}")
    total = sum(2 * links[i][j] for i in range(n) for j in range(i + 1, n))
    check_machine_size(n + 1, total + 2 * n, source=where, field=f"line {head + 1}")
    text_links = f"NVLink {format_bandwidth(nv_bw)} per link, {format_time(nv_lat)}"
    b = MachineBuilder(name, n, f"{n} GPUs from nvidia-smi topo -m: {text_links}"
                       + (f"; PCIe {format_bandwidth(_value(pcie_bandwidth, parse_bandwidth, 'pcie_bandwidth'))} "
                          f"through a host switch" if pcie_bandwidth is not None else ""), labels)
    for i in range(n):
        for j in range(i + 1, n):
            if links[i][j]:
                b.add_link(i, j, bandwidth=nv_bw, latency=nv_lat, count=links[i][j], bidirectional=True)
    if pcie_bandwidth is not None:
        host = b.add_switch("pcie")
        bw = _value(pcie_bandwidth, parse_bandwidth, "pcie_bandwidth")
        lat = _value(pcie_latency, parse_time, "pcie_latency")
        for i in range(n):
            b.add_link(i, host, bandwidth=bw, latency=lat, bidirectional=True)
    return b.build()


def _is_header(tokens: list[str]) -> bool:
    """The header names GPU0 first and then another column name, never a connection value."""
    return (len(tokens) >= 1 and tokens[0] == "GPU0"
            and (len(tokens) == 1 or not _cell_ok(tokens[1])))


def load_nvidia_smi(path: str | os.PathLike, **options) -> Machine:
    """``machine_from_nvidia_smi`` on a file (options as there; ``name`` defaults to the file stem)."""
    path = Path(path)
    text = read_bytes(path).decode("utf-8", errors="replace")  # stray bytes are just not a matrix
    options.setdefault("name", path.stem)
    return machine_from_nvidia_smi(text, source=str(path), **options)
