"""The LP-guided producer ``mcf``: schedules for unicast collectives from the flow LP.

1. the multi-commodity-flow LP of ``optcoll.bounds.mcf`` (one source per symmetry orbit when
   the network and demand allow it), whose certified value is the bound the schedule is
   judged against;
2. three flows at the LP's optimal makespan (``optcoll.bounds.mcf``): the least link time
   (``tidy_flow``), and relaying over links with slack before or after the full links
   (``relay_flow``: NCCL's PXN is the first on a rail cluster);
   routes per (source, destination) pair from each flow (``routes``), in two plans: *adaptive*,
   each chunk free to take any link of its pair's route DAG that frees first, and *paths*, each
   chunk pinned to one of the LP's paths, chosen so that no resource is loaded past its share
   of the LP's makespan more than it must (chunks are whole, the LP's split is not);
3. event-driven list scheduling of every chunk (``scheduler``): when a symmetry group has only
   free link orbits, only the representatives' chunks are scheduled, with each link orbit as one
   resource, and the result is copied to every source (``expand``);
4. every plan, with and without look-ahead, over a few seeded tie-breaks, until one meets the
   certified bound; the fastest is returned (the shared verifier checks it, as every
   producer's output). The variants depend only on the instance, so the result is
   reproducible from the instance and the seed.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from optcoll.bounds.mcf import FlowSolution, FlowTooLarge, relay_flow, solve_flow, tidy_flow
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines.automorphisms import SymmetryGroup, semiregular_group, trivial_group
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.flow.expand import ChunkImages, expand_routes, expand_transfers
from optcoll.producers.flow.routes import PairRoutes, Route, path_route, routes
from optcoll.producers.flow.scheduler import Chunks, Timed, schedule
from optcoll.schedules.schedule import Schedule, from_arrays

#: Look-ahead of the variants that use it: how many equally urgent chunks a free resource
#: compares by the load waiting for their next link (``scheduler``).
LOOKAHEAD = 8
#: Variants tried, fewer when the schedule to search is large (transfers scheduled per variant,
#: before copying by symmetry): the total stays near ``VARIANT_WORK`` transfers.
MAX_VARIANTS = 24
VARIANT_WORK = 600_000
#: A schedule within this relative slack of the certified bound meets it.
MEETS = 1e-9


#: The collectives the producer implements ("custom": point-to-point patterns).
KINDS = frozenset({"alltoall", "alltoallv", "scatter", "gather", "custom"})


def _applicable(instance: Instance) -> FlowSolution:
    model, kind = instance.model, instance.collective.kind
    if kind not in KINDS:
        raise NotApplicable(f"mcf does not implement {kind}; it implements {', '.join(sorted(KINDS))}")
    if model.kind != "timed":
        raise NotApplicable(f"mcf produces timed schedules; the instance asks for the {model.kind} model")
    if model.send_ports is not None or model.recv_ports is not None:
        raise NotApplicable("mcf does not schedule under port limits (send_ports/recv_ports)")
    try:
        solution = solve_flow(instance.machine, instance.collective, model)
    except FlowTooLarge as error:
        raise NotApplicable(f"mcf: {error.detail}") from None
    if solution is None:
        raise NotApplicable(f"mcf needs a unicast collective (every chunk that moves has one holder "
                            f"and one destination); {instance.collective.kind} is not one")
    return solution


#: The flows plans are made from, in the order they are tried (module docstring, step 2).
FLOWS = ("tidy", "relay-early", "relay-late")
#: Plans per flow: adaptive, then paths.
PLANS_PER_FLOW = 2


@dataclass(frozen=True, eq=False)
class FlowPlans:
    """One flow's plans, each (name, routes, each chunk's route, seconds of work per resource),
    for the chunks ``mine`` (those with a pair route) of the pairs ``pairs``."""

    plans: tuple[tuple[str, list[Route], np.ndarray, np.ndarray], ...]
    mine: np.ndarray
    pairs: list[PairRoutes]


def _flow(solution: FlowSolution, machine: Machine, name: str) -> np.ndarray | None:
    if name == "tidy":
        return tidy_flow(solution)
    return relay_flow(solution, machine, "source" if name == "relay-early" else "destination")


def flow_schedule(instance: Instance, seed: int = 0) -> Schedule:
    """The best of the LP-guided list schedules (module docstring). A flow's plans are built
    when a variant first needs them, so a schedule that meets the bound early costs no more
    LP re-solves."""
    machine, collective, model = instance.machine, instance.collective, instance.model
    solution = _applicable(instance)
    group = solution.group
    delay = model.link_timing(machine, solution.demand.smallest).delay
    copy = group.order > 1 and group.links_free
    scheduled = group if copy else trivial_group(machine)
    chunk, need = collective.needs
    source = collective.pre.nodes[collective.pre.indptr[chunk]]
    alike = group if group.order > 1 else _machine_group(machine, collective)
    resource = scheduled.link_orbit
    resource_rank = _resource_rank(alike, resource, _link_load(solution))
    lp_backlog = np.bincount(resource, weights=_link_load(solution), minlength=int(resource.max()) + 1)
    built: dict[str, FlowPlans | None] = {}

    def plans_of(name: str) -> FlowPlans | None:
        if name not in built:
            flow = _flow(solution, machine, name)
            built[name] = None
            if flow is not None:
                pairs = routes(machine, solution, flow, delay)
                if group.order > 1 and not copy:
                    pairs = expand_routes(group, pairs)
                index = {(p.dag.source, p.dag.dest): i for i, p in enumerate(pairs)}
                pair_of = np.array([index.get(key, -1) for key in zip(source.tolist(), need.tolist())],
                                   dtype=np.int64)
                mine = pair_of >= 0
                pinned, pinned_backlog = _pin(machine, model, solution, pairs, pair_of[mine], sizes[mine], resource)
                built[name] = FlowPlans(((f"{name} adaptive", [p.dag for p in pairs], pair_of[mine], lp_backlog),
                                         (f"{name} paths", *pinned, pinned_backlog)), mine, pairs)
        return built[name]

    sizes = collective.sizes()[chunk]
    first = plans_of(FLOWS[0])
    assert first is not None
    mine, pairs = first.mine, first.pairs
    tie = _pair_types(alike, chunk[mine], source[mine], need[mine])
    hops = sum(len(p.dag.togo) for p in pairs) / max(len(pairs), 1)
    plan_count = len(FLOWS) * PLANS_PER_FLOW
    budget = int(max(plan_count, min(MAX_VARIANTS, VARIANT_WORK // max(1.0, mine.sum() * hops))))
    tries = itertools.islice(itertools.product(range(budget), (False, True), (0, LOOKAHEAD), range(plan_count)),
                             budget)
    best: tuple[Timed, str, bool, int] | None = None
    ran = 0
    for k, hot_first, look, p in tries:
        flow_plans = plans_of(FLOWS[p // PLANS_PER_FLOW])
        if flow_plans is None:
            continue
        name, plan_routes, chunk_route, backlog = flow_plans.plans[p % PLANS_PER_FLOW]
        ran += 1
        found = schedule(machine, model, plan_routes, Chunks(chunk[mine], chunk_route, sizes[mine], tie),
                         resource, resource_rank, seed=seed * MAX_VARIANTS + k, lookahead=look,
                         backlog=backlog if hot_first else None)
        if best is None or found.makespan < best[0].makespan:
            best = (found, name, hot_first, look)
        if found.makespan <= solution.bound * (1 + MEETS):
            break  # meets the certified bound: no variant can do better
    assert best is not None
    timed, plan, hot_first, look = best
    c, e, t = timed.chunk, timed.link, timed.start
    if copy:
        c, e, t = expand_transfers(group, ChunkImages(chunk, source, need, machine.num_nodes), c, e, t)
    return from_arrays(c, e, t, lp_bound=solution.bound, symmetry=scheduled.order, plan=plan,
                       hot_first=hot_first, lookahead=look, variants=ran)


def _machine_group(machine: Machine, collective: Collective) -> SymmetryGroup:
    """The machine's symmetries that keep the communicator, for coordinated tie-breaking."""
    members = np.zeros(machine.num_nodes, dtype=np.int64)
    members[list(collective.ranks)] = 1
    return semiregular_group(machine, members)


def _pair_types(group: SymmetryGroup, chunk: np.ndarray, source: np.ndarray, dest: np.ndarray) -> np.ndarray:
    """Tie-break keys that equal for chunks whose pairs a symmetry maps onto each other (then
    equally urgent chunks are chosen alike everywhere, as in a copied schedule): the source's
    orbit, the destination seen from the orbit's representative, the chunk's piece number."""
    if group.order == 1:
        return np.zeros(chunk.size, dtype=np.int64)
    inverse = np.argsort(group.node, axis=1)
    seen_from = inverse[group.carrier[source], dest]
    kind = group.npu_orbit[source] * group.node.shape[1] + seen_from
    order = np.lexsort((chunk, kind))
    first = np.concatenate([[True], kind[order][1:] != kind[order][:-1]])
    piece = np.arange(chunk.size) - np.maximum.accumulate(np.where(first, np.arange(chunk.size), 0))
    key = np.empty(chunk.size, dtype=np.int64)
    key[order] = kind[order] * (int(piece.max(initial=0)) + 1) + piece
    return key


def _resource_rank(group: SymmetryGroup, resource: np.ndarray, load: np.ndarray) -> np.ndarray:
    """Resources by the LP load of their links' orbit (heaviest first), then orbit, then id:
    the same order wherever the network looks the same."""
    orbit_load = np.bincount(group.link_orbit, weights=load)[group.link_orbit]
    per_resource = np.zeros(int(resource.max()) + 1)
    orbit_of = np.zeros(per_resource.size, dtype=np.int64)
    np.maximum.at(per_resource, resource, orbit_load)
    np.maximum.at(orbit_of, resource, group.link_orbit)
    order = np.lexsort((np.arange(per_resource.size), orbit_of, -per_resource))
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank


def _link_load(solution: FlowSolution) -> np.ndarray:
    """Seconds of link time the LP's flow puts on every link (representatives only)."""
    load = np.zeros(solution.flow.shape[1])
    for row, k in enumerate(solution.modelled.tolist()):
        load += solution.flow[row] * solution.windows.cost(float(solution.demand.largest[k]))
    return np.nan_to_num(load, posinf=0.0)


def _pin(machine: Machine, model: TimeModel, solution: FlowSolution, pairs: list[PairRoutes],
         pair_of: np.ndarray, sizes: np.ndarray, resource: np.ndarray
         ) -> tuple[tuple[list[Route], np.ndarray], np.ndarray]:
    """One LP path per chunk: largest chunks first, each on the path of its pair whose most
    loaded resource ends least loaded relative to its window in the LP's makespan (ties: the
    path with the most LP bytes not yet given to a chunk). Returns the routes, each chunk's
    route, and the seconds of work each resource got."""
    usable = np.isfinite(solution.windows.lost)
    window = np.full(int(resource.max()) + 1, np.inf)
    np.minimum.at(window, resource[usable], solution.lp_time - solution.windows.lost[usable])
    window = np.maximum(window, 1e-300)
    load = np.zeros(window.size)
    left = [[amount for _, amount in p.paths] for p in pairs]
    made: dict[tuple[int, int], int] = {}
    plan_routes: list[Route] = []
    chunk_route = np.empty(pair_of.size, dtype=np.int64)
    delay = model.link_timing(machine, solution.demand.smallest).delay
    for i in np.lexsort((pair_of, -sizes)).tolist():
        p, b = int(pair_of[i]), float(sizes[i])
        options = pairs[p].paths
        costs = []
        for j, (lp_path, _) in enumerate(options):
            path = [min(machine.links_between(machine.link_src[e], machine.link_dst[e]),
                        key=lambda lane: load[resource[lane]]) for e in lp_path]
            busy = model.link_timing(machine, b, links=np.asarray(path)).busy
            costs.append((float(np.max((load[resource[path]] + busy) / window[resource[path]])),
                          -left[p][j], j, busy, path))
        _, _, j, busy, path = min(costs, key=lambda item: item[:3])
        np.add.at(load, resource[path], busy)
        left[p][j] -= b
        if (p, j) not in made:
            made[(p, j)] = len(plan_routes)
            plan_routes.append(path_route(machine, options[j][0], delay))
        chunk_route[i] = made[(p, j)]
    return (plan_routes, chunk_route), load
