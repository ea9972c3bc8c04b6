"""What NCCL picks for a call: its own cost model (``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``
in NCCL 2.30.7 ``src/graph/tuning.cc``, channel trimming in ``src/enqueue.cc``) evaluated with its
own constants, so the *choice* is NCCL's; the *time* optcoll predicts for it comes from the
calibrated model (``predict``), never from this estimate.

The topology inputs NCCL's search would find are taken from the machine: per-GPU scale-up rate
(the sum of a GPU's in-node links at the generation's link efficiency), NIC rate per GPU (at the
network efficiency), nodes and rails from ``nccl_topology``. CollNet (it needs a plugin) is not
considered. The tree's static correction table (``treeCorrectionFactor``) is applied as
``ncclTopoGetAlgoTime`` does for AllReduce; its Blackwell NVLS-tree use and the tuner-plugin hooks
are not modelled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from optcoll.analysis.expect.calibrated import CalibratedMachine
from optcoll.machines.calibration import PROTOCOLS, Generation, ll_max_busbw
from optcoll.machines.machine import Machine
from optcoll.machines.nccl_latency import BASE_LATENCY_US, HW_LATENCY_US

#: NCCL algorithm name -> the optcoll producer that runs its data flow.
PRODUCERS = {"ring": "nccl-ring", "tree": "nccl-tree", "nvls": "nccl-nvls", "nvls_tree": "nccl-nvls-tree",
             "pat": "nccl-pat"}
_PROTO_INDEX = {"ll": 0, "ll128": 1, "simple": 2}
#: NCCL runs AlltoAll as grouped sends and receives to every peer (nccl-tests alltoall_perf), not
#: a collective algorithm: optcoll's ``direct`` producer. Its protocol is LL while a peer's bytes
#: fit NCCL_P2P_LL_THRESHOLD (16 KiB per channel, one channel per peer assumed; src/enqueue.cc
#: lines 859 and 932 at 5067397c), else Simple.
P2P = "p2p"
P2P_PRODUCER = "direct"
P2P_LL_THRESHOLD = 16384
#: treeCorrectionFactor[protocol][log2(bytes / 64)] (tuning.cc, unchanged 2.17.1-2.30.7): NCCL's
#: derating of a tree's bandwidth at mid sizes; 1.0 from 2^23 · 64 bytes (512 MiB) on.
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}


@dataclass(frozen=True)
class NcclView:
    """The inputs of NCCL's tuning for one communicator (module docstring)."""

    ranks: int
    nodes: int
    intra_gbs: float  # per GPU, scale-up
    inter_gbs: float  # per GPU's share of the node's NICs (0 on one node)
    rails: int
    nvls: bool
    generation: Generation
    intra_links: int = 1  # a GPU's scale-up links (one to an NVSwitch; six NVLinks on a DGX-1)
    ll_max_gbs: float = 0.0  # NCCL's LL cap (llMaxBws): the generation's on one node, the host's across

    @property
    def ppn(self) -> float:
        return self.ranks / self.nodes


def view(physical: Machine, generation: Generation) -> NcclView:
    probe = CalibratedMachine(physical, generation, PROTOCOLS["simple"], False)
    topo, up = probe.topology, probe.scale_up
    m = physical
    first = topo.nodes[0][0]
    out = m.out_links[first]
    intra = float(m.link_bandwidth[out][up[out]].sum()) * generation.link_efficiency.value / 1e9
    rails = max(topo.num_rails, 0)
    inter = 0.0
    if topo.num_nodes > 1 and rails:
        rail_gpu = topo.rails[0][0]
        nic = [e for e in m.out_links[rail_gpu].tolist() if not up[e]]
        per_nic = float(m.link_bandwidth[nic].sum()) if nic else 0.0
        inter = per_nic * rails / len(topo.nodes[0]) * 0.96 / 1e9
    fabric = topo.fabrics[0]
    nvls = (fabric is not None and m.switch(fabric).multicast and m.switch(fabric).reduce
            and generation.nvls_efficiency.value > 0)
    return NcclView(m.num_npus, topo.num_nodes, intra, inter, rails, nvls, generation, int(up[out].sum()),
                    ll_max_busbw(generation, m.name, topo.num_nodes).value)


@dataclass(frozen=True)
class NcclEstimate:
    algorithm: str
    protocol: str
    channels: int
    seconds: float  # NCCL's own estimate (for the choice only)


def _algorithms(kind: str, v: NcclView) -> list[str]:
    if kind == "allreduce":
        out = ["ring", "tree"]
        if v.nvls:
            out.append("nvls" if v.nodes == 1 else "nvls_tree")
        return out
    if kind in ("allgather", "reducescatter"):
        out = ["ring"]
        if v.nodes == v.ranks:
            out.append("pat")
        if v.nvls and v.nodes == 1:
            out.append("nvls")
        return out
    return ["ring"]


def _busbw(kind: str, a: str, p: str, v: NcclView) -> float:
    nsteps = 2 * (v.ranks - 1) if kind == "allreduce" else v.ranks - 1
    single = v.nodes == 1
    ring_bw = v.intra_gbs if single else min(v.intra_gbs, v.inter_gbs)
    ll_max = v.ll_max_gbs
    bw = ring_bw
    if a in ("nvls", "nvls_tree"):
        ch = max(v.generation.nvls_channels, 2)
        intra = v.intra_gbs * v.generation.nvls_efficiency.value * (ch - 1) / ch
        intra *= 2.0 if kind == "allreduce" else (v.ppn - 1) / v.ppn
        bw = intra if a == "nvls" else min(intra, v.inter_gbs * (2 if v.nodes <= 2 else 1))
    if a == "ring" and p == "ll":
        bw = min(ll_max, bw * 0.5)
    if a == "ring" and p == "ll128":
        bw *= 0.92
    if a == "tree":
        # NCCL's search lets a tree's intra-node rate grow to twice its network rate (search.cc
        # pass 2, "increase bwIntra for trees"), and on up to two nodes tuning.cc rates every
        # algorithm by bwIntra: a tree sends each byte across the nodes once each way, a ring twice.
        bw = min(v.intra_gbs, 2 * v.inter_gbs) if v.nodes == 2 else bw
        bw *= 0.92
        if p == "ll":
            bw = min(bw / 3.8, ll_max)
        if p == "ll128":
            bw *= 7.0 / 9.0 if single else 120.0 / 128.0
    if a == "pat":
        bw *= 0.75
    if not (a != "ring" and kind in ("allgather", "reducescatter")):
        bw *= v.ranks / nsteps if a in ("ring", "nvls", "nvls_tree") else 0.5
    return bw


def _latency(kind: str, a: str, p: str, v: NcclView) -> float:
    i = _PROTO_INDEX[p]
    hw_intra = HW_LATENCY_US["nvlink"][a][i]
    hw_inter = HW_LATENCY_US["net"]["tree" if v.ppn == 1 else a][i]
    nsteps = 2 * (v.ranks - 1) if kind == "allreduce" else v.ranks - 1
    lat = BASE_LATENCY_US[a][i]
    log_nodes = int(math.log2(v.nodes)) if v.nodes > 1 else 0
    if a == "ring":
        intra = max(hw_intra, (3.0 if p == "simple" else 1.0) if v.nodes > 1 else 0.0)
        inter_steps = 0 if v.nodes == 1 else (2 * (v.nodes - 1) if kind == "allreduce" else v.nodes - 1)
        return lat + (nsteps - inter_steps) * intra + inter_steps * hw_inter
    if a == "tree":
        return lat + 2 * ((v.ppn - 1) * hw_intra + log_nodes * hw_inter)
    if a == "nvls":
        return hw_intra + (hw_inter if v.nodes > 1 else 0.0)
    if a == "nvls_tree":
        return lat + hw_intra + 2 * log_nodes * hw_inter
    return lat + log_nodes * hw_inter / 3.5 + v.ranks * 2.8  # pat


def channels(a: str, p: str, size: int, v: NcclView) -> int:
    """Channels NCCL runs this call on (enqueue.cc: NVLS fixed, ring/tree trimmed for small sizes)."""
    if a in ("nvls", "nvls_tree"):
        return v.generation.nvls_channels
    proto = PROTOCOLS[p]
    nc, nt = v.generation.channels, proto.max_threads
    threshold = proto.thread_threshold * (v.ranks if (a == "ring" and p == "ll") else 1)
    while size < nc * nt * threshold and nc > 1:
        nc -= 1
    return nc


def estimates(kind: str, size: int, v: NcclView, algorithm: str | None = None) -> list[NcclEstimate]:
    """NCCL's estimate for every algorithm and protocol it would consider, fastest first;
    ``algorithm`` forces one (as NCCL_ALGO does). AlltoAll: its point-to-point sends (``P2P``),
    whose time NCCL does not estimate (0)."""
    if kind == "alltoall":
        return [NcclEstimate(P2P, "ll" if size // v.ranks <= P2P_LL_THRESHOLD else "simple", 1, 0.0)]
    out = []
    for a in _algorithms(kind, v):
        if algorithm is not None and a != algorithm:
            continue
        for p in (("simple",) if a in ("nvls", "nvls_tree", "pat") else ("ll", "ll128", "simple")):
            bw = _busbw(kind, a, p, v)
            if bw <= 0:
                continue
            log_size = (size >> 6).bit_length() - 1
            if a == "tree" and kind == "allreduce" and 0 <= log_size < len(TREE_CORRECTION[p]):
                bw *= TREE_CORRECTION[p][log_size]
            lat = _latency(kind, a, p, v)
            if a == "ring" and p == "simple" and v.nodes > 1 and kind == "allreduce":
                lat *= 1.4  # "plateau effect of ring" (ncclTopoGetAlgoTime, compute capability >= 8.0)
            out.append(NcclEstimate(a, p, channels(a, p, size, v), (lat + size / (1000 * bw)) * 1e-6))
    return sorted(out, key=lambda e: (e.seconds, e.algorithm, e.protocol))
