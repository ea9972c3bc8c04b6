"""Rows of ``optcoll expect``: per size, the physical bound, the best verified schedule and NCCL's
choice in the calibrated model (``CalibratedMachine``), and a measurement when one is given.

``choice`` is the reusable unit (a later tuner-plugin writer needs exactly it): for a machine,
collective and size, NCCL's predicted algorithm, protocol, channels and chunking C with its
predicted time; ``best`` is the fastest schedule any producer makes, verified on the calibrated
machine at the C its protocol's pipelining unit gives at that size.

C from the size: a chunk is what one channel pipelines at once (its FIFO step or Simple slice,
``calibration.PROTOCOLS``; channels run side by side on the same links, so the ring's unit is one
channel's step), or for NVLS one step of all its channels (``nvlsChunkSize``, which shrinks for
small buffers as in ``calcCollChunking``), so C = ⌈M / (N · unit)⌉, capped so that a
verification tracks at most ``MAX_CHUNK_COPIES`` chunk copies (N²·C); a capped C is reported.
Time of a schedule = verified time on the calibrated machine + the per-call latency of its
protocol (NCCL's base latency of the algorithm; NVLS's call latency for schedules that reduce in
a switch) + the fitted launch cost.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from optcoll.analysis.expect.calibrated import TIME_MODEL, CalibratedMachine
from optcoll.analysis.expect.nccl import PRODUCERS, NcclView, channels, estimates, view
from optcoll.bounds.api import lower_bounds
from optcoll.collectives.builtins import make_collective
from optcoll.errors import InputError
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines.calibration import LAUNCH_US, NVLS_CALL_US, NVLS_CHUNK_BYTES, PROTOCOLS, Generation
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.registry import get_synthesizer
from optcoll.verify import verify

MAX_CHUNK_COPIES = 1 << 15
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

    def rated(self, protocol: str, innetwork: bool) -> CalibratedMachine:
        key = (protocol, innetwork)
        if key not in self.calibrated:
            self.calibrated[key] = CalibratedMachine(self.physical, self.generation, PROTOCOLS[protocol], innetwork)
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


def _call_latency(producer: str, algorithm: str, protocol: str) -> float:
    p = PROTOCOLS[protocol]
    base = NVLS_CALL_US.value if producer in _INNETWORK else p.base_us.value
    return (base + LAUNCH_US.value) * 1e-6


def run(ctx: Context, kind: str, size: int, producer: str, algorithm: str, protocol: str) -> Choice:
    """``producer`` at ``size`` with ``protocol`` on the calibrated machine, verified; raises
    ``NotApplicable`` where it does not apply."""
    n = ctx.physical.num_npus
    nc, unit = pipelining_unit(algorithm, protocol, size, ctx)
    want = max(1, math.ceil(size / (n * unit)))
    cap = max(1, MAX_CHUNK_COPIES // (n * n))
    chunks = min(want, cap)
    rated = ctx.rated(protocol, producer in _INNETWORK)
    collective = make_collective(kind, list(range(n)), float(size), chunks)
    instance = Instance(f"expect-{kind}-{size}", rated.machine, collective, TIME_MODEL)
    schedule = get_synthesizer(producer).run(instance, 0)
    result = verify(rated.machine, collective, schedule, TIME_MODEL)
    if not result.valid:  # a producer's bug, never a prediction
        raise RuntimeError(f"{producer} made an invalid schedule: {result.violation}")
    seconds = float(result.time) + _call_latency(producer, algorithm, protocol)
    return Choice(producer, algorithm, protocol, nc, chunks, size / (n * chunks), chunks < want, seconds)


def nccl_choice(ctx: Context, kind: str, size: int, algorithm: str | None = None) -> Choice:
    """NCCL's pick (its own cost model) and its time in the calibrated model."""
    picks = estimates(kind, size, ctx.nccl, algorithm)
    if not picks:
        raise InputError(f"NCCL runs no {algorithm or 'algorithm'} for {kind} on {ctx.physical.name}",
                         field="algorithm")
    pick = picks[0]
    return run(ctx, kind, size, PRODUCERS[pick.algorithm], pick.algorithm, pick.protocol)


#: A search cut, not a model parameter: above these sizes the protocol's payload efficiency (LL
#: 0.5, LL128 0.92) costs more than its shorter steps save on every catalog machine, so it is
#: not simulated.
_PROTOCOL_MAX_SIZE = {"ll": 4 << 20, "ll128": 512 << 20, "simple": 1 << 62}


def _protocols(producer: str, size: int) -> tuple[str, ...]:
    if producer in _INNETWORK:
        return ("simple",)
    return tuple(p for p in ("ll", "ll128", "simple") if size <= _PROTOCOL_MAX_SIZE[p])


def best_choice(ctx: Context, kind: str, size: int) -> Choice:
    """The fastest verified schedule over NCCL's algorithms and ``OTHERS`` and every protocol."""
    found: list[Choice] = []
    for producer in (*PRODUCERS.values(), *OTHERS):
        algorithm = next((a for a, p in PRODUCERS.items() if p == producer), producer)
        for protocol in _protocols(producer, size):
            try:
                found.append(run(ctx, kind, size, producer, algorithm, protocol))
            except NotApplicable:
                break
    if not found:
        raise InputError(f"no producer makes a {kind} on {ctx.physical.name}")
    return min(found, key=lambda c: (c.seconds, c.producer, c.protocol))


def physical_bound(physical: Machine, kind: str, size: int) -> tuple[float, str]:
    """A lower bound valid for every chunking: the best of the bounds whose value does not change
    with C (the bandwidth ones: cuts, volumes), and the latency bound of a vanishing chunk."""
    n = physical.num_npus
    model = TimeModel(occupancy="serialization")
    values = {}
    for c in (1, 2, 4):
        for b in lower_bounds(physical, make_collective(kind, list(range(n)), float(size), c), model):
            values.setdefault(b.name, []).append(b.value)
    steady = {name: v[0] for name, v in values.items() if len(v) == 3 and max(v) - min(v) <= 1e-12 * max(v)}
    tiny = make_collective(kind, list(range(n)), 1e-9 * n, 1)
    latency = max((b.value for b in lower_bounds(physical, tiny, model) if b.name == "latency"), default=0.0)
    best = max(steady.items(), key=lambda item: item[1], default=("none", 0.0))
    return (best[1], best[0]) if best[1] >= latency else (latency, "latency")


@dataclass(frozen=True)
class Row:
    size: int
    bound: float
    bound_name: str
    best: Choice
    nccl: Choice
    measured: float | None = None

    @property
    def headroom(self) -> float:
        return self.nccl.seconds / self.best.seconds

    def to_dict(self) -> dict:
        out = {"size": self.size, "bound": self.bound, "bound_name": self.bound_name,
               "best": self.best.to_dict(), "nccl": self.nccl.to_dict(), "headroom": self.headroom,
               "measured": self.measured}
        if self.measured is not None:
            out["measured_of_best"] = self.best.seconds / self.measured
            out["measured_of_bound"] = self.bound / self.measured
        return out


def row(ctx: Context, kind: str, size: int, algorithm: str | None = None,
        measured: float | None = None) -> Row:
    bound, name = physical_bound(ctx.physical, kind, size)
    return Row(size, bound, name, best_choice(ctx, kind, size), nccl_choice(ctx, kind, size, algorithm), measured)
