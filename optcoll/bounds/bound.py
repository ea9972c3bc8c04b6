"""The plain results the bounds return, and how a node set is named in a witness sentence."""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from optcoll.machines.machine import Machine
from optcoll.units import format_bandwidth, format_time, format_size


@dataclass(frozen=True)
class Bound:
    """A time no valid schedule in the stated model can beat.

    ``name`` is a stable short id ("latency", "ingress", "cut", ...); ``value`` is in seconds
    (``inf`` when no valid schedule exists at all); ``detail`` names the witness (the node, the cut,
    the chunk) so a person can check the number by hand. ``exact`` is False when the bound is the
    best member of a heuristic family of witnesses (every member is valid, the family's true
    maximum may be larger) or when a numeric fallback made the search coarser than exact.
    ``assumptions`` names what the bound needs of the machine beyond the stated time model (e.g.
    "no in-network reduction"); it is applied only where they hold, and reports print them.
    """

    name: str
    value: float
    detail: str
    exact: bool = True
    assumptions: tuple[str, ...] = ()

    def witness(self) -> str:
        """The detail, and what the bound assumes when it assumes anything."""
        return self.detail + (f"; assumes {', '.join(self.assumptions)}" if self.assumptions else "")

    def __str__(self) -> str:
        return f"{self.name}: {format_time(self.value)} ({self.witness()})"


@dataclass(frozen=True)
class CutResult:
    """The worst AllGather cut (ForestColl): max over S of |S ∩ ranks| / B⁺(S).

    ``ratio`` is in seconds per byte (ranks per B/s): an AllGather where every rank contributes
    m bytes takes at least m · ratio. ``inside`` lists S (switches and non-member NPUs may be in
    it), ``bandwidth_out`` is B⁺(S) in B/s. ``iterations`` and ``max_flows`` count the Dinkelbach
    work; ``exact`` is False only when bandwidths had to be rounded for the integer max-flow.
    """

    ratio: float
    inside: tuple[int, ...]
    bandwidth_out: float
    exact: bool = True
    iterations: int = 0
    max_flows: int = 0


def describe_nodes(machine: Machine, nodes: Iterable[int], ranks: Iterable[int], limit: int = 6) -> str:
    """"S = {gpu0, gpu1, sw} (2 of 8 ranks)", shortened for big sets."""
    members = sorted(int(v) for v in nodes)
    rank_set = set(int(r) for r in ranks)
    shown = ", ".join(machine.label(v) for v in members[:limit])
    if len(members) > limit:
        shown += f", … ({len(members)} nodes)"
    inside = sum(1 for v in members if v in rank_set)
    return f"S = {{{shown}}} ({inside} of {len(rank_set)} ranks)"


def cut_sentence(machine: Machine, nodes: Iterable[int], ranks: Iterable[int], chunks: int,
                 chunk_bytes: float, bandwidth: float, reverse: bool = False) -> str:
    """The witness sentence of a cut bound: what must cross it, over how much bandwidth."""
    way = "enter" if reverse else "leave"
    side = "into" if reverse else "out of"
    rate = "no link" if bandwidth == 0 else format_bandwidth(bandwidth)
    return (f"{describe_nodes(machine, nodes, ranks)}: {chunks} chunk(s) of {format_size(chunk_bytes)} must "
            f"{way} S over {rate} {side} S")


def seconds(volume_bytes: float, bandwidth: float) -> float:
    """volume / bandwidth, with nothing to move taking no time and a closed cut taking forever."""
    if volume_bytes <= 0:
        return 0.0
    return math.inf if bandwidth <= 0 else volume_bytes / bandwidth
