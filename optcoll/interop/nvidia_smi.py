"""A machine model from ``nvidia-smi topo -m`` output (docs/model.md §3, "Files"; FIELD-NOTES §8).

The matrix names how every two devices (GPUs, then NICs) connect: ``X`` (itself), ``NV#`` (a
bonded set of # NVLinks) or a PCIe/host path: ``PIX`` (at most one PCIe bridge), ``PXB`` (several
bridges, no host bridge), ``PHB`` (through a CPU's host bridge), ``NODE`` (between host bridges of
one NUMA node), ``SYS`` (across the SMP interconnect between sockets; ``SOC`` in old drivers).

How it becomes a model:

- **NVSwitch boxes.** On an NVSwitch fabric every GPU pair shows ``NV#`` and # is the GPU's total
  link count into the fabric (DGX A100: NV12, DGX H100: NV18, DGX-2: NV6), not links per pair.
  When the GPUs with NVLinks (3 or more) show ``NV#`` on every pair among them and their links,
  summed over their peers, exceed what the GPU has (``GPU_NVLINK`` when the GPU is named, else
  ``MAX_NVLINKS_PER_GPU``), the matrix can only be such a fabric: it becomes one switch node
  ``nvswitch`` with one link per GPU and direction of # × the per-link bandwidth (NCCL stripes a
  transfer over all of them). A GPU whose row shows fewer links (one failed) gets its own count; a
  GPU with none (NVLink down, rows of NODE/SYS) stays off the fabric and needs the PCIe paths. A
  pair whose count is not the lesser of its GPUs' (NV2 among NV18) is refused: it is neither a
  fabric nor direct links.
  A full mesh whose sums fit is ambiguous without the GPU: NV6 on every pair of 4 GPUs is a 4-GPU
  HGX H100 board (18 direct links per GPU) or 4 GPUs of a DGX-2 (6 links into its NVSwitches), 3×
  apart; such a matrix is refused until the GPU (or its link count) is named.
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

Bandwidths per link and direction come from ``GPU_NVLINK`` when the GPU is named (``gpu``), or
are given. A model without links (a PCIe-only box and no PCIe bandwidth) or with GPUs NVLink does not reach is
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


@dataclass(frozen=True)
class NVLinkGPU:
    """A GPU's NVLink ports and the bandwidth of one, per direction (bytes/s), with the source."""

    links: int
    bandwidth: float
    source: str


# Datasheet totals are bidirectional over all links: per link and direction = total / 2 / links.
GPU_NVLINK: dict[str, NVLinkGPU] = {
    "V100": NVLinkGPU(6, 25e9, "Tesla V100 SXM2 datasheet: NVLink 2, 6 links, 300 GB/s"),
    "A100": NVLinkGPU(12, 25e9, "A100 datasheet: NVLink 3, 12 links, 600 GB/s (SXM4; PCIe with bridge)"),
    "A800": NVLinkGPU(8, 25e9, "A800 SXM4 datasheet: NVLink 3, 400 GB/s (8 of A100's 12 links)"),
    "H100": NVLinkGPU(18, 25e9, "H100 SXM5 datasheet: NVLink 4, 18 links, 900 GB/s"),
    "H200": NVLinkGPU(18, 25e9, "H200 SXM datasheet: NVLink 4, 900 GB/s"),
    "H800": NVLinkGPU(8, 25e9, "H800 SXM5 datasheet: NVLink 4, 400 GB/s (8 of H100's 18 links)"),
    "H20": NVLinkGPU(18, 25e9, "H20 datasheet: NVLink 4, 900 GB/s"),
    "B200": NVLinkGPU(18, 50e9, "HGX B200 datasheet: NVLink 5, 18 links, 1.8 TB/s per GPU"),
    "B300": NVLinkGPU(18, 50e9, "HGX B300 datasheet: NVLink 5, 1.8 TB/s per GPU"),
    "GB200": NVLinkGPU(18, 50e9, "GB200 NVL72 datasheet: NVLink 5, 1.8 TB/s per GPU"),
}
#: The most NVLink ports any GPU has (``GPU_NVLINK``).
MAX_NVLINKS_PER_GPU = max(gpu.links for gpu in GPU_NVLINK.values())
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


def _nvlink_fabric(topo: Topology, max_links: int, known: bool, source: str) -> tuple[bool, np.ndarray]:
    """(is an NVSwitch fabric, NVLinks per GPU into the fabric / per GPU pair); ``max_links`` is
    the GPU's port count, ``known`` whether the GPU was named (else a full mesh that fits is ambiguous)."""
    nv = topo.nvlinks
    on = np.flatnonzero(nv.any(axis=1))
    mesh = nv[np.ix_(on, on)]
    full_mesh = len(on) >= 3 and bool((mesh[~np.eye(len(on), dtype=bool)] > 0).all())
    if full_mesh and int(mesh.sum(axis=1).max()) > max_links:
        _one_count_per_gpu(topo, on, mesh, source)
        return True, nv.max(axis=1)
    if full_mesh and not known:
        k, n = int(mesh.max()), len(on)
        raise InputError(f"NV{k} on every pair of {n} GPUs is either {(n - 1) * k} direct NVLinks per GPU "
                         f"(a {n}-GPU board) or {k} per GPU into an NVSwitch fabric (some GPUs of a switched "
                         f"box): name the GPU (--gpu, e.g. H100) or its link count (--nvlinks-per-gpu)",
                         source=source, field="--gpu")
    return False, nv


def _one_count_per_gpu(topo: Topology, on: np.ndarray, mesh: np.ndarray, source: str) -> None:
    """On an NVSwitch fabric a pair shows the link count into the fabric of its less connected GPU
    (a degraded GPU's count on its pairs, every other GPU's own elsewhere); a matrix that mixes
    counts otherwise (NV18 beside NV2 between GPUs of 18 links) is no fabric, and more links than
    a GPU has to be direct ones."""
    counts = mesh.max(axis=1)
    expected = np.minimum.outer(counts, counts)
    wrong = (mesh != expected) & ~np.eye(len(on), dtype=bool)
    if wrong.any():
        r, k = (int(x[0]) for x in np.nonzero(wrong))
        raise InputError(f"mixes NV{int(counts[r])} and NV{int(mesh[r, k])} pairs ({topo.gpus[int(on[r])]}-"
                         f"{topo.gpus[int(on[k])]} shows NV{int(mesh[r, k])}): on an NVSwitch fabric a pair "
                         f"shows its GPUs' link count into the fabric, and as direct NVLinks they are more "
                         f"than a GPU has", source=source, field=f"row {topo.gpus[int(on[r])]}")


def _check_plausible(topo: Topology, switched: bool, links: np.ndarray, nvls: bool, max_links: int,
                     gpu_text: str, source: str) -> None:
    per_gpu = links if switched else links.sum(axis=1)
    worst = int(np.argmax(per_gpu))
    if int(per_gpu[worst]) > max_links:
        raise InputError(f"{topo.gpus[worst]} would have {int(per_gpu[worst])} NVLinks, but {gpu_text} "
                         f"{max_links} (NV# on every pair of 3+ GPUs is read as an NVSwitch fabric, NV# on "
                         f"some pairs as direct links)", source=source, field=f"row {topo.gpus[worst]}")
    if nvls and not switched:
        raise InputError("NVLS needs an NVSwitch fabric, and this matrix shows direct NVLinks or none",
                         source=source, field="--nvls")


def node_from_topology(topo: Topology, *, nvlink_bandwidth: float, nvlink_latency: float,
                       pcie_bandwidth: float | None = None, pcie_latency: float = 0.0, nvls: bool = False,
                       nvlinks_per_gpu: int | None = None, name: str = "nvidia-smi",
                       source: str = "<nvidia-smi>") -> Machine:
    """One box: its NVLink fabric, and its PCIe tree when ``pcie_bandwidth`` is given;
    ``nvlinks_per_gpu`` is the GPU's NVLink port count when known."""
    n = len(topo.gpus)
    max_links = nvlinks_per_gpu or MAX_NVLINKS_PER_GPU
    switched, links = _nvlink_fabric(topo, max_links, nvlinks_per_gpu is not None, source)
    nvlink_count = 2 * int(links.sum()) if switched else int(links.sum())
    check_machine_size(n + 2 * n + 1, nvlink_count + 6 * n, source=source, field="line 1")
    gpu_text = "this GPU has" if nvlinks_per_gpu else "no GPU has more than"
    _check_plausible(topo, switched, links, nvls, max_links, gpu_text, source)
    parts = []
    b = MachineBuilder(name, n, "", list(topo.gpus))
    if switched:
        hub = b.add_switch("nvswitch", multicast=nvls, reduce=nvls)
        for g in np.flatnonzero(links).tolist():
            b.add_link(g, hub, bandwidth=int(links[g]) * nvlink_bandwidth, latency=nvlink_latency,
                       bidirectional=True)
        per_gpu = sorted({int(x) for x in links if x})
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


def machine_from_nvidia_smi(text: str, *, nvlink_latency: float | str,
                            nvlink_bandwidth: float | str | None = None, gpu: str | None = None,
                            nvlinks_per_gpu: int | None = None, pcie_bandwidth: float | str | None = None, pcie_latency: float | str = 0.0,
                            nvls: bool = False, nodes: int = 1, nic_bandwidth: float | str | None = None,
                            nic_latency: float | str = 0.0, network: str = "rail",
                            network_latency: float | str | None = None, name: str = "nvidia-smi",
                            source: str | None = None) -> Machine:
    """The machine in ``nvidia-smi topo -m`` text (see the module docstring). Bandwidths are per
    link and direction in bytes/s (or strings like "25 GB/s"), latencies seconds (or "0.7 us").
    ``gpu`` (a ``GPU_NVLINK`` name) gives the per-link bandwidth and the link count unless
    ``nvlink_bandwidth`` or ``nvlinks_per_gpu`` are given; a matrix with NVLinks needs one of them.
    ``nodes`` > 1: that many boxes, their NICs (with the matrix's affinities, ``nic_bandwidth``
    each) on a ``network`` ("rail", "leaf" or "fat_tree") whose leaf-spine links take
    ``network_latency``."""
    where = source or "<nvidia-smi>"
    if gpu is not None:
        known = {key.lower(): value for key, value in GPU_NVLINK.items()}
        if gpu.lower() not in known:
            raise InputError(f"unknown GPU {gpu!r} (known: {', '.join(GPU_NVLINK)}); give --nvlink-bandwidth "
                             f"and --nvlinks-per-gpu instead", field="--gpu")
        spec = known[gpu.lower()]
        nvlink_bandwidth = spec.bandwidth if nvlink_bandwidth is None else nvlink_bandwidth
        nvlinks_per_gpu = spec.links if nvlinks_per_gpu is None else nvlinks_per_gpu
    if nvlinks_per_gpu is not None and (isinstance(nvlinks_per_gpu, bool) or not isinstance(nvlinks_per_gpu, int)
                                        or nvlinks_per_gpu < 1):
        raise InputError(f"must be a positive whole number, got {nvlinks_per_gpu!r}", field="--nvlinks-per-gpu")
    nv_bw = None if nvlink_bandwidth is None else _value(nvlink_bandwidth, parse_bandwidth, "nvlink_bandwidth")
    nv_lat = _value(nvlink_latency, parse_time, "nvlink_latency")
    pcie_bw = None if pcie_bandwidth is None else _value(pcie_bandwidth, parse_bandwidth, "pcie_bandwidth")
    pcie_lat = _value(pcie_latency, parse_time, "pcie_latency")
    if nv_bw is not None and not nv_bw > 0:
        raise InputError(f"must be positive, got {nv_bw}", field="nvlink_bandwidth")
    topo = read_topology(text, where)
    if nv_bw is None and topo.nvlinks.any():
        raise InputError("missing: the matrix shows NVLinks; name the GPU (--gpu, e.g. H100) or give the "
                         "bandwidth per NVLink and direction", source=where, field="--nvlink-bandwidth")
    node = node_from_topology(topo, nvlink_bandwidth=nv_bw or 0.0, nvlink_latency=nv_lat, pcie_bandwidth=pcie_bw,
                              pcie_latency=pcie_lat, nvls=nvls, nvlinks_per_gpu=nvlinks_per_gpu, name=name,
                              source=where)
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
