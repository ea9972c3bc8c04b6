"""NCCL's topology XML (``NCCL_TOPO_DUMP_FILE``, RCCL's too) → a machine model of the box.

The file is the tree NCCL builds (NVIDIA/nccl ``src/graph/xml.cc`` loads ``system`` > ``cpu`` >
``pci`` (nested) > ``gpu`` > ``nvlink``/``c2c`` and ``nic`` > ``net``; RCCL adds ``xgmi`` under
``gpu``). What it says, and only that, becomes the model:

* ``nvlink target count tclass``: ``count`` links from the GPU to ``target``; a target of class
  0x068000 is an NVSwitch (NCCL folds every switch of a box into one node, and so does the model:
  one switch ``nvswitch``, the GPU's link into it carrying all its NVLinks), class 0x03.... a GPU
  (direct links). RCCL's ``xgmi`` is the same with Infinity Fabric links.
* The bandwidth of one link per direction is not in the file (NCCL takes an *effective* figure per
  compute capability, ``src/graph/topo.h`` ``SM90_NVLINK_BW`` = 20.6 GB/s); the model takes the
  nominal one from the datasheet of the GPU generation the file names (``sm`` for NVIDIA, ``gcn``
  for AMD), ``LINK_RATES``; an unknown generation is refused in one line asking for the rate.
* ``net speed`` (Mbit/s, NCCL's unit: ``bw = mbps / 8000`` GB/s) is each NIC's rate per direction;
  a NIC serves the GPUs under its nearest common PCIe switch (else its CPU's GPUs). NICs matter only
  between boxes (``nodes`` > 1 builds a cluster on a rail network, as ``nvidia_smi`` does).

Every element outside that grammar, or a malformed number, is refused naming the file and the
element; nothing is guessed.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from optcoll.errors import InputError
from optcoll.inputfiles import read_text
from optcoll.machines.clusters import Network, NodeGroup, cluster
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.units import bandwidth_text

#: Elements NCCL's and RCCL's loaders know (children of each).
GRAMMAR = {"system": {"cpu"}, "cpu": {"pci", "nic"}, "pci": {"pci", "gpu", "nic", "pcilink"},
           "gpu": {"nvlink", "xgmi", "c2c"}, "nic": {"net"}, "net": set(), "nvlink": set(), "xgmi": set(),
           "c2c": set(), "pcilink": set()}
NVSWITCH_CLASS = "0x068000"


@dataclass(frozen=True)
class LinkRate:
    """Nominal bandwidth of one GPU-to-GPU (or GPU-to-switch) link per direction, with source."""

    bandwidth: float
    source: str


#: Keyed by ``sm`` (NVIDIA compute capability x10) or ``gcn`` (AMD ISA name).
LINK_RATES: dict[str, LinkRate] = {
    "sm70": LinkRate(25e9, "Tesla V100 SXM2 datasheet: NVLink 2, 6 links, 300 GB/s (25 GB/s per link and direction)"),
    "sm80": LinkRate(25e9, "A100 datasheet: NVLink 3, 12 links, 600 GB/s (25 GB/s per link and direction)"),
    "sm90": LinkRate(25e9, "H100 SXM5 datasheet: NVLink 4, 18 links, 900 GB/s (25 GB/s per link and direction)"),
    "sm100": LinkRate(50e9, "HGX B200 datasheet: NVLink 5, 18 links, 1.8 TB/s (50 GB/s per link and direction)"),
    "gfx942": LinkRate(64e9, "AMD CDNA 3 white paper: MI300X Infinity Fabric links of 128 GB/s peak "
                             "bidirectional (64 GB/s per direction)"),
}


@dataclass(frozen=True)
class _Gpu:
    busid: str
    rank: int
    key: str
    links: tuple[tuple[str, int, str, str], ...]  # (target, count, tclass, element name)
    path: tuple[str, ...]  # PCIe bus ids from the CPU down to the GPU
    cpu: int  # the numaid of its <cpu>


def _int(element: ET.Element, name: str, where: str, source: str) -> int:
    raw = element.get(name)
    try:
        return int(raw, 0)
    except (TypeError, ValueError):
        raise InputError(f"<{element.tag}> {where}: attribute {name}={raw!r} is not an integer",
                         source=source, field=element.tag) from None


def _walk(element: ET.Element, path: tuple[str, ...], cpu: int, source: str, gpus: list[_Gpu],
          nics: list[tuple[int, tuple[str, ...], int, str]]) -> None:
    allowed = GRAMMAR[element.tag]
    for child in element:
        if child.tag not in allowed:
            raise InputError(f"unknown element <{child.tag}> inside <{element.tag}> (NCCL's topology XML has "
                             f"{', '.join(sorted(allowed)) or 'nothing'} there)", source=source, field=child.tag)
        if child.tag == "cpu":
            _walk(child, (), _int(child, "numaid", "", source), source, gpus, nics)
        elif child.tag == "pci":
            busid = child.get("busid")
            if not busid:
                raise InputError("<pci> without a busid", source=source, field="pci")
            _walk(child, (*path, busid.lower()), cpu, source, gpus, nics)
        elif child.tag == "gpu":
            gpus.append(_gpu(child, path, cpu, source))
        elif child.tag == "nic":
            for net in child:
                if net.tag != "net":
                    raise InputError(f"unknown element <{net.tag}> inside <nic>", source=source, field=net.tag)
                name = net.get("name", "?")
                nics.append((_int(net, "speed", name, source), path, cpu, name))


def _gpu(element: ET.Element, path: tuple[str, ...], cpu: int, source: str) -> _Gpu:
    rank = _int(element, "rank", f"dev={element.get('dev')}", source)
    sm, gcn = element.get("sm"), element.get("gcn")
    key = (gcn if gcn.startswith("gfx") else f"gfx{gcn}") if gcn else f"sm{sm}" if sm else ""
    links = []
    for link in element:
        if link.tag not in GRAMMAR["gpu"]:
            raise InputError(f"unknown element <{link.tag}> inside <gpu>", source=source, field=link.tag)
        if link.tag == "c2c":
            continue  # the GPU's link to its own CPU (Grace): no GPU-to-GPU path
        count = _int(link, "count", f"rank={rank}", source)
        links.append(((link.get("target") or "").lower(), count, (link.get("tclass") or "").lower(), link.tag))
    if not path:
        raise InputError(f"<gpu> rank={rank} is not inside a <pci> element (its bus id is unknown)",
                         source=source, field="gpu")
    return _Gpu(path[-1], rank, key, tuple(links), path, cpu)


def machine_from_nccl_topo(text: str, *, source: str = "<nccl-topo>", name: str = "nccl-topo",
                           latency: float = 0.5e-6, nodes: int = 1, nic_latency: float = 2e-6,
                           network_latency: float = 1e-6) -> Machine:
    """The box (or ``nodes`` boxes on a rail network) in an NCCL topology XML (module docstring)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise InputError(f"not well-formed XML: {exc}", source=source) from None
    if root.tag != "system":
        raise InputError(f"the root element is <{root.tag}>, NCCL's topology XML has <system>",
                         source=source, field=root.tag)
    gpus: list[_Gpu] = []
    nics: list[tuple[int, tuple[str, ...], int, str]] = []
    _walk(root, (), -1, source, gpus, nics)
    if not gpus:
        raise InputError("no <gpu> element: NCCL lists the GPUs it found under their <pci> devices "
                         "(a hand-written NCCL_TOPO_FILE without them describes PCIe only)", source=source,
                         field="gpu")
    gpus.sort(key=lambda g: g.rank)
    if [g.rank for g in gpus] != list(range(len(gpus))):
        raise InputError(f"GPU ranks are {[g.rank for g in gpus]}, not 0..{len(gpus) - 1}", source=source,
                         field="gpu")
    keys = {g.key for g in gpus}
    if len(keys) != 1 or next(iter(keys)) not in LINK_RATES:
        raise InputError(f"GPU generation {sorted(keys)} has no nominal link rate here (known: "
                         f"{', '.join(LINK_RATES)}); NCCL's own figures are effective rates, not a bound",
                         source=source, field="gpu")
    rate = LINK_RATES[next(iter(keys))]
    node = _node(gpus, rate, latency, name, source)
    if nodes == 1:
        return node
    speeds = [s for s, _, _, _ in nics if s > 0]
    if not speeds:
        raise InputError("no <net> with a speed: the boxes of a cluster reach each other through NICs",
                         source=source, field="net")
    affinity = _affinity(gpus, nics)
    nic = min(speeds) * 1e6 / 8
    built = cluster([NodeGroup(node, nodes, affinity, nic, nic_latency)], Network("rail", network_latency),
                    name=name)
    return built.with_sources(*node.sources, f"{bandwidth_text(nic)} per NIC and direction: the slowest <net "
                                             f"speed> of {source} (Mbit/s)", "NIC and spine latencies: estimates")


def _node(gpus: list[_Gpu], rate: LinkRate, latency: float, name: str, source: str) -> Machine:
    index = {g.busid: g.rank for g in gpus}
    b = MachineBuilder(name, len(gpus), "", [f"gpu{g.rank}" for g in gpus])
    hub = None
    direct: dict[tuple[int, int], int] = {}
    for g in gpus:
        into_switch = sum(c for _, c, tclass, _ in g.links if tclass == NVSWITCH_CLASS)
        if into_switch:
            hub = hub if hub is not None else b.add_switch("nvswitch")
            b.add_link(g.rank, hub, bandwidth=into_switch * rate.bandwidth, latency=latency, bidirectional=True)
        for target, count, tclass, tag in g.links:
            if tclass == NVSWITCH_CLASS:
                continue
            if target not in index:
                raise InputError(f"<{tag}> of GPU rank {g.rank} targets {target}, which is no GPU of this file "
                                 f"(class {tclass})", source=source, field=tag)
            direct[(g.rank, index[target])] = count
    for (u, v), count in sorted(direct.items()):
        b.add_link(u, v, bandwidth=rate.bandwidth, latency=latency, count=count)
    machine = b.build()
    if machine.num_links == 0:
        raise InputError("no NVLink or xGMI link joins the GPUs: the box's GPUs talk over PCIe only, which "
                         "this import does not model", source=source, field="gpu")
    per_gpu = _per_gpu_bandwidth(machine)
    text = (f"{len(gpus)} GPUs from NCCL topology XML {Path(source).name}: "
            f"{'NVSwitch fabric' if hub is not None else 'direct links'}, "
            f"{bandwidth_text(per_gpu)} per GPU and direction")
    return Machine(name, machine.num_npus, machine.switches, machine.link_src, machine.link_dst,
                   machine.link_latency, machine.link_bandwidth, machine.npu_labels, text, None,
                   (f"link counts: {source} (nvlink/xgmi count attributes)",
                    f"{bandwidth_text(rate.bandwidth)} per link and direction: {rate.source}",
                    f"{latency * 1e6:g} us per hop: an estimate, as NCCL's NVLink ring step (src/graph/tuning.cc)"))


def _per_gpu_bandwidth(machine: Machine) -> float:
    """The largest total a GPU sends per direction over its links."""
    out = [0.0] * machine.num_npus
    for u, bw in zip(machine.link_src.tolist(), machine.link_bandwidth.tolist()):
        if u < machine.num_npus:
            out[u] += bw
    return max(out)


def _affinity(gpus: list[_Gpu], nics: list[tuple[int, tuple[str, ...], int, str]]) -> tuple[tuple[int, ...], ...]:
    """Per NIC with a speed, the GPUs sharing its longest PCIe path prefix (at least one switch),
    else the GPUs of its CPU (a NIC straight under ``<cpu>``, or on a root port of its own)."""
    out = []
    for speed, path, cpu, _ in nics:
        if speed <= 0:
            continue
        best, served = 0, ()
        for g in gpus:
            common = 0
            while common < min(len(path), len(g.path)) and path[common] == g.path[common]:
                common += 1
            if common > best:
                best, served = common, (g.rank,)
            elif common == best and common:
                served = (*served, g.rank)
        served = served or tuple(g.rank for g in gpus if g.cpu == cpu)
        if served:
            out.append(served)
    if not out:
        raise InputError("no NIC shares a PCIe switch or a CPU with a GPU", field="net")
    return tuple(out)


def nic_speeds(text: str) -> list[float]:
    """Every ``<net>``'s rate in bytes/s per direction (NCCL's ``speed`` is Mbit/s)."""
    root = ET.fromstring(text)
    return [int(net.get("speed", "0"), 0) * 1e6 / 8 for net in root.iter("net")]


def load_nccl_topo(path: str | os.PathLike, **options) -> Machine:
    """``machine_from_nccl_topo`` on a file (``name`` defaults to the file stem)."""
    path = Path(path)
    options.setdefault("name", path.stem)
    return machine_from_nccl_topo(read_text(path), source=str(path), **options)
