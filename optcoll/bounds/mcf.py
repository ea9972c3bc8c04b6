"""The multi-commodity-flow (MCF) bound of unicast collectives (docs/model.md §6), and the
flow that LP-guided schedules follow.

**The LP.** Commodities and link windows are those of ``optcoll.bounds.commodities``: in a
schedule of makespan T every link e carries its useful transfers inside T − L_e, and commodity k
pays w_ke seconds of link time per byte. Divided by T, the bytes each link carries form a flow,
so the least T for which

    Σ_k w_ke · f_ke ≤ T − L_e  (every link),   f_k a flow meeting commodity k's demand

is feasible bounds every schedule. With L_e = 0 this is the max-concurrent-flow LP: T ≥ m/λ*
for m bytes per pair. On a machine with a semiregular symmetry group that keeps the demand
(AlltoAll on tori, hypercubes, switch stars, clusters; ``optcoll.machines.automorphisms``), only
one source per orbit gets flow variables and each link orbit one capacity row: averaging any
solution over the group gives a symmetric one of equal T, so nothing is lost.

**The certificate.** No number from the LP solver is believed. Its capacity-row duals are link
prices y ≥ 0, and for *any* prices every schedule satisfies

    Σ_pairs m_p · dist_{y·w_k}(s_p, d_p)  ≤  Σ_e y_e · max(0, T − L_e)

(price each byte by the links it crosses; each link earns at most its price times its window).
The bound is the least T meeting it, computed with exact shortest paths on the full machine;
``fluid`` is the same with every L_e = 0 (D/Σy, the classic m/λ*). A loose LP solution can
only weaken the bound, never make it wrong.

Assumptions, stated with every bound: store-and-forward of whole chunks; unicast chunks (a copy
serves no other destination; multicast switches do not help); non-combining (no in-network
reduction involved); port limits ignored.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from typing import TYPE_CHECKING

import numpy as np

from optcoll.bounds.bound import Bound
from optcoll.bounds.commodities import (Commodities, LinkWindows, link_windows, simple_graph,
                                        unicast_commodities)
from optcoll.bounds.lp import LpResult, solve_lp
from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.instances.instance import TimeModel
from optcoll.machines.automorphisms import SymmetryGroup, semiregular_group, trivial_group
from optcoll.machines.machine import Machine
from optcoll.units import format_time

if TYPE_CHECKING:
    import scipy.sparse as sp

#: The certified value is lowered by this relative amount, far above the rounding of its
#: float arithmetic and far below any gap that matters (truth meets within 1e-9).
ROUNDING_GUARD = 1e-12
ASSUMPTIONS = ("store-and-forward of whole chunks; unicast chunks (copies and multicast serve no "
               "other destination); no in-network reduction involved; port limits ignored")


@dataclass(frozen=True, eq=False)
class FlowSolution:
    """The LP's flow for the modelled commodities and the certificate of its prices.

    ``flow[i]`` is commodity ``modelled[i]``'s bytes per link; with a symmetry group the other
    sources' flows are its images (``group``). ``prices`` are per link, ``own_prices`` per
    commodity and link for the commodity-window rows (a common scale that cancels). ``bound`` is the certified value, ``fluid`` the same without windows.
    """

    demand: Commodities
    windows: LinkWindows
    group: SymmetryGroup
    modelled: np.ndarray
    flow: np.ndarray
    lp: LpResult
    lp_time: float
    prices: np.ndarray
    own_prices: np.ndarray | None
    bound: float
    fluid: float
    model: "_Model"

    @property
    def variables(self) -> int:
        return int(self.model.matrix.shape[1])

    @property
    def rows(self) -> int:
        return int(self.model.matrix.shape[0])

    @property
    def exact(self) -> bool:
        """Whether the certificate meets the LP's own optimum (the LP solved to optimality)."""
        return self.lp.solved and self.bound >= self.lp_time * (1 - 1e-6)


def _scales(demand: Commodities, windows: LinkWindows) -> tuple[float, float]:
    """Units for bytes and seconds that keep the LP's coefficients near 1."""
    unit_bytes = float(demand.pair_bytes.max())
    per_byte = windows.per_byte[np.isfinite(windows.per_byte)]
    return unit_bytes, unit_bytes * float(np.median(per_byte))


@dataclass(frozen=True, eq=False)
class _Model:
    """The LP as arrays, in units ``unit_bytes`` and ``unit_time`` (T is the last column);
    ``usage`` is each flow column's seconds of link time per unit, for the tidy re-solve.
    Rows: conservation, one capacity row per link orbit, then own-window rows for
    (``own_commodity``, ``own_link``), indices into the modelled commodities and the links."""

    objective: np.ndarray
    matrix: sp.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    ub: np.ndarray
    usage: np.ndarray
    unit_bytes: float
    unit_time: float
    orbits: int
    own_commodity: np.ndarray
    own_link: np.ndarray


def _model(machine: Machine, demand: Commodities, windows: LinkWindows, group: SymmetryGroup,
           modelled: np.ndarray) -> _Model:
    """The (possibly symmetry-reduced) LP of the module docstring."""
    import scipy.sparse as sp  # loaded by the flow LP only: most commands never build it

    n, links, k = machine.num_nodes, machine.num_links, modelled.size
    unit_bytes, unit_time = _scales(demand, windows)
    orbit = group.link_orbit
    orbits = int(orbit.max()) + 1
    stabiliser = group.order / group.link_orbit_size[orbit]
    usable = np.isfinite(windows.lost)
    var = np.arange(k * links).reshape(k, links)
    e = np.tile(np.arange(links), k)
    c = np.repeat(np.arange(k), links)
    flow_cols = var.ravel()
    # Conservation: row c·n + v, out-flow minus in-flow = supply.
    rows = [c * n + machine.link_src[e], c * n + machine.link_dst[e]]
    cols = [flow_cols, flow_cols]
    vals = [np.ones(e.size), -np.ones(e.size)]
    supply = demand.supply(n, modelled).ravel() / unit_bytes
    # Capacity: row k·n + orbit, Σ stabiliser · w · f − T ≤ −L.
    cost = np.stack([windows.cost(float(demand.largest[i])) for i in modelled])[c, e]
    usage = np.where(usable[e], cost * unit_bytes / unit_time, 0.0)
    keep = usable[e]
    rows.append(k * n + orbit[e[keep]])
    cols.append(flow_cols[keep])
    vals.append(stabiliser[e[keep]] * usage[keep])
    time_col = k * links
    rows.append(k * n + np.arange(orbits))
    cols.append(np.full(orbits, time_col))
    vals.append(-np.ones(orbits))
    lost = np.full(orbits, -np.inf)
    np.maximum.at(lost, orbit[usable], windows.lost[usable])
    # A commodity's own windows, where they are tighter (no symmetry then: one commodity each).
    own_c, own_e = _own_rows(windows, modelled, group)
    first_own = k * n + orbits
    rows += [first_own + np.arange(own_c.size), first_own + np.arange(own_c.size)]
    cols += [var[own_c, own_e], np.full(own_c.size, time_col)]
    vals += [usage[var[own_c, own_e]], -np.ones(own_c.size)]
    own_lost = windows.own[modelled[own_c], own_e] if own_c.size else np.zeros(0)
    matrix = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                           shape=(first_own + own_c.size, k * links + 1))
    row_lo = np.concatenate([supply, np.full(orbits + own_c.size, -np.inf)])
    row_hi = np.concatenate([supply, np.where(np.isfinite(lost), -lost / unit_time, 0.0),
                             -own_lost / unit_time])
    ub = np.full(k * links + 1, np.inf)
    ub[var[:, ~usable].ravel()] = 0.0
    objective = np.zeros(k * links + 1)
    objective[time_col] = 1.0
    return _Model(objective, matrix, row_lo, row_hi, ub, usage, unit_bytes, unit_time, orbits,
                  own_c, own_e)


def _own_rows(windows: LinkWindows, modelled: np.ndarray, group: SymmetryGroup
              ) -> tuple[np.ndarray, np.ndarray]:
    """(modelled commodity, link) of every own-window row worth adding: usable links whose
    commodity window is tighter than the link's."""
    if windows.own is None or group.order > 1:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    own = windows.own[modelled]
    tighter = np.isfinite(windows.lost)[None, :] & np.isfinite(own) & (
        own > windows.lost[None, :] * (1 + 1e-9) + 1e-15)
    return np.nonzero(tighter)


def certify(machine: Machine, demand: Commodities, windows: LinkWindows, prices: np.ndarray,
            own_prices: np.ndarray | None = None) -> tuple[float, float]:
    """(bound, fluid bound) that link ``prices`` and commodity-link ``own_prices`` (commodities ×
    links, for the own-window rows) prove (module docstring), in seconds."""
    usable = np.isfinite(windows.lost)
    prices = np.where(usable, np.maximum(prices, 0.0), 0.0)
    own = None
    if own_prices is not None and windows.own is not None:
        own = np.where(usable[None, :] & np.isfinite(windows.own), np.maximum(own_prices, 0.0), 0.0)
        if not own.any():
            own = None
    total = float(prices.sum()) + (float(own.sum()) if own is not None else 0.0)
    if not total > 0:
        return 0.0, 0.0
    priced = 0.0
    reverse = demand.by == "destination"
    alone = np.zeros(demand.num, dtype=bool) if own is None else own.any(axis=1)
    for k in np.flatnonzero(alone):  # commodities with own prices: their own costs
        cost = (prices + own[k]) * windows.cost(float(demand.largest[k]))
        priced += _priced_pairs(machine, demand, np.flatnonzero(demand.commodity == k), cost, reverse)
    for largest in np.unique(demand.largest[~alone]):
        ks = np.flatnonzero(~alone & (demand.largest == largest))
        members = np.flatnonzero(np.isin(demand.commodity, ks))
        priced += _priced_pairs(machine, demand, members, prices * windows.cost(float(largest)), reverse)
    if not math.isfinite(priced):
        return math.inf, math.inf
    if not priced > 0:
        return 0.0, 0.0
    fluid = priced / total
    weight, lost = prices[prices > 0], windows.lost[prices > 0]
    if own is not None:
        weight = np.concatenate([weight, own[own > 0]])
        lost = np.concatenate([lost, windows.own[own > 0]])
    order = np.argsort(lost)
    lost, weight = lost[order], weight[order]
    # g(T) = Σ y_e max(0, T − L_e) is piecewise linear; find the piece where it reaches `priced`.
    slope = np.cumsum(weight)
    reach = np.cumsum(weight * lost)  # g(T) = slope_i·T − reach_i on [lost_i, lost_{i+1}]
    ends = np.append(lost[1:], np.inf)
    at_end = slope * ends - reach
    i = int(np.searchsorted(at_end, priced, side="left"))
    windowed = (priced + reach[i]) / slope[i]
    shave = 1 - ROUNDING_GUARD
    return windowed * shave, fluid * shave


def _priced_pairs(machine: Machine, demand: Commodities, members: np.ndarray, cost: np.ndarray,
                  reverse: bool) -> float:
    """Σ over the pairs ``members`` of bytes × their least path cost under ``cost``."""
    from scipy.sparse.csgraph import dijkstra

    graph = simple_graph(machine, cost, reverse=reverse)
    ends, far = ((demand.pair_dst[members], demand.pair_src[members]) if reverse
                 else (demand.pair_src[members], demand.pair_dst[members]))
    origins, row = np.unique(ends, return_inverse=True)
    dist = dijkstra(graph, indices=origins)
    return float(np.dot(demand.pair_bytes[members], dist[row, far]))


def solve_flow(machine: Machine, collective: Collective, model: TimeModel = TimeModel(), *,
               solver: str = "auto", threads: int = 1, symmetry: bool = True) -> FlowSolution | None:
    """The LP and its certificate for a unicast collective, or None for any other collective.

    ``symmetry``: reduce the LP by a semiregular group when the demand allows it (module
    docstring). Cached per (machine, collective, model, options): bounds, reports and the
    LP-guided producer share one solve.
    """
    return _solve_flow(machine, collective, model, solver, threads, symmetry)


@lru_cache(maxsize=8)
def _solve_flow(machine: Machine, collective: Collective, model: TimeModel, solver: str,
                threads: int, symmetry: bool) -> FlowSolution | None:
    demand = unicast_commodities(collective)
    if demand is None or machine.num_links == 0:
        return None
    windows = link_windows(machine, demand, model)
    group = trivial_group(machine)
    if symmetry and demand.uniform_complete:
        members = np.zeros(machine.num_nodes, dtype=np.int64)
        members[demand.holders] = 1
        group = semiregular_group(machine, members)
    modelled = np.flatnonzero(np.isin(demand.origin, group.representatives)) \
        if group.order > 1 else np.arange(demand.num)
    if modelled.size * machine.num_links > MAX_VARIABLES:
        raise FlowTooLarge(f"the flow LP would have {modelled.size} commodities x {machine.num_links} "
                           f"links = {modelled.size * machine.num_links} variables (at most "
                           f"{MAX_VARIABLES}; no symmetry reduces it)")
    best: FlowSolution | None = None
    floor = 0.0
    for _ in range(MAX_PASSES):
        exact_windows = windows.largest_loss <= floor
        model = _model(machine, demand, windows.capped(floor), group, modelled)
        result = solve_lp(model.objective, model.matrix, model.row_lo, model.row_hi,
                          np.zeros(model.ub.size), model.ub, solver=solver, threads=threads)
        flow = result.x[:-1].reshape(modelled.size, machine.num_links) * model.unit_bytes
        first = modelled.size * machine.num_nodes
        orbit_prices = -result.duals[first:first + model.orbits]
        prices = orbit_prices[group.link_orbit] / group.link_orbit_size[group.link_orbit]
        own_prices = None
        if model.own_commodity.size:
            own_prices = np.zeros((demand.num, machine.num_links))
            own_prices[modelled[model.own_commodity], model.own_link] = -result.duals[first + model.orbits:]
        bound, fluid = certify(machine, demand, windows, prices, own_prices)
        found = FlowSolution(demand, windows, group, modelled, flow, result,
                             result.objective * model.unit_time, prices, own_prices, bound, fluid, model)
        if best is None or found.bound >= best.bound:
            best = found
        if exact_windows or not best.bound > floor * (1 + 1e-9):
            break
        floor = best.bound
    return best


#: The largest LP built (flow variables): about 1.5 GB of solver memory and two minutes of PDLP.
MAX_VARIABLES = 2_000_000


class FlowTooLarge(InputError):
    """The flow LP of this instance is over ``MAX_VARIABLES``."""


#: LP passes at most: the first with every window open (the classic fluid bound), then each
#: with windows capped at the bound proven so far (module docstring of ``LinkWindows.capped``).
MAX_PASSES = 4


#: The tidy re-solve keeps T within this relative slack of the LP's optimum.
TIDY_SLACK = 1e-5


def _at_optimum(solution: FlowSolution, weight: np.ndarray | float, threads: int) -> np.ndarray | None:
    """The modelled commodities' flows with T within ``TIDY_SLACK`` of the LP's optimum that
    spend the least link time, each flow variable's weighted by ``weight``; None when the
    re-solve does not finish optimal."""
    model = solution.model
    ub = model.ub.copy()
    ub[-1] = solution.lp.objective * (1 + TIDY_SLACK)
    result = solve_lp(np.append(model.usage * weight, 0.0), model.matrix, model.row_lo, model.row_hi,
                      np.zeros(ub.size), ub, solver=solution.lp.solver, threads=threads)
    return result.x[:-1].reshape(solution.flow.shape) * model.unit_bytes if result.solved else None


def tidy_flow(solution: FlowSolution, *, threads: int = 1) -> np.ndarray:
    """The modelled commodities' flows at (almost) the LP's optimal T that use the least link
    time in all: the same makespan, without the detours an optimal vertex may take where links
    have slack. ``solution.flow`` when the re-solve does not finish optimal."""
    found = _at_optimum(solution, 1.0, threads)
    return solution.flow if found is None else found


#: A capacity row within this fraction of T of its window is full at the LP's optimum (a
#: bottleneck the dual may leave unpriced, such as the ingress twin of a priced egress link).
FULL = 1e-6


def _slack_links(solution: FlowSolution) -> np.ndarray:
    """Per link: whether its orbit has slack at the LP's optimum (unpriced and not full)."""
    model = solution.model
    first = model.matrix.shape[0] - model.orbits - model.own_commodity.size
    orbit_price = np.zeros(model.orbits)
    np.maximum.at(orbit_price, solution.group.link_orbit, solution.prices)
    activity = model.matrix[first:first + model.orbits] @ solution.lp.x
    full = activity >= model.row_hi[first:first + model.orbits] - FULL * solution.lp.objective
    return ((orbit_price <= 0.0) & ~full)[solution.group.link_orbit]


#: Weight per full link crossed before (relay early) or after (relay late) a link with slack.
RELAY_PENALTY = 100.0


def relay_flow(solution: FlowSolution, machine: Machine, side: str, *, threads: int = 1) -> np.ndarray | None:
    """Flows at (almost) the LP's optimal T that make their hops over links with slack on one
    ``side`` ("source" or "destination") of the full links: the least link time with each
    slack link's weighted by 1 + ``RELAY_PENALTY`` per full link a flow must cross between
    that side and it.

    Why: an optimal flow may relay a chunk over a fast link before its bottleneck (NCCL's PXN:
    to the GPU on the destination's rail, then one NIC hop), after it (one NIC hop, then the
    destination node's NVLink) or between two (a rail cluster's spine), or mix them; one way
    alone lets a list schedule keep the bottleneck links busy back to back, a mix makes their
    arrivals collide (7 % above the bound on dgxh100-rail-16x8 AlltoAll, 0 % relaying early).
    None when no link has slack or the re-solve does not finish optimal."""
    from scipy.sparse.csgraph import dijkstra

    slack = _slack_links(solution)
    if not slack.any():
        return None
    demand = solution.demand
    origins = demand.origin[solution.modelled]
    crossing = (~slack).astype(float)
    if demand.by == "destination":  # flows run into their origin: count from the far end
        fulls = dijkstra(simple_graph(machine, crossing, reverse=True), indices=origins)
        fulls = np.where(np.isfinite(fulls), fulls, 0.0)[:, machine.link_dst]
        position = fulls.max() - fulls
    else:
        fulls = dijkstra(simple_graph(machine, crossing), indices=origins)
        position = np.where(np.isfinite(fulls), fulls, 0.0)[:, machine.link_src]
    if side == "destination":
        position = position.max() - position
    weight = np.where(slack[None, :], 1.0 + RELAY_PENALTY * position, 1.0)
    return _at_optimum(solution, weight.ravel(), threads)


def mcf_bound(machine: Machine, collective: Collective, model: TimeModel = TimeModel()) -> Bound | None:
    """The MCF bound (module docstring) of a unicast collective; None for other collectives and
    where the LP would be too large to build (``MAX_VARIABLES``)."""
    try:
        found = solve_flow(machine, collective, model)
    except FlowTooLarge:
        return None
    if found is None:
        return None
    demand, lp = found.demand, found.lp
    symmetric = (f", reduced by {found.group.order} symmetries to {found.modelled.size} "
                 f"commodit{'y' if found.modelled.size == 1 else 'ies'}" if found.group.order > 1 else "")
    priced = np.flatnonzero(found.prices > 0)
    top = priced[np.argsort(-found.prices[priced], kind="stable")][:3]
    shown = ", ".join(f"{machine.label(int(machine.link_src[e]))}->{machine.label(int(machine.link_dst[e]))}"
                      for e in top)
    more = f" and {priced.size - top.size} more" if priced.size > top.size else ""
    own = 0 if found.own_prices is None else int(np.count_nonzero(found.own_prices > 0))
    windows = f" and {own} commodity windows" if own else ""
    detail = (f"max-concurrent flow of {demand.pair_src.size} pairs as {demand.num} per-{demand.by} "
              f"commodities{symmetric} (LP: {found.variables} variables, {found.rows} rows, "
              f"{lp.solver}, {lp.status}, T_LP = {format_time(found.lp_time)}); "
              f"certified by prices on {priced.size} links ({shown}{more}){windows}: fluid m/λ* = "
              f"{format_time(found.fluid)}, with each link's usable window {format_time(found.bound)}; "
              f"assumes {ASSUMPTIONS}")
    return Bound("mcf", found.bound, detail, found.exact)
