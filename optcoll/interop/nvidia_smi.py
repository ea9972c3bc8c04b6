"""A machine model from ``nvidia-smi topo -m`` output (DESIGN.md section 3, "Files"; FIELD-NOTES §8).

The matrix names how every two devices (GPUs, then NICs) connect: ``X`` (itself), ``NV#`` (a
bonded set of # NVLinks) or a PCIe/host path: ``PIX`` (at most one PCIe bridge), ``PXB`` (several
bridges, no host bridge), ``PHB`` (through a CPU's host bridge), ``NODE`` (between host bridges of
one NUMA node), ``SYS`` (across the SMP interconnect between sockets; ``SOC`` in old drivers).

How it becomes a model:

- **NVSwitch boxes.** On an NVSwitch fabric every GPU pair shows ``NV#`` and # is the GPU's total
  link count into the fabric (DGX A100: NV12, DGX H100: NV18, DGX-2: NV6), not links per pair.
  A matrix with ``NV#`` on every pair of 3 or more GPUs whose links per GPU, summed over its
  peers, exceed what any GPU has (``MAX_NVLINKS_PER_GPU``) can only be such a fabric: it becomes
  one switch node ``nvswitch`` with one link per GPU and direction of # × the per-link bandwidth
  (NCCL stripes a transfer over all of them). A GPU whose row shows fewer links (one failed) gets
  its own count.
- **Direct NVLinks** (DGX-1's hybrid cube-mesh NV1/NV2, a 4-GPU mesh with NV4 per pair, bridged
  pairs): # parallel links per pair and direction.
- **PCIe/host paths**, when a PCIe bandwidth is given: one switch ``pcie<s>`` per group of GPUs
  behind one PCIe switch tree (PIX/PXB, NICs included: a NIC's row places the NVLink-joined GPUs
  whose own cells show only NV#), one ``cpu<j>`` per host domain (devices that reach each other
  without SYS: a socket, or a NUMA domain of one), PCIe links GPU–switch–host, and a link between
  every two host domains at the same bandwidth (the SMP interconnect is usually faster than one
  x16 link: this errs slow, never fast).
- **NICs**: each NIC's affinity is the set of GPUs on its closest path (PIX, else PXB, PHB, NODE);
  a NIC that reaches every GPU only through SYS serves none (typically a storage NIC). A single
  box does not use its NICs; with ``nodes`` > 1 the box becomes the node of a ``clusters.cluster``
  whose NICs have these affinities.

A model without links (a PCIe-only box and no PCIe bandwidth) or with GPUs NVLink does not reach is
an error naming the option to give. Real boxes have at most 16 GPUs (DGX-2) and a few dozen NICs;
matrices beyond ``MAX_GPUS`` GPUs or ``MAX_DEVICES`` devices are refused at the header, before
their rows are read (a 2,000-GPU matrix used to take minutes to reject).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from optcoll.errors import InputError
from optcoll.inputfiles import read_bytes
from optcoll.machines.clusters import Network, NodeGroup, cluster
from optcoll.machines.describe import strongly_connected_among
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.machines.modelfile import check_machine_size
from optcoll.units import bandwidth_text, format_time, parse_bandwidth, parse_time

PCIE_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
#: Closest first: a NIC serves the GPUs on its closest path of these.
_AFFINITY_ORDER = ("PIX", "PXB", "PHB", "NODE")
#: NVLink ports of a GPU: V100 6, A100 12, H100/H200/B200/B300 18 (NVIDIA datasheets).
MAX_NVLINKS_PER_GPU = 18
#: 4x the largest single-host box (DGX-2, 16 GPUs); devices also count the NICs.
MAX_GPUS = 64
MAX_DEVICES = 256
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# At most 9 digits: any real count fits, and int() never meets an absurdly long one.
_GPU = re.compile(r"GPU(\d{1,9})$")
_NV = re.compile(r"NV([1-9]\d{0,8})$")
_AFFINITY_WORDS = frozenset({"CPU", "NUMA", "GPU", "Affinity", "ID"})
_NIC_LEGEND = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _cell_ok(cell: str) -> bool:
    return cell in ("X", "N/A") or cell in PCIE_PATHS or _NV.match(cell) is not None


@dataclass(frozen=True, eq=False)
class Topology:
    """The matrix as printed: ``relation[i][j]`` for devices GPUs first, then NICs."""

    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    relation: tuple[tuple[str, ...], ...]

    @property
    def nvlinks(self) -> np.ndarray:
        """NVLinks between every two GPUs (0 where the path is PCIe)."""
        n = len(self.gpus)
        out = np.zeros((n, n), dtype=np.int64)
        for i in range(n):
            for j in range(n):
                match = _NV.match(self.relation[i][j])
                out[i, j] = int(match.group(1)) if match else 0
        return out

    def nic_affinity(self) -> tuple[tuple[int, ...], ...]:
        """Per NIC, the GPUs on its closest path (empty when every GPU is SYS away)."""
        out = []
        for c in range(len(self.gpus), len(self.gpus) + len(self.nics)):
            column = [self.relation[g][c] for g in range(len(self.gpus))]
            best = next((level for level in _AFFINITY_ORDER if level in column), None)
            out.append(tuple(g for g, cell in enumerate(column) if cell == best) if best else ())
        return tuple(out)


def _clean(line: str) -> str:
    """A line without the escape sequences a terminal would render (nvidia-smi underlines the header)."""
    return _ANSI.sub("", line).rstrip()


def _is_header(tokens: list[str]) -> bool:
    """The header names GPU0 first and then another column name, never a connection value."""
    return len(tokens) >= 1 and tokens[0] == "GPU0" and (len(tokens) == 1 or not _cell_ok(tokens[1]))


def read_topology(text: str, source: str = "<nvidia-smi>") -> Topology:
    """The device matrix in ``nvidia-smi topo -m`` text; errors name ``source`` and the line."""
    raw = text.splitlines()
    head = next((k for k, line in enumerate(raw) if _is_header(_clean(line).split())), None)
    if head is None:
        raise InputError("no topology matrix found (expected a header line starting with GPU0)",
                         source=source, field="line 1")
    header = f"line {head + 1}"
    columns: list[str] = []
    for token in _clean(raw[head]).split():
        if token in _AFFINITY_WORDS:
            break
        columns.append(token)
    gpus = [c for c in columns if _GPU.match(c)]
    if len(gpus) > MAX_GPUS or len(columns) > MAX_DEVICES:
        raise InputError(f"{len(columns)} devices ({len(gpus)} GPUs): more than one machine has (at most "
                         f"{MAX_GPUS} GPUs and {MAX_DEVICES} devices; the largest real box, DGX-2, has 16 GPUs)",
                         source=source, field=header)
    if columns[:len(gpus)] != gpus or [int(_GPU.match(c).group(1)) for c in gpus] != list(range(len(gpus))):
        raise InputError(f"GPU columns {' '.join(gpus)} are not GPU0, GPU1, ... in order (before any NIC)",
                         source=source, field=header)
    # The rows, the legend (8 lines) and the NIC legend (a line per NIC): never the whole of a huge file.
    lines = [_clean(line) for line in raw[head + 1:head + 2 * len(columns) + 16]]
    rows: dict[str, tuple[int, list[str]]] = {}
    k = 0
    while k < len(lines):
        tokens = lines[k].split()
        if not tokens or tokens[0].rstrip(":") == "Legend":
            break
        where = f"line {head + 2 + k}"
        if tokens[0] not in columns:
            raise InputError(f"the matrix is not square: row {tokens[0]} has no column", source=source,
                             field=where)
        if len(tokens) < len(columns) + 1:
            raise InputError(f"row {tokens[0]} has {len(tokens) - 1} entries, expected at least "
                             f"{len(columns)} (one per column {' '.join(columns)})", source=source, field=where)
        row = tokens[1:len(columns) + 1]
        for c, cell in zip(columns, row):
            if not _cell_ok(cell):
                raise InputError(f"row {tokens[0]}, column {c}: unknown connection {cell!r} (expected "
                                 f"X, NV#, PIX, PXB, PHB, NODE or SYS)", source=source, field=where)
        if tokens[0] in rows:
            raise InputError(f"row {tokens[0]} appears twice", source=source, field=where)
        rows[tokens[0]] = (head + 2 + k, row)
        k += 1
    missing = [c for c in columns if c not in rows]
    if missing:
        raise InputError(f"the matrix is not square: no row for {', '.join(missing)}", source=source,
                         field=header)
    relation = tuple(tuple(rows[c][1]) for c in columns)
    for i, name in enumerate(columns):
        for j, other in enumerate(columns):
            cell = relation[i][j]
            if (cell == "X") != (i == j):
                raise InputError(f"row {name}, column {other}: {cell!r} "
                                 f"({'a GPU is X to itself' if i == j else 'X only on the diagonal'})",
                                 source=source, field=f"line {rows[name][0]}")
            if j < i and (_NV.match(cell) or _NV.match(relation[j][i])) and cell != relation[j][i]:
                raise InputError(f"row {name} says {cell} to {other}, but row {other} says "
                                 f"{relation[j][i]} to {name} (NVLinks are symmetric)",
                                 source=source, field=f"line {rows[name][0]}")
    legend = dict(m.groups() for m in map(_NIC_LEGEND.match, lines[k:]) if m)
    nics = tuple(legend.get(c, c) for c in columns[len(gpus):])
    return Topology(tuple(gpus), nics, relation)


def _value(value: float | str, parse, name: str) -> float:
    if isinstance(value, str):
        try:
            return parse(value)
        except InputError as exc:
            raise exc.located(field=name) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number or a value with units, got {value!r}", field=name)
    return float(value)


def _components(n: int, joined) -> list[int]:
    """Component ids of n items under the pairs ``joined(i, j)`` is true for (union-find)."""
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if joined(i, j):
                parent[root(i)] = root(j)
    ids: dict[int, int] = {}
    return [ids.setdefault(root(i), len(ids)) for i in range(n)]


def _add_pcie_tree(b: MachineBuilder, topo: Topology, bandwidth: float, latency: float) -> str:
    """PCIe switches and host domains as the PCIe relations between all devices imply. A GPU pair
    joined by NVLink shows no PCIe relation, but their NICs may place them; GPUs nothing places
    share one more host switch."""
    n, devices = len(topo.gpus), len(topo.gpus) + len(topo.nics)
    rel = topo.relation
    switch_of = _components(devices, lambda i, j: rel[i][j] in ("PIX", "PXB"))
    host_of = _components(devices, lambda i, j: rel[i][j] in ("PIX", "PXB", "PHB", "NODE"))
    placed = [any(rel[g][d] in PCIE_PATHS for d in range(devices) if d != g) for g in range(n)]
    host_key = [host_of[g] if placed[g] else -1 for g in range(n)]
    hosts: dict[int, str] = {}
    for key in host_key:
        hosts.setdefault(key, f"cpu{len(hosts)}")
    for handle in hosts.values():
        b.add_switch(handle)
    link = dict(bandwidth=bandwidth, latency=latency, bidirectional=True)
    uplink = {g: hosts[host_key[g]] for g in range(n)}
    trees = [[g for g in range(n) if placed[g] and switch_of[g] == s]
             for s in sorted({switch_of[g] for g in range(n) if placed[g]})]
    for i, behind in enumerate(t for t in trees if len(t) > 1):
        switch = b.add_switch(f"pcie{i}")
        b.add_link(switch, hosts[host_key[behind[0]]], **link)
        uplink.update((g, switch) for g in behind)
    for g in range(n):
        b.add_link(g, uplink[g], **link)
    handles = list(hosts.values())
    for i, first in enumerate(handles):
        for second in handles[i + 1:]:
            b.add_link(first, second, **link)
    switches = len(set(uplink.values()) - set(handles))
    return (f"PCIe {bandwidth_text(bandwidth)} per link through {switches} PCIe switch(es) and "
            f"{len(handles)} host domain(s)")


def _nvlink_fabric(topo: Topology) -> tuple[bool, np.ndarray]:
    """(is an NVSwitch fabric, NVLinks per GPU into the fabric / per GPU pair)."""
    nv = topo.nvlinks
    n = len(topo.gpus)
    per_gpu = nv.sum(axis=1)
    switched = n >= 3 and bool((nv[~np.eye(n, dtype=bool)] > 0).all()) and int(per_gpu.max()) > MAX_NVLINKS_PER_GPU
    return switched, (nv.max(axis=1) if switched else nv)


def _check_plausible(topo: Topology, switched: bool, links: np.ndarray, nvls: bool, source: str) -> None:
    per_gpu = links if switched else links.sum(axis=1)
    worst = int(np.argmax(per_gpu))
    if int(per_gpu[worst]) > MAX_NVLINKS_PER_GPU:
        raise InputError(f"{topo.gpus[worst]} would have {int(per_gpu[worst])} NVLinks, but no GPU has more "
                         f"than {MAX_NVLINKS_PER_GPU} (NV# on every pair of 3+ GPUs is read as an NVSwitch "
                         f"fabric, NV# on some pairs as direct links)", source=source,
                         field=f"row {topo.gpus[worst]}")
    if nvls and not switched:
        raise InputError("NVLS needs an NVSwitch fabric, and this matrix shows direct NVLinks or none",
                         source=source, field="--nvls")


def node_from_topology(topo: Topology, *, nvlink_bandwidth: float, nvlink_latency: float,
                       pcie_bandwidth: float | None = None, pcie_latency: float = 0.0, nvls: bool = False,
                       name: str = "nvidia-smi", source: str = "<nvidia-smi>") -> Machine:
    """One box: its NVLink fabric, and its PCIe tree when ``pcie_bandwidth`` is given."""
    n = len(topo.gpus)
    switched, links = _nvlink_fabric(topo)
    nvlink_count = 2 * int(links.sum()) if switched else int(links.sum())
    check_machine_size(n + 2 * n + 1, nvlink_count + 6 * n, source=source, field="line 1")
    _check_plausible(topo, switched, links, nvls, source)
    parts = []
    b = MachineBuilder(name, n, "", list(topo.gpus))
    if switched:
        hub = b.add_switch("nvswitch", multicast=nvls, reduce=nvls)
        for g in range(n):
            b.add_link(g, hub, bandwidth=int(links[g]) * nvlink_bandwidth, latency=nvlink_latency,
                       bidirectional=True)
        per_gpu = sorted({int(x) for x in links})
        parts.append(f"NVSwitch fabric{' with NVLS' if nvls else ''}, "
                     f"{'/'.join(map(str, per_gpu))} NVLinks of {bandwidth_text(nvlink_bandwidth)} per GPU")
    elif links.any():
        for i in range(n):
            for j in range(i + 1, n):
                if links[i, j]:
                    b.add_link(i, j, bandwidth=nvlink_bandwidth, latency=nvlink_latency,
                               count=int(links[i, j]), bidirectional=True)
        parts.append(f"direct NVLinks of {bandwidth_text(nvlink_bandwidth)}, {format_time(nvlink_latency)}")
    if pcie_bandwidth is not None:
        parts.append(_add_pcie_tree(b, topo, pcie_bandwidth, pcie_latency))
    machine = b.build()
    if machine.num_links == 0:
        raise InputError("no NVLink joins any two GPUs: give the PCIe bandwidth (--pcie-bandwidth, "
                         "e.g. '32 GB/s' for PCIe 4.0 x16) to model the PCIe paths", source=source,
                         field="--pcie-bandwidth")
    if not strongly_connected_among(machine, range(n)):
        raise InputError("NVLink does not join every GPU to every other: give the PCIe bandwidth "
                         "(--pcie-bandwidth) to model the PCIe paths between them", source=source,
                         field="--pcie-bandwidth")
    served = [a for a in topo.nic_affinity() if a]
    nic_text = f"; {len(served)} of {len(topo.nics)} NICs near a GPU" if topo.nics else ""
    return machine.renamed(name, f"{n} GPUs from nvidia-smi topo -m: {'; '.join(parts)}{nic_text}")


def machine_from_nvidia_smi(text: str, *, nvlink_bandwidth: float | str, nvlink_latency: float | str,
                            pcie_bandwidth: float | str | None = None, pcie_latency: float | str = 0.0,
                            nvls: bool = False, nodes: int = 1, nic_bandwidth: float | str | None = None,
                            nic_latency: float | str = 0.0, network: str = "rail",
                            network_latency: float | str | None = None, name: str = "nvidia-smi",
                            source: str | None = None) -> Machine:
    """The machine in ``nvidia-smi topo -m`` text (see the module docstring). Bandwidths are per
    link and direction in bytes/s (or strings like "25 GB/s"), latencies seconds (or "0.7 us").
    ``nodes`` > 1: that many boxes, their NICs (with the matrix's affinities, ``nic_bandwidth``
    each) on a ``network`` ("rail", "leaf" or "fat_tree") whose leaf-spine links take
    ``network_latency``."""
    where = source or "<nvidia-smi>"
    nv_bw = _value(nvlink_bandwidth, parse_bandwidth, "nvlink_bandwidth")
    nv_lat = _value(nvlink_latency, parse_time, "nvlink_latency")
    pcie_bw = None if pcie_bandwidth is None else _value(pcie_bandwidth, parse_bandwidth, "pcie_bandwidth")
    pcie_lat = _value(pcie_latency, parse_time, "pcie_latency")
    if not nv_bw > 0:
        raise InputError(f"must be positive, got {nv_bw}", field="nvlink_bandwidth")
    topo = read_topology(text, where)
    node = node_from_topology(topo, nvlink_bandwidth=nv_bw, nvlink_latency=nv_lat, pcie_bandwidth=pcie_bw,
                              pcie_latency=pcie_lat, nvls=nvls, name=name, source=where)
    if nodes == 1:
        return node
    affinity = tuple(a for a in topo.nic_affinity() if a)
    if not affinity:
        raise InputError("no NIC of this box is near a GPU (PIX, PXB, PHB or NODE): it cannot join a "
                         "multi-node cluster (--nodes)", source=where, field="--nodes")
    if nic_bandwidth is None:
        raise InputError("missing: the boxes of a multi-node cluster reach each other through NICs",
                         field="--nic-bandwidth")
    group = NodeGroup(node, nodes, affinity, _value(nic_bandwidth, parse_bandwidth, "nic_bandwidth"),
                      _value(nic_latency, parse_time, "nic_latency"), pcie_bw, pcie_lat)
    net_lat = None if network_latency is None else _value(network_latency, parse_time, "network_latency")
    return cluster([group], Network(network, net_lat), name=name)


def load_nvidia_smi(path: str | os.PathLike, **options) -> Machine:
    """``machine_from_nvidia_smi`` on a file (options as there; ``name`` defaults to the file stem)."""
    path = Path(path)
    text = read_bytes(path).decode("utf-8", errors="replace")  # stray bytes are just not a matrix
    options.setdefault("name", path.stem)
    return machine_from_nvidia_smi(text, source=str(path), **options)
