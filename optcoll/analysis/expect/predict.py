"""Rows of ``optcoll expect``: per size, the physical bound, the best verified schedule and NCCL's
choice in the calibrated model (``CalibratedMachine``), and a measurement when one is given.

``choice`` is the reusable unit (a later tuner-plugin writer needs exactly it): for a machine,
collective and size, NCCL's predicted algorithm, protocol, channels and chunking C with its
predicted time; ``best`` is the fastest schedule any producer makes, verified on the calibrated
machine at the C its protocol's pipelining unit gives at that size.

C from the size: a chunk is what one channel moves per synchronisation (``channel_slice``): its
protocol's unit (an LL or LL128 FIFO step, a Simple slice, ``calibration.PROTOCOLS``), or, for a
buffer too small to fill it, the channel's share of a ring step (NCCL's ``realChunkSize`` over
its channels and ranks, cut in two slices with Simple); for NVLS one step of all its channels
(``nvlsChunkSize``, which shrinks for small buffers as in ``calcCollChunking``). So C =
⌈M / (N · unit)⌉, capped so that a verification tracks at most ``MAX_CHUNK_COPIES`` chunk copies
(N²·C); a capped C is reported. The GPU→switch→GPU hop is one NVLink transfer for NCCL (the
switch cuts through); with chunks of one channel's share the simulated switch's store-and-forward
costs one chunk of a step's nc, not a whole step. Each Simple slice also holds its channel for the
generation's slice synchronisation, and each LL or LL128 step for NCCL's per-step latency
(``slice_rate``), which the channel does not overlap with its copy: what bounds NCCL's ring at
mid sizes, where slices are short.

Time of a schedule = verified time on the calibrated machine + the per-call latency of its
protocol (NCCL's base latency of the algorithm; NVLS's call latency for schedules that reduce in
a switch) + the fitted launch cost.

The search for ``best`` simulates a candidate (producer, protocol) only if it can still win: its
*floor* is below the best time found so far at that size. A floor is the candidate's call
latency plus the physical bandwidth bound (``bound.bound_curve``; without in-network reduction
for producers that use none, which their routing-only calibrated machine enforces) over the
candidate machine's best link efficiency — a valid bound — and, as a search assumption, the
candidate's own time at any smaller size already simulated on the ``Context`` (a producer's time
does not fall as the message grows). Candidates run in order of their floors. Runs are kept per
(collective, size, producer, protocol) on the ``Context``, so NCCL's choice and the search share
them; every reported time is still a schedule verified at that size.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from optcoll.analysis.expect.bound import bound_curve
from optcoll.analysis.expect.calibrated import TIME_MODEL, CalibratedMachine
from optcoll.analysis.expect.nccl import P2P_PRODUCER, PRODUCERS, NcclView, channels, estimates, view
from optcoll.collectives.builtins import make_collective
from optcoll.errors import InputError
from optcoll.instances.instance import Instance
from optcoll.interop.msccl.routes import routing_view
from optcoll.machines.calibration import (LAUNCH_US, NVLS_CALL_US, NVLS_CHUNK_BYTES, PROTOCOLS, Generation,
                                         ll_max_busbw)
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.registry import get_synthesizer
from optcoll.verify import verify

MAX_CHUNK_COPIES = 1 << 15
#: Slices per chunk of NCCL's Simple ring (ALLREDUCE_CHUNKSTEPS / ALLREDUCE_SLICESTEPS = 4 / 2,
#: src/include/collectives.h, NCCL 2.18.5-2.30.7); genericOp cuts every chunk into that many.
SLICES_PER_CHUNK = 2
#: Producers tried for the best schedule, besides NCCL's own algorithms.
OTHERS = ("inswitch", "rail-exchange", "direct", "multiring")
_INNETWORK = {"nccl-nvls", "nccl-nvls-tree", "inswitch", "rail-exchange", "nccl-collnet"}


@dataclass(frozen=True)
class Choice:
    """A schedule run at one size in the calibrated model: who, how, and the predicted seconds."""

    producer: str
    algorithm: str  # NCCL's name (ring, tree, nvls, nvls_tree, pat) or the producer's
    protocol: str
    channels: int
    chunks: int  # C per rank
    chunk_bytes: float
    capped: bool  # C was capped below what the protocol's granularity asks
    seconds: float

    def to_dict(self) -> dict:
        return {"producer": self.producer, "algorithm": self.algorithm, "protocol": self.protocol,
                "channels": self.channels, "chunks": self.chunks, "chunk_bytes": self.chunk_bytes,
                "capped": self.capped, "time": self.seconds}


@dataclass(frozen=True)
class Context:
    """A machine prepared for prediction: physical graph, GPU generation, NCCL's view of it."""

    physical: Machine
    generation: Generation
    nccl: NcclView
    calibrated: dict = field(default_factory=dict, compare=False)
    #: (collective, size, producer, protocol) -> its Choice, or the NotApplicable it raised
    runs: dict = field(default_factory=dict, compare=False)

    def rated(self, protocol: str, innetwork: bool, rate: float = 1.0, tree: bool = False,
              net_rate: float = 1.0) -> CalibratedMachine:
        key = (protocol, innetwork, rate, tree, net_rate)
        if key not in self.calibrated:
            self.calibrated[key] = CalibratedMachine(self.physical, self.generation, PROTOCOLS[protocol], innetwork,
                                                     rate, tree, net_rate)
        return self.calibrated[key]

    def routing(self, innetwork: bool) -> Machine:
        """The physical machine, its switches only routing unless ``innetwork`` (one object, so
        its bound curve is computed once)."""
        key = ("physical", innetwork)
        if key not in self.calibrated:
            self.calibrated[key] = self.physical if innetwork else routing_view(self.physical)
        return self.calibrated[key]


def context(physical: Machine, generation: Generation) -> Context:
    return Context(physical, generation, view(physical, generation))


def pipelining_unit(algorithm: str, protocol: str, size: int, ctx: Context) -> tuple[int, float]:
    """(channels, bytes of one pipeline step over all of them) at this size: the unit of C
    (module docstring); also what the gap reports cut NCCL's algorithms by."""
    nc = channels(algorithm if algorithm in PRODUCERS else "ring", protocol, size, ctx.nccl)
    if algorithm in ("nvls", "nvls_tree") or algorithm == "inswitch":
        nc = max(ctx.generation.nvls_channels, 1)
        chunk = NVLS_CHUNK_BYTES.value
        for factor, cut in ((64, 65536), (8, 32768), (2, 16384)):
            if size < factor * nc * ctx.physical.num_npus * chunk and chunk > cut:
                chunk = cut
        return nc, nc * chunk
    return nc, PROTOCOLS[protocol].chunk_bytes.value


def channel_slice(algorithm: str, protocol: str, size: int, ctx: Context) -> tuple[int, float]:
    """(channels, bytes) one channel moves per synchronisation at this size: the protocol's unit,
    or for a buffer too small to fill it, the channel's share of a ring step (NCCL's
    ``realChunkSize``, cut into ``SLICES_PER_CHUNK`` slices with Simple); NVLS's unit unchanged."""
    nc, unit = pipelining_unit(algorithm, protocol, size, ctx)
    if algorithm in ("nvls", "nvls_tree", "inswitch"):
        return nc, unit
    slices = SLICES_PER_CHUNK if protocol == "simple" else 1
    return nc, float(min(unit, max(1, math.ceil(size / (ctx.physical.num_npus * nc * slices)))))


def slice_rate(ctx: Context, protocol: str, producer: str, nc: int, unit: float, network: bool = False) -> float:
    """What a channel's per-step synchronisation leaves of the rate its protocol moves:
    s / (s + σ · B_ch), B_ch the channel's share of a GPU's scale-up rate at that protocol (a
    channel runs on one of the GPU's links: with fewer channels than links, one link's rate). σ is the
    generation's Simple slice synchronisation, or for LL and LL128 NCCL's per-step latency of the
    protocol times the generation's ``step_sync``, less the 1/nc of it the simulated propagation
    already charges. Not for in-switch reductions, nor for LL and LL128 on NCCL's tree, whose
    steps are NCCL's tree chunks, not the ring slices ``channel_slice`` gives (their latency per
    level is on the tree-rated links, ``CalibratedMachine.tree``). With ``network``: the same on a
    GPU's link into the network, B_ch the channel's share of the GPU's NIC rate."""
    g = ctx.generation
    if producer in _INNETWORK or (protocol != "simple" and producer == PRODUCERS["tree"]):
        return 1.0
    if network and ctx.nccl.nodes == 1:
        return 1.0
    rate = ctx.nccl.inter_gbs if network else ctx.nccl.intra_gbs
    if protocol == "simple":
        sigma = g.slice_sync.value
    else:
        # NCCL's α once per step: the simulation charges it as propagation, which the chunks of
        # the other nc − 1 channels hide on a shared link; the step holds back that hidden part.
        sigma = g.step_sync.value * PROTOCOLS[protocol].step_nvlink_us.value * (1 - 1 / nc)
        own = g.ll128_payload if protocol == "ll128" else None
        rate *= (own or PROTOCOLS[protocol].payload).value
        if protocol == "ll":
            rate = min(rate, ll_max_busbw(g, ctx.physical.name, ctx.nccl.nodes).value)
    return round(unit / (unit + sigma * 1e-6 * rate * 1e9 / max(nc, 1 if network else ctx.nccl.intra_links)), 6)


def host_floor(generation: Generation, gpus_per_thread: int) -> float:
    """Seconds an nccl-tests iteration takes at least when one thread drives ``gpus_per_thread``
    GPUs (``-g``): it issues every call to each of them in turn (nccl-tests ``src/common.cu``),
    ``Generation.host_issue`` per GPU; 0 for one GPU per thread (``mpirun -np N``)."""
    return gpus_per_thread * generation.host_issue.value * 1e-6 if gpus_per_thread > 1 else 0.0


def call_latency(producer: str, protocol: str) -> float:
    """Seconds a call costs besides its verified schedule: the protocol's base latency (NVLS's
    call latency for schedules that reduce in a switch) and the launch."""
    p = PROTOCOLS[protocol]
    base = NVLS_CALL_US.value if producer in _INNETWORK else p.base_us.value
    return (base + LAUNCH_US.value) * 1e-6


def run(ctx: Context, kind: str, size: int, producer: str, algorithm: str, protocol: str) -> Choice:
    """``producer`` at ``size`` with ``protocol`` on the calibrated machine, verified (once per
    ``Context``); raises ``NotApplicable`` where it does not apply."""
    key = (kind, size, producer, protocol)
    if key not in ctx.runs:
        try:
            ctx.runs[key] = _run(ctx, kind, size, producer, algorithm, protocol)
        except NotApplicable as exc:
            ctx.runs[key] = exc
    found = ctx.runs[key]
    if isinstance(found, NotApplicable):
        raise found
    return found


def _run(ctx: Context, kind: str, size: int, producer: str, algorithm: str, protocol: str) -> Choice:
    n = ctx.physical.num_npus
    nc, unit = channel_slice(algorithm, protocol, size, ctx)
    want = max(1, math.ceil(size / (n * unit)))
    cap = max(1, MAX_CHUNK_COPIES // (n * n))
    chunks = min(want, cap)
    rated = ctx.rated(protocol, producer in _INNETWORK, slice_rate(ctx, protocol, producer, nc, unit),
                      tree=producer == PRODUCERS["tree"],
                      net_rate=slice_rate(ctx, protocol, producer, nc, unit, network=True))
    collective = make_collective(kind, list(range(n)), float(size), chunks)
    instance = Instance(f"expect-{kind}-{size}", rated.machine, collective, TIME_MODEL)
    schedule = get_synthesizer(producer).run(instance, 0)
    result = verify(rated.machine, collective, schedule, TIME_MODEL)
    if not result.valid:  # a producer's bug, never a prediction
        raise RuntimeError(f"{producer} made an invalid schedule: {result.violation}")
    seconds = float(result.time) + call_latency(producer, protocol)
    return Choice(producer, algorithm, protocol, nc, chunks, size / (n * chunks), chunks < want, seconds)


def nccl_choice(ctx: Context, kind: str, size: int, algorithm: str | None = None) -> Choice:
    """NCCL's pick (its own cost model; ``algorithm`` forces one) and its time in the calibrated
    model. What the machine's runtime runs (RCCL's MSCCL files first) is ``rows.runtime_choice``."""
    picks = estimates(kind, size, ctx.nccl, algorithm)
    if not picks:
        raise InputError(f"NCCL runs no {algorithm or 'algorithm'} for {kind} on {ctx.physical.name}",
                         field="algorithm")
    pick = picks[0]
    return run(ctx, kind, size, PRODUCERS.get(pick.algorithm, P2P_PRODUCER), pick.algorithm, pick.protocol)


#: A search cut, not a model parameter: above these sizes the protocol's payload efficiency (LL
#: 0.5, LL128 0.92) costs more than its shorter steps save on every catalog machine, so it is
#: not simulated.
_PROTOCOL_MAX_SIZE = {"ll": 4 << 20, "ll128": 512 << 20, "simple": 1 << 62}


def _protocols(producer: str, size: int) -> tuple[str, ...]:
    if producer in _INNETWORK:
        return ("simple",)
    return tuple(p for p in ("ll", "ll128", "simple") if size <= _PROTOCOL_MAX_SIZE[p])


def _candidates(ctx: Context, size: int) -> list[tuple[str, str, str]]:
    """(producer, NCCL's algorithm name or the producer's, protocol) tried for ``best``."""
    out = []
    for producer in (*PRODUCERS.values(), *OTHERS):
        algorithm = next((a for a, p in PRODUCERS.items() if p == producer), producer)
        out += [(producer, algorithm, protocol) for protocol in _protocols(producer, size)]
    return out


def _floor(ctx: Context, kind: str, size: int, producer: str, protocol: str) -> float:
    """A time the candidate cannot beat at ``size`` (module docstring)."""
    innetwork = producer in _INNETWORK
    rated = ctx.rated(protocol, innetwork).machine
    efficiency = float((rated.link_bandwidth / ctx.physical.link_bandwidth).max())
    bandwidth = bound_curve(ctx.routing(innetwork), kind).per_byte * size / efficiency
    earlier = [c.seconds for (k, s, p, q), c in ctx.runs.items()
               if (k, p, q) == (kind, producer, protocol) and s < size and isinstance(c, Choice)]
    return max([call_latency(producer, protocol) + bandwidth, *earlier])


def best_choice(ctx: Context, kind: str, size: int) -> Choice:
    """The fastest verified schedule over NCCL's algorithms and ``OTHERS`` and every protocol,
    simulating only candidates whose floor is below the best found so far (module docstring),
    starting from NCCL's own pick: the floors' smaller-size term is a search assumption, and a
    best slower than NCCL's choice would be a reporting error."""
    return _search(ctx, kind, size, _candidates(ctx, size), _own_pick(ctx, kind, size))


def _own_pick(ctx: Context, kind: str, size: int) -> Choice | None:
    try:
        return nccl_choice(ctx, kind, size)
    except (NotApplicable, InputError):
        return None


def _nccl_runnable(ctx: Context, kind: str, size: int) -> list[tuple[str, str, str]]:
    return [(PRODUCERS.get(e.algorithm, P2P_PRODUCER), e.algorithm, e.protocol)
            for e in estimates(kind, size, ctx.nccl)]


def nccl_best(ctx: Context, kind: str, size: int) -> Choice:
    """The fastest in the calibrated model of what NCCL itself runs here (its algorithms and
    protocols on this machine, each at NCCL's channels): what a tuner plugin should pick."""
    return _search(ctx, kind, size, _nccl_runnable(ctx, kind, size), _own_pick(ctx, kind, size))


def nccl_candidates(ctx: Context, kind: str, size: int) -> list[Choice]:
    """Every (algorithm, protocol) NCCL runs here, each in the calibrated model, fastest first."""
    out = []
    for producer, algorithm, protocol in _nccl_runnable(ctx, kind, size):
        try:
            out.append(run(ctx, kind, size, producer, algorithm, protocol))
        except NotApplicable:
            continue
    return sorted(out, key=lambda c: (c.seconds, c.algorithm, c.protocol))


def _search(ctx: Context, kind: str, size: int, candidates: list[tuple[str, str, str]],
            best: Choice | None = None) -> Choice:
    skip: set[str] = set()  # producers that do not apply (at any protocol)
    floors = sorted((_floor(ctx, kind, size, producer, protocol), i, producer, algorithm, protocol)
                    for i, (producer, algorithm, protocol) in enumerate(candidates))
    for floor, _, producer, algorithm, protocol in floors:
        if producer in skip or (best is not None and floor > best.seconds):
            continue
        try:
            found = run(ctx, kind, size, producer, algorithm, protocol)
        except NotApplicable:
            skip.add(producer)
            continue
        if best is None or (found.seconds, found.producer, found.protocol) < (best.seconds, best.producer,
                                                                             best.protocol):
            best = found
    if best is None:
        raise InputError(f"no producer makes a {kind} on {ctx.physical.name}")
    return best


def physical_bound(physical: Machine, kind: str, size: int) -> tuple[float, str]:
    """A lower bound valid for every chunking (``bound.bound_curve``): the bandwidth bounds whose
    value does not change with C (cuts, volumes), or the latency bound of a vanishing chunk."""
    return bound_curve(physical, kind).at(size)
