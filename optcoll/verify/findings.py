"""Words for value violations, shared by both engines so they describe one problem identically.

Each writer gets the position of the offending transfer and looks up the context it names (the
first delivery that came too late, how often a switch received a chunk, ...) in the columns.
"""
from __future__ import annotations

import math

import numpy as np

from optcoll.units import format_time
from optcoll.verify.problem import Finding, Problem
from optcoll.verify.result import Violation


def op_not_allowed(p: Problem, j: int) -> Finding:
    return p.finding("op-not-allowed", (
        f"transfer {int(p.ids[j])} reduces chunk {int(p.chunk[j])} on {p.link_name(p.link[j])} "
        f"{p.when(float(p.start[j]))}, but {p.collective.kind} is not a combining collective: "
        f"only copy is allowed"), j)


def switch_reduce(p: Problem, j: int) -> Finding:
    v = int(p.dst[j])
    return p.finding("switch-reduce", (
        f"transfer {int(p.ids[j])} reduces chunk {int(p.chunk[j])} into switch {p.node(v)} on "
        f"{p.link_name(p.link[j])} {p.when(float(p.start[j]))}, but {p.node(v)} is not an "
        f"in-network reduction switch (reduce = false); send copies through it instead"), j, node=v)


def _first_arrival(p: Problem, chunk: int, node: int, after: float = -math.inf) -> str:
    """'at 2 us (link 9 from npu2)' for the first delivery of chunk to node after engine time."""
    hits = np.flatnonzero((p.chunk == chunk) & (p.dst == node) & (p.arrive > after))
    if hits.size == 0:
        return ""
    i = int(hits[np.lexsort((p.ids[hits], p.arrive[hits]))[0]])
    return f"{p.when(float(p.arrive[i]))} ({p.link_name(p.link[i])} from {p.node(p.src[i])})"


def causality(p: Problem, j: int) -> Finding:
    u, c = int(p.src[j]), int(p.chunk[j])
    first = _first_arrival(p, c, u)
    late = f"only receives it {first}" if first else "never receives it (and does not hold it at the start)"
    rule = ("; a chunk received in step s can be sent from step s+1" if p.step_model and first
            else "")
    return p.finding("causality", f"{p.node(u)} sends {p.transfer_text(j)} but {late}{rule}", j, node=u)


def switch_forward(p: Problem, j: int, multicast_free: bool) -> Finding:
    """A switch sends more copies of a chunk than it has received by then.

    ``multicast_free`` False: a plain switch (each arrival forwarded once, FIFO); True: an
    in-network reduction switch without multicast (sends at most as many times as it received).
    """
    u, c, t = int(p.src[j]), int(p.chunk[j]), float(p.start[j])
    received = int(np.count_nonzero((p.chunk == c) & (p.dst == u) & (p.arrive <= t + p.eps)))
    earlier = (p.start < t) | ((p.start == t) & (p.ids < p.ids[j]))
    sent = int(np.count_nonzero((p.chunk == c) & (p.src == u) & earlier))
    nxt = _first_arrival(p, c, u, after=t + p.eps)
    later = f" (its next copy arrives {nxt})" if nxt else ""
    rule = ("a switch without multicast forwards each arrival once" if not multicast_free else
            "a reduction switch without multicast sends a chunk at most as often as it receives it")
    return p.finding("switch-forward", (
        f"switch {p.node(u)} forwards {p.transfer_text(j)} but has no unforwarded copy: by then it "
        f"has received chunk {c} {received} time(s) and sent it {sent} time(s){later}; {rule}"),
        j, node=u)


def double_count(p: Problem, j: int, twice: list[int]) -> Finding:
    v = int(p.dst[j])
    return p.finding("double-count", (
        f"{p.node(v)} receives a reduce of chunk {int(p.chunk[j])} on {p.link_name(p.link[j])} "
        f"{p.when(float(p.arrive[j]))} (transfer {int(p.ids[j])}) carrying the contributions of "
        f"{p.nodes_text(twice)}, which {p.node(v)} already holds: they would be counted twice"),
        j, at=float(p.arrive[j]), node=v)


def overwrite(p: Problem, j: int, held: list[int]) -> Finding:
    v = int(p.dst[j])
    return p.finding("overwrite", (
        f"{p.node(v)} receives a copy of chunk {int(p.chunk[j])} on {p.link_name(p.link[j])} "
        f"{p.when(float(p.arrive[j]))} (transfer {int(p.ids[j])}) over its partial sum of "
        f"{p.nodes_text(held)}: with combining = \"reduce-only\" (SCCL's rules) an arrival is added to "
        f"the receiver's partial, never written over it; send a reduce of a disjoint partial instead"),
        j, at=float(p.arrive[j]), node=v)


def ambiguous_arrival(p: Problem, j: int, other: int) -> Finding:
    v = int(p.dst[j])
    how = ("by copy and by reduce" if p.op[j] != p.op[other]
           else "by two copies of different partial values")
    when = p.when(float(p.arrive[j]))
    instant = "in the same step" if p.step_model else f"at the same instant ({when.removeprefix('at ')})"
    return p.finding("ambiguous-arrival", (
        f"{p.node(v)} receives chunk {int(p.chunk[j])} {how} {instant}: transfer {int(p.ids[other])} on "
        f"{p.link_name(p.link[other])} and transfer {int(p.ids[j])} on {p.link_name(p.link[j])}; "
        f"the result would depend on their order"), j, at=float(p.arrive[j]), node=v)


def unmet(p: Problem, chunks: np.ndarray, nodes: np.ndarray, first_has: list[int] | None) -> Finding:
    """The postcondition fails at the (chunk, node) pairs given, sorted by (chunk, node).

    ``first_has`` lists the contributions the first pair does hold (combining collectives; None
    when it holds nothing or the collective does not combine), deciding between "postcondition"
    and "missing-contribution". Only the first pair is described, so only its set is asked for.
    """
    c, v = int(chunks[0]), int(nodes[0])
    end = float(p.seconds(float(p.arrive.max(initial=0.0))))
    last = f"after the last delivery at {format_time(end)}" if p.ids.size else "with no transfers at all"
    others = f"; {chunks.size} (chunk, rank) pairs fail in all" if chunks.size > 1 else ""
    have = first_has
    if have is None:
        kind = "postcondition"
        text = (f"{p.node(v)} never holds chunk {c}, which the {p.collective.kind} needs there at "
                f"the end ({last}){others}")
    else:
        kind = "missing-contribution"
        missing = sorted(set(p.collective.pre.of(c).tolist()) - set(have))
        text = (f"{p.node(v)} ends holding chunk {c} without the contributions of "
                f"{p.nodes_text(missing)} (it has {p.nodes_text(sorted(have))}; {last}){others}")
    return Finding(math.inf, math.inf, 0, Violation(kind, text, end, c, None, None, v))


def named_missing(p: Problem, j: int, row: int, forwarded: bool) -> Finding:
    """A plain switch's send names an arrival (``via``) it cannot forward at its start."""
    u = int(p.src[j])
    why = ("was already forwarded by another transfer; a plain switch forwards each arrival once"
           if forwarded else "has not arrived by then")
    return p.finding("switch-forward", (
        f"switch {p.node(u)} forwards {p.transfer_text(j)} as the arrival of transfer {row} (via), "
        f"but that arrival {why}"), j, node=u)


def ambiguous_forward(p: Problem, j: int, together: tuple[int, ...], values: list[int]) -> Finding:
    """Sends of a plain switch that name no arrival, where the arrivals they would take differ."""
    u, c = int(p.src[j]), int(p.chunk[j])
    sends = (f"{p.transfer_text(j)}" if len(together) == 1 else
             f"{len(together)} transfers of chunk {c} leaving it {p.when(float(p.start[j]))} "
             f"(transfers {', '.join(str(int(p.ids[k])) for k in sorted(together, key=lambda k: p.ids[k]))})")
    held = "; ".join(f"{{{p.nodes_text(bits(v))}}}" for v in values[:3]) if p.collective.combining else ""
    return p.finding("ambiguous-forward", (
        f"switch {p.node(u)} forwards {sends} without naming which arrival (via), and the arrivals "
        f"it could take (the oldest that no transfer names, with those arriving at the same instant "
        f"as the last of them) carry different partial values ({held}): which goes where would "
        f"depend on the order the transfers are listed in; set via to the row of the arrival each "
        f"forwards"), j, node=u)


def bits(value: int) -> list[int]:
    """The node ids in a contribution set (a Python int used as a bitset)."""
    return [v for v in range(value.bit_length()) if value >> v & 1]
