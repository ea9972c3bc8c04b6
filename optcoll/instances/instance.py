"""An instance: a machine + a collective + the time model + a budget for producers."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optcoll import limits
from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.instances.budget import Budget
from optcoll.machines.machine import Machine

OCCUPANCIES = ("link", "serialization")
#: What an arrival may do to the receiver's partial sum (``TimeModel.combining``).
COMBINING = ("copy-or-reduce", "reduce-only")
#: Relative tolerance under which B_e / B_min counts as a whole number in the step model.
STEP_WEIGHT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class TimeModel:
    """docs/model.md §5. Defaults make it the TACOS-compatible timed model.

    ``occupancy = "link"``: a link is busy for α + b/B per transfer (TACOS);
    ``"serialization"``: busy for b/B only, α is pipelined propagation (ASTRA-sim congestion-aware).
    ``send_ports``/``recv_ports``: at most that many transfers leaving/entering a node at once
    (1 and 1 give the classic one-port model); None means every link may be used at once.
    ``reduce_cost``: γ in seconds per byte, added to the arrival of every reduce transfer.
    ``combining``: what an arrival of a combining collective may do to the receiver's partial sum
    (docs/model.md §5.4). ``"copy-or-reduce"`` (default): a reduce adds a partial disjoint from the
    receiver's; a copy writes the sender's partial over the receiver's, whatever that held. This is
    what hardware does (a copy is a plain write of the buffer sent), and it is what ring AllReduce's
    AllGather phase relies on: it overwrites each rank's partial with the full sum, which contains
    it; nothing is ever counted twice, since the value written is the sender's, not a sum with the
    old one. ``"reduce-only"``: SCCL's combining semantics (msccl-tools ``path_encoding``): every
    arrival is added to the receiver's partial and must be disjoint from it, nothing is
    overwritten, so a copy may only fill a partial that is still empty (a switch or a relay that
    holds nothing of the chunk yet). Non-combining collectives are the same under both.
    """

    kind: str = "timed"
    occupancy: str = "link"
    send_ports: int | None = None
    recv_ports: int | None = None
    reduce_cost: float = 0.0
    combining: str = "copy-or-reduce"

    def __post_init__(self) -> None:
        if self.kind not in ("timed", "step"):
            raise InputError(f"unknown time model {self.kind!r}; use timed or step", field="model.kind")
        if self.occupancy not in OCCUPANCIES:
            raise InputError(f"unknown occupancy {self.occupancy!r}; use link or serialization",
                             field="model.occupancy")
        for name in ("send_ports", "recv_ports"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InputError(f"must be a positive integer, got {value!r}", field=f"model.{name}")
        if not self.reduce_cost >= 0:
            raise InputError(f"must be non-negative, got {self.reduce_cost}", field="model.reduce_cost")
        if self.combining not in COMBINING:
            raise InputError(f"unknown combining {self.combining!r}; use {' or '.join(COMBINING)}",
                             field="model.combining")

    def link_timing(self, machine: Machine, chunk_bytes: float | np.ndarray, *, reduce: bool = False,
                    links: np.ndarray | None = None) -> "LinkTiming":
        """The one owner of docs/model.md §5 rules 2–3 and 5: per link, when a transfer of
        ``chunk_bytes`` started at t delivers (t + delay) and how long it holds its link (busy).

        delay = α + b/B, plus γ·b when the transfer is a reduce (``reduce``); busy = α + b/B with
        ``occupancy = "link"``, b/B with ``"serialization"`` (the reduction cost never holds the
        link). Every calendar, bound, producer, importer and the verifier ask this.

        ``links`` (link ids, one per transfer) times those transfers instead of every link, and
        ``chunk_bytes`` may then be an array with one size per transfer (chunks of unequal size,
        AlltoAllv); the arrays answered are aligned with ``links``.
        """
        bandwidth = machine.link_bandwidth if links is None else machine.link_bandwidth[links]
        latency = machine.link_latency if links is None else machine.link_latency[links]
        serial = chunk_bytes / bandwidth
        transit = latency + serial
        busy = transit if self.occupancy == "link" else serial
        extra = self.reduce_cost * chunk_bytes
        return LinkTiming(transit + extra if reduce and np.any(extra) else transit, busy, extra)

    def step_timing(self, machine: Machine, chunk_bytes: float) -> "StepTiming":
        """The one owner of the step model's costs (docs/model.md §5): a step lasts α, the largest
        link latency (a synchronous step waits for the slowest link), plus r·b/B_min for its r
        rounds; a link of bandwidth B carries w = B/B_min chunks per round, so every w must be a
        whole number (else an InputError naming the first link that is not)."""
        weight = np.zeros(0, dtype=np.int64)
        if machine.num_links:
            ratio = machine.link_bandwidth / machine.link_bandwidth.min()
            weight = np.rint(ratio)
            bad = np.flatnonzero(np.abs(ratio - weight) > STEP_WEIGHT_TOLERANCE * ratio)
            if bad.size:
                e = int(bad[0])
                raise InputError(
                    f"the step model needs every link bandwidth to be an integer multiple of the smallest "
                    f"({machine.link_bandwidth.min():g} B/s); link {e} ({machine.label(int(machine.link_src[e]))}->"
                    f"{machine.label(int(machine.link_dst[e]))}) has {ratio[e]:.6g} times that",
                    field="links.bandwidth")
        return StepTiming(float(machine.link_latency.max(initial=0.0)),
                          chunk_bytes / float(machine.link_bandwidth.min(initial=np.inf)),
                          weight.astype(np.int64))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "occupancy": self.occupancy, "send_ports": self.send_ports,
                "recv_ports": self.recv_ports, "reduce_cost": self.reduce_cost, "combining": self.combining}


def check_chunk_copies(ranks: int, chunks: int) -> None:
    """Refuses C chunks per rank over ``ranks`` ranks when N²·C is over the ``chunk_copies`` cap:
    far beyond what any producer solves, low enough that a typo in chunks_per_rank is refused
    before the chunk tables exhaust memory."""
    limits.check("chunk_copies", ranks**2 * chunks,
                 f"{chunks} chunks per rank is too many: with {ranks} ranks the collective would track "
                 f"{ranks**2 * chunks} chunk copies, which", "optcoll tracks")


#: CP-SAT's own limits on its worker count and (a 32-bit integer) its random seed.


@dataclass(frozen=True, eq=False)
class LinkTiming:
    """Per-link arrays from ``TimeModel.link_timing``: ``delay`` from start to delivery, ``busy``
    the time the link is held; ``reduce_extra`` is γ·b, what a reduce adds to its delivery
    (included in ``delay`` only when it was asked for with ``reduce=True``; an array, one per
    transfer, when the transfers' sizes were)."""

    delay: np.ndarray
    busy: np.ndarray
    reduce_extra: float | np.ndarray = 0.0


@dataclass(frozen=True, eq=False)
class StepTiming:
    """From ``TimeModel.step_timing``: seconds per step (``alpha``) and per round (``per_round``),
    and the chunks per round each link carries (``weight``)."""

    alpha: float
    per_round: float
    weight: np.ndarray

    def cost(self, steps: float, rounds: float) -> float:
        """S·α + R·b/B_min, in the verifier's arithmetic."""
        return steps * self.alpha + rounds * self.per_round


@dataclass(frozen=True, eq=False)
class Instance:
    name: str
    machine: Machine
    collective: Collective
    model: TimeModel = TimeModel()
    budget: Budget = Budget()
    #: Where the instance came from (a file path) and how its machine was named, for reports.
    source: str | None = None
    machine_ref: str | None = None
    #: Recorded ground truth and other results as read from the file (written by tools).
    results: dict[str, Any] = field(default_factory=dict)
    #: C left free: the allowed chunks per rank (``optcoll.instances.chunks``); the collective is
    #: then the one at the smallest. Empty when C is fixed.
    chunk_choices: tuple[int, ...] = ()

    def describe(self) -> str:
        free = f", C free in {{{', '.join(map(str, self.chunk_choices))}}}" if self.chunk_choices else ""
        return f"{self.name}: {self.collective.describe()} on {self.machine.name} ({self.model.kind} model{free})"
