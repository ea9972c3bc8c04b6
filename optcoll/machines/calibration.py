"""The calibrated yardstick's numbers (docs/model.md §8): what NCCL/RCCL achieve, not what links can do.

Physical numbers (the model files) bound; these predict. They never enter a machine model: they
live here, each with its source, and ``optcoll.analysis.expect.calibrated`` builds a separate
``CalibratedMachine`` from them, a type the bounds never see. Every number is one of:

* ``nccl``: read from NCCL 2.30.7 (github.com/NVIDIA/nccl, commit 5067397c), file named;
* ``fitted``: fitted to the collection's ``role = "fit"`` measurements (named), one value per link
  or switch generation, GPU generation or protocol, never per size or machine.

Parameters per GPU generation (``GENERATIONS``) and per protocol (``PROTOCOLS``); a machine is
mapped to its GPU generation by ``generation_of`` (a fact about the hardware, not a fit).
"""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.errors import InputError
from optcoll.machines.nccl_latency import HW_LATENCY_US, PROTOCOLS as _PROTOCOL_ORDER

NCCL = "NCCL 2.30.7 (github.com/NVIDIA/nccl 5067397c)"


@dataclass(frozen=True)
class Calibrated:
    """One calibrated number: value, unit and where it comes from (never a nominal figure)."""

    value: float
    unit: str
    source: str

    def describe(self) -> str:
        return f"{self.value:g} {self.unit} (calibrated: {self.source})"


def nccl(value: float, unit: str, where: str) -> Calibrated:
    return Calibrated(value, unit, f"{NCCL} {where}")


def fitted(value: float, unit: str, to: str) -> Calibrated:
    return Calibrated(value, unit, f"fitted to {to}")


@dataclass(frozen=True)
class Generation:
    """What a GPU generation's runtime achieves on its scale-up fabric."""

    name: str
    #: Effective / nominal rate of one scale-up link (NCCL's per-NVLink bandwidth over 25 or 50 GB/s).
    link_efficiency: Calibrated
    #: NVLS (in-switch reduction) throughput / the links' effective rate; 0 = no NVLS.
    nvls_efficiency: Calibrated
    #: NCCL's cap on LL bus bandwidth in one node (llMaxBws[.][0]), GB/s.
    ll_max_busbw: Calibrated
    #: Channels (CTAs) NCCL runs ring/tree on at full size, and NVLS channels.
    channels: int
    nvls_channels: int
    #: The runtime's own MSCCL algorithms, on by default on this generation's 8-GPU platform:
    #: the bundled folder (``algorithms/<name>``) and why (empty: none).
    msccl: str = ""
    msccl_source: str = ""
    #: What the runtime's MSCCL executor moves per link, relative to its ring kernels' rate.
    msccl_efficiency: Calibrated = Calibrated(1.0, "x", "no MSCCL executor calibrated")
    #: Host time one nccl-tests thread spends issuing a call to each of its GPUs (``-g``), µs per
    #: GPU: the generation's 8-GPU host platform (CPU, driver), a floor under a -g run's time.
    host_issue: Calibrated = Calibrated(0.0, "us", "no nccl-tests -g > 1 measurement of this generation")
    #: Simple's synchronisation per slice and channel (wait for the peer's flag, barrier, fence,
    #: post), which a channel does not overlap with its own copy: a slice of s bytes holds the
    #: channel for σ + s / (its share of the links).
    slice_sync: Calibrated = Calibrated(0.0, "us", "no Simple slice synchronisation calibrated")
    #: LL128's payload rate over the links' effective rate where it was measured below NCCL's
    #: 120/128 (None: ``PROTOCOLS["ll128"].payload``).
    ll128_payload: Calibrated | None = None
    #: LL's and LL128's step synchronisation, as a multiple of NCCL's per-step latency of the
    #: protocol (``Protocol.step_nvlink_us``): each step of a channel waits for its flags and
    #: posts its own before the next, time the channel does not overlap with its own copy, as
    #: NCCL's tuning model (latency + size / bandwidth, both added) charges it. 1: NCCL's kernels.
    step_sync: Calibrated = Calibrated(1.0, "x", f"{NCCL} src/graph/tuning.cc: a ring's latency adds nsteps x "
                                       "hwLatencies[NVLINK][RING][p] to its size / bandwidth; checked on "
                                       "dgxa100-allreduce-azure and -modal (1-16 MiB, ring/LL and LL128: from "
                                       "-9..-35 % to -19..+1 %)")


_TOPO = "src/graph/topo.h"
#: Why RCCL runs its MSCCL XML algorithms by default on MI300X (read at ROCm/rccl 0cbce2a).
RCCL_MSCCL = ("ROCm/rccl 0cbce2a: src/misc/msccl/msccl_lifecycle.cc RCCL_MSCCL_ENABLE defaults to 1 and "
              "mscclInternalSchedulerSelectAlgo runs the first loaded file of the call's collective, rank "
              "count and buffer layout whose [minBytes, maxBytes] holds it; src/graph/rome_models.cc "
              "rome_model_79 (8 GPUs, 7 links each, full mesh) sets mscclEnabled=1; the files ship in "
              "tools/msccl-algorithms")
_TUNING = "src/graph/tuning.cc"
#: NCCL's Simple slice synchronisation through NVLink, fitted on A100 (the only NVLink generation
#: with mid-size Simple ring measurements) and taken for the other NVLink generations, which run
#: the same kernels: a channel's slice of s bytes costs σ + s / (its share of the GPU's links).
SLICE_SYNC = fitted(6.0, "us", "dgxa100-allreduce-azure, -oci and -modal (32 MiB-8 GiB, ring/Simple: 24 channels, "
                    "slices of 171 KiB to 1 MiB; 128 MiB stays 13-16 % under Azure and Modal, 64 MiB 15 % over OCI)")
_SLICE_SYNC_TAKEN = Calibrated(SLICE_SYNC.value, "us", f"taken from Ampere: {SLICE_SYNC.source}")
GENERATIONS: dict[str, Generation] = {
    "volta": Generation("volta", fitted(0.9, "x", "dgx1-allreduce-oci (1 GiB, ring/Simple: 135.5 GB/s busbw over a "
                                        "V100's 6 NVLink2, 22.6 GB/s per 25 GB/s link; NCCL's own SM70_NVLINK_BW, "
                                        f"20 GB/s in {_TOPO}, is a tuning weight 11 % under it)"),
                        nccl(0.0, "x", f"{_TUNING} nvlsEfficiency[Volta]"),
                        nccl(39.0, "GB/s", f"{_TUNING} llMaxBws[Volta][N1]"), 12, 0, slice_sync=_SLICE_SYNC_TAKEN),
    "ampere": Generation("ampere", nccl(20.0 / 25.0, "x", f"{_TOPO} SM80_NVLINK_BW 20 GB/s per NVLink3 (25 GB/s)"),
                         nccl(0.0, "x", f"{_TUNING} nvlsEfficiency[Ampere]"),
                         nccl(87.7, "GB/s", f"{_TUNING} llMaxBws[Ampere][N1]"), 24, 0,
                         host_issue=fitted(5.0, "us", "dgxa100-allreduce-oci, -azure and -modal (-g 8, flat "
                                           "32.2, 42-45 and 54-57 us up to 32 KiB: 4.0, 5.5 and 6.9 us per GPU; "
                                           "EPYC Rome hosts)"),
                         slice_sync=SLICE_SYNC,
                         ll128_payload=fitted(0.55, "x", "dgxa100-allreduce-azure and -modal (4-16 MiB, ring/LL128: "
                                              "13-15 us per MiB, 131 GB/s busbw, against 240 GB/s for Simple)")),
    "hopper": Generation("hopper", nccl(20.6 / 25.0, "x", f"{_TOPO} SM90_NVLINK_BW 20.6 GB/s per NVLink4 (25 GB/s)"),
                         nccl(0.85, "x", f"{_TUNING} nvlsEfficiency[Hopper]"),
                         nccl(141.0, "GB/s", f"{_TUNING} llMaxBws[Hopper][N1]"), 32, 16,
                         host_issue=fitted(3.2, "us", "dgxh100-allreduce-nvls-azure and dgxh200-allreduce-nvls-azure "
                                           "(-g 8: 25.6 and 29.9 us at 1-2 KiB bound it by 25.6/8; Xeon 8480C hosts)"),
                         slice_sync=_SLICE_SYNC_TAKEN),
    "blackwell": Generation("blackwell", nccl(40.1 / 50.0, "x", f"{_TOPO} SM100_NVLINK_BW 40.1 GB/s per NVLink5 (50 GB/s)"),
                            nccl(0.74, "x", f"{_TUNING} nvlsEfficiency[Blackwell]"),
                            nccl(282.0, "GB/s", f"{_TUNING} llMaxBws[Blackwell][N1]"), 32, 24,
                            slice_sync=_SLICE_SYNC_TAKEN),
    # RCCL on MI300X: Infinity Fabric links; no NVLS. Link efficiency fitted (RCCL prints no per-link
    # constant of this kind); LL cap taken as NCCL's for its contemporary (Hopper).
    "cdna3": Generation("cdna3", fitted(0.79, "x", "mi300x-allreduce-rccl-aac8 (sizes >= 256 MiB)"),
                        Calibrated(0.0, "x", "MI300X has no in-switch reduction"),
                        nccl(141.0, "GB/s", f"{_TUNING} llMaxBws[Hopper][N1], taken for MI300X"), 16, 0,
                        "rccl", RCCL_MSCCL,
                        fitted(0.6, "x", "mi300x-allreduce-rccl-aac8 (4-16 MiB, RCCL's all-pairs Simple files)"),
                        host_issue=fitted(7.0, "us", "mi300x-allreduce-rccl-azure-g8 (-g 8: 50-69 us flat from 1 KiB "
                                          "to 4 MiB, 6.3-8.7 us per GPU; Xeon 8480C host: HIP's issue path, where "
                                          "CUDA's on the same host costs Hopper 3.2)"),
                        step_sync=fitted(0.0, "x", "mi300x-allreduce-rccl-aac8 (ring/LL128 at 32 MiB within 0.4 % "
                                         "without it, 14 % over with NCCL's 1.9 us per step: RCCL's LL128 kernels "
                                         "on Infinity Fabric lose no step time, as its Simple slices lose none)"),
                        slice_sync=fitted(0.0, "us", "mi300x-allreduce-rccl-aac8 (ring/Simple 32 MiB-8 GiB within "
                                          "3.5-6 % at one link efficiency: no loss at RCCL's shorter slices)")),
}

#: Effective / nominal rate of a network link (NCCL's NET_BW 12 GB/s per 100 Gbit/s, 12.5 GB/s).
NET_EFFICIENCY = nccl(12.0 / 12.5, "x", f"{_TOPO} NET_BW 12 GB/s for a 100 Gbit/s NIC")


def _hw(hardware: str, algorithm: str, protocol: str) -> Calibrated:
    """NCCL's per-step latency of ``algorithm`` on ``hardware`` for ``protocol`` (hwLatencies)."""
    value = HW_LATENCY_US[hardware][algorithm][_PROTOCOL_ORDER.index(protocol)]
    return nccl(value, "us", f"{_TUNING} hwLatencies[{hardware.upper()}][{algorithm.upper()}][{protocol.upper()}]")


@dataclass(frozen=True)
class Protocol:
    """NCCL's LL, LL128 and Simple: payload efficiency, per-step latencies and pipelining unit."""

    name: str
    #: Payload / bytes on the wire (LL: 8 of 16 bytes; LL128: NCCL's 0.92 for 120/128).
    payload: Calibrated
    #: Per ring step (one GPU to the next), NVLink and network, µs: hwLatencies[.][RING][p].
    step_nvlink_us: Calibrated
    step_net_us: Calibrated
    #: Per-call base latency, µs: baseLatencies[RING][p] (plus a fitted launch term, see BASE).
    base_us: Calibrated
    #: Bytes a channel pipelines at once (its FIFO step, a Simple slice): the unit of C.
    chunk_bytes: Calibrated
    #: NCCL's per-thread work threshold that trims channels for small sizes (comm.h).
    thread_threshold: int
    max_threads: int
    #: Per level of NCCL's tree, NVLink and network, µs: hwLatencies[.][TREE][p]. NCCL's model
    #: charges a tree level 2 × (intra + inter) per call, up and down, with a network hop dearer
    #: than a ring step for LL and LL128 (5.0 and 8.5 against 2.7 and 4.0 µs): a tree rank's
    #: network send waits for the reduction of its children's data (down: its parent's), so the
    #: proxy's post and completion poll are exposed at every level instead of overlapping the
    #: next ring step. The tree's NVLink hop is cheaper for LL128 (1.25 against 1.9 µs).
    tree_step_nvlink_us: Calibrated
    tree_step_net_us: Calibrated

    def steps(self, tree: bool) -> tuple[Calibrated, Calibrated]:
        """(NVLink, network) latency of one step of a ring, or of one level of NCCL's tree."""
        return (self.tree_step_nvlink_us, self.tree_step_net_us) if tree else (self.step_nvlink_us, self.step_net_us)


def _protocol(name: str, payload: Calibrated, base: Calibrated, chunk: Calibrated, threshold: int,
              threads: int) -> Protocol:
    return Protocol(name, payload, _hw("nvlink", "ring", name), _hw("net", "ring", name), base, chunk, threshold,
                    threads, _hw("nvlink", "tree", name), _hw("net", "tree", name))


PROTOCOLS: dict[str, Protocol] = {
    "ll": _protocol("ll", nccl(0.5, "x", f"{_TUNING} ring LL busBw * .5"),
                    nccl(6.6, "us", f"{_TUNING} baseLatencies[RING][LL]"),
                    nccl(32768, "B", "src/device/primitives.h: LL step = buffSize/NCCL_STEPS/2 = 512 KiB/8/2"),
                    8, 512),
    "ll128": _protocol("ll128", nccl(0.92, "x", f"{_TUNING} ring LL128 busBw * 0.92 (120/128)"),
                       nccl(14.0, "us", f"{_TUNING} baseLatencies[RING][LL128]"),
                       nccl(576000, "B", "src/device/primitives.h: LL128 step = 614400 B * 120/128"),
                       8, 640),
    "simple": _protocol("simple", nccl(1.0, "x", "Simple moves payload only"),
                        nccl(8.4, "us", f"{_TUNING} baseLatencies[RING][Simple]"),
                        nccl(1048576, "B",
                             "src/include/collectives.h: slice = stepSize 512 KiB * ALLREDUCE_SLICESTEPS 2"),
                        64, 512),
}

#: NVLS: the per-call latency of an in-switch reduction and its pipelining unit (nvlsChunkSize
#: 128 KiB, cut to 64/32/16 KiB for small buffers in calcCollChunking). NCCL's tuning charges 25 us
#: (2.30.7 hwLatencies[NVLINK][NVLS][Simple]; 23 us baseLat[NVLS][Simple] in 2.18.5-2.20.5, the
#: versions measured), a weight for its choice; what the two NVLS sweeps show at 4-32 KiB is less.
NVLS_CALL_US = fitted(21.0, "us", "dgxh100-allreduce-nvls-azure and dgxh200-allreduce-nvls-azure (4-32 KiB; "
                      "NCCL's own constant: 23-25 us)")
NVLS_CHUNK_BYTES = nccl(131072, "B", "src/init.cc nvlsChunkSize default 128 KiB")

#: A launch and completion cost per call on top of NCCL's own latencies, which nccl-tests' timer
#: (cudaEvent around the call, averaged) includes and NCCL's tuner model leaves out.
LAUNCH_US = fitted(4.0, "us", "dgxh100-allreduce-nvls-azure and dgxa100-allreduce-azure (sizes <= 64 KiB)")

#: The machines of the catalog and their GPU generation (a hardware fact, not a fit). A cluster
#: mixing generations runs at its oldest one's tuning, as NCCL does (minCompCap).
_CATALOG = {"dgx1": "volta", "dgx1_nvlink_down": "volta", "dgx2": "volta", "dgxa100": "ampere",
            "nvswitch8": "ampere", "cluster2x8": "ampere", "perlmutter": "ampere",
            "hetero-dgxa100-dgxh100-rail-2x8": "ampere", "dgxh100": "hopper", "dgxh200": "hopper",
            "dgxh100-rail-2x8": "hopper", "dgxh100-rail-4x8": "hopper", "dgxh100-rail-16x8": "hopper",
            "dgxh100-rail-64x8": "hopper", "dgxb200": "blackwell", "gb200-nvl72": "blackwell",
            "mi300x": "cdna3"}


#: The host CPU of the catalog's multi-node machines' nodes (a hardware fact, not a fit): DGX H100,
#: 2 x Intel Xeon Platinum 8480C (DGX H100 user guide); DGX A100 and OCI BM.GPU4.8 (cluster2x8's
#: nodes), AMD EPYC 7742 / 7542; Perlmutter's GPU nodes, AMD EPYC 7763 (NERSC). A mix is NCCL's
#: MIXED.
_HOST_CPU = {"cluster2x8": "amd", "perlmutter": "amd", "dgxh100-rail-2x8": "intel", "dgxh100-rail-4x8": "intel",
             "dgxh100-rail-16x8": "intel", "dgxh100-rail-64x8": "intel", "hetero-dgxa100-dgxh100-rail-2x8": "mixed"}
#: NCCL's network post overhead per ring step by host CPU (getNetOverhead; x3 for Simple): every
#: step of a ring that spans nodes costs at least this ("inter-node rings still have to launch
#: nsteps * net overhead"), as each step waits for the proxy thread to post its network transfer.
NET_OVERHEAD = {"intel": nccl(1.0, "us", f"{_TUNING} getNetOverhead, x86 Intel"),
                "amd": nccl(2.0, "us", f"{_TUNING} getNetOverhead, x86 AMD"),
                "mixed": nccl(1.0, "us", f"{_TUNING} getNetOverhead, mixed hosts (its default)"),
                "other": nccl(1.0, "us", f"{_TUNING} getNetOverhead, any other host (its default)")}
#: NCCL's cap on LL bus bandwidth across nodes (llMaxBws[1 or 2][N2, N4]): LL's lines then cross
#: the network, and what they reach depends on the host (NCCL's Intel row; AMD or mixed hosts
#: its second row), not on the GPU generation, for two nodes and for more.
LL_MAX_MULTI = {"intel": (nccl(39.0, "GB/s", f"{_TUNING} llMaxBws[0][1] (Intel, 2 nodes)"),
                          nccl(20.4, "GB/s", f"{_TUNING} llMaxBws[0][2] (Intel, > 2 nodes)")),
                "amd": (nccl(22.5, "GB/s", f"{_TUNING} llMaxBws[1][1] (AMD or mixed, 2 nodes)"),
                        nccl(19.0, "GB/s", f"{_TUNING} llMaxBws[1][2] (AMD or mixed, > 2 nodes)"))}


def net_overhead(machine_name: str) -> Calibrated:
    """NCCL's network post overhead of a machine's host CPU (``NET_OVERHEAD``)."""
    return NET_OVERHEAD[_HOST_CPU.get(machine_name, "other")]


def ll_max_busbw(generation: Generation, machine_name: str, nodes: int) -> Calibrated:
    """NCCL's cap on LL bus bandwidth per GPU: the generation's in one node, the host's across nodes."""
    if nodes <= 1:
        return generation.ll_max_busbw
    row = LL_MAX_MULTI["amd" if _HOST_CPU.get(machine_name) in ("amd", "mixed") else "intel"]
    return row[0 if nodes <= 2 else 1]


def generation_of(machine_name: str, override: str | None = None) -> Generation:
    """The GPU generation of a catalog machine, or ``override`` (``--gpu``) for any machine."""
    name = override or _CATALOG.get(machine_name)
    if name is None:
        raise InputError(f"no calibration for machine {machine_name!r}: name its GPU generation "
                         f"(--gpu {'|'.join(GENERATIONS)})")
    if name not in GENERATIONS:
        raise InputError(f"unknown GPU generation {name!r}; one of {', '.join(GENERATIONS)}", field="gpu")
    return GENERATIONS[name]


def catalog_machines() -> list[str]:
    """The NVIDIA and AMD catalog machines the calibration covers, by name."""
    return sorted(_CATALOG)


def all_numbers() -> list[tuple[str, Calibrated]]:
    """Every calibrated number with its name, for reports that list their sources."""
    out: list[tuple[str, Calibrated]] = []
    for g in GENERATIONS.values():
        out += [(f"{g.name}.link_efficiency", g.link_efficiency), (f"{g.name}.nvls_efficiency", g.nvls_efficiency),
                (f"{g.name}.ll_max_busbw", g.ll_max_busbw)]
        if g.msccl:
            out.append((f"{g.name}.msccl_efficiency", g.msccl_efficiency))
        if g.host_issue.value:
            out.append((f"{g.name}.host_issue", g.host_issue))
        out += [(f"{g.name}.slice_sync", g.slice_sync), (f"{g.name}.step_sync", g.step_sync)]
        if g.ll128_payload is not None:
            out.append((f"{g.name}.ll128_payload", g.ll128_payload))
    for p in PROTOCOLS.values():
        out += [(f"{p.name}.payload", p.payload), (f"{p.name}.step_nvlink", p.step_nvlink_us),
                (f"{p.name}.step_net", p.step_net_us), (f"{p.name}.base", p.base_us),
                (f"{p.name}.chunk", p.chunk_bytes), (f"{p.name}.tree_step_nvlink", p.tree_step_nvlink_us),
                (f"{p.name}.tree_step_net", p.tree_step_net_us)]
    out += [(f"net_overhead.{cpu}", value) for cpu, value in NET_OVERHEAD.items()]
    out += [(f"ll_max_busbw.{cpu}.{n}", value)
            for cpu, row in LL_MAX_MULTI.items() for n, value in zip(("n2", "n4"), row)]
    return out + [("net.efficiency", NET_EFFICIENCY), ("nvls.call", NVLS_CALL_US),
                  ("nvls.chunk", NVLS_CHUNK_BYTES), ("launch", LAUNCH_US)]
