"""Routes from the flow LP: for every (source, destination) pair, the links its chunks may take.

Each modelled commodity's flow (``optcoll.bounds.mcf``) is first made acyclic (cycles carry
nothing to anyone) and split into paths, each ending at a destination with demand left (the
classic flow decomposition; what is left of the flow stays a flow for the demand left). A pair's
*route DAG* is the union of its paths plus every path that is both a shortest path by delay and a
cheapest one at the LP's link prices: those cost the LP nothing extra, and they let a scheduler
pick among equivalent ways (the order of a torus chunk's dimension hops) whichever link is free.
If adding them would close a cycle, the pair keeps its LP paths only. Demand the flow does not
cover (a first-order LP stops a little short) takes a shortest path by delay.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.bounds.commodities import simple_graph
from optcoll.bounds.mcf import FlowSolution
from optcoll.machines.machine import Machine

#: Flow below this fraction of the largest pair's bytes is solver noise.
NOISE = 1e-6
#: Relative slack when testing whether a path is shortest (float sums).
SLACK = 1e-9


@dataclass(frozen=True, eq=False)
class PairRoutes:
    """One pair's route DAG (``dag``) and the LP's paths for it: link lists in forward order,
    each with the bytes the flow sends along it."""

    dag: "Route"
    paths: list[tuple[list[int], float]]


@dataclass(frozen=True, eq=False)
class Route:
    """The links one pair's chunks may take: ``out[u]`` lists link ids leaving node u, and
    ``togo[u]`` is the least delay from u to the destination inside the route."""

    source: int
    dest: int
    out: dict[int, list[int]]
    togo: dict[int, float]


def _support(machine: Machine, flow: np.ndarray, floor: float) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for e in np.flatnonzero(flow > floor).tolist():
        out.setdefault(int(machine.link_src[e]), []).append(e)
    return out


def _cancel_cycles(machine: Machine, flow: np.ndarray, floor: float) -> None:
    """Removes every directed cycle of positive flow (in place), by depth-first search."""
    while True:
        out = _support(machine, flow, floor)
        state: dict[int, int] = {}  # 1 on the stack, 2 finished
        cycle = None
        for root in list(out):
            if cycle is not None:
                break
            if state.get(root):
                continue
            stack = [(root, iter(out.get(root, ())))]
            along: list[int] = []
            state[root] = 1
            while stack and cycle is None:
                u, links = stack[-1]
                e = next(links, None)
                if e is None:
                    state[u] = 2
                    stack.pop()
                    if along:
                        along.pop()
                    continue
                v = int(machine.link_dst[e])
                if state.get(v) == 1:
                    start = next(i for i, (w, _) in enumerate(stack) if w == v)
                    cycle = along[start:] + [e]
                elif not state.get(v):
                    state[v] = 1
                    along.append(e)
                    stack.append((v, iter(out.get(v, ()))))
        if cycle is None:
            return
        flow[cycle] -= flow[cycle].min()
        flow[flow <= floor] = 0.0


def _decompose(machine: Machine, flow: np.ndarray, source: int, demand: dict[int, float],
               floor: float) -> dict[int, list[tuple[list[int], float]]]:
    """Paths of the (acyclic) single-source ``flow`` to each destination of ``demand``, with
    the bytes each carries."""
    flow = flow.copy()
    left = dict(demand)
    paths: dict[int, list[tuple[list[int], float]]] = {}
    out = _support(machine, flow, floor)
    while any(amount > floor for amount in left.values()):
        u, path = source, []
        while u == source or left.get(u, 0.0) <= floor:
            links = [e for e in out.get(u, ()) if flow[e] > floor]
            if not links:
                return paths  # the flow ran out: callers route what is left by delay
            e = max(links, key=lambda link: (flow[link], -link))
            path.append(e)
            u = int(machine.link_dst[e])
        amount = min(float(flow[path].min()), left[u])
        flow[path] -= amount
        left[u] -= amount
        paths.setdefault(u, []).append((path, amount))
    return paths


def _on_shortest(dist_from: np.ndarray, weight: np.ndarray, dist_to: np.ndarray, machine: Machine,
                 total: float) -> np.ndarray:
    """Links (u, v) on some shortest path: from[u] + w + to[v] equals the shortest distance."""
    through = dist_from[machine.link_src] + weight + dist_to[machine.link_dst]
    return through <= total * (1 + SLACK) + 1e-300


def _through(machine: Machine, links: np.ndarray, start: int, end: int) -> set[int]:
    """The links of the mask ``links`` on some path from ``start`` to ``end`` inside it. (A link
    on a shortest path by delay and on a cheapest one by price may lead where no path is both.)"""
    import scipy.sparse as sp  # the LP-guided producer's graphs: loaded when it runs
    from scipy.sparse.csgraph import breadth_first_order

    ids = np.flatnonzero(links)
    src, dst = machine.link_src[ids], machine.link_dst[ids]
    graph = sp.csr_matrix((np.ones(ids.size), (src, dst)), shape=(machine.num_nodes,) * 2)
    ahead = breadth_first_order(graph, start, return_predecessors=False)
    behind = breadth_first_order(graph.T.tocsr(), end, return_predecessors=False)
    keep = np.isin(src, ahead) & np.isin(dst, behind)
    return set(ids[keep].tolist())


def _togo(out: dict[int, list[int]], dest: int, machine: Machine, delay: np.ndarray
          ) -> dict[int, float] | None:
    """Least delay to ``dest`` from every route node, or None if the route has a cycle."""
    nodes = set(out) | {int(machine.link_dst[e]) for links in out.values() for e in links}
    into: dict[int, list[int]] = {}
    pending = {u: len(out.get(u, ())) for u in nodes}
    for links in out.values():
        for e in links:
            into.setdefault(int(machine.link_dst[e]), []).append(e)
    togo = {u: np.inf for u in nodes}
    ready = [u for u, count in pending.items() if count == 0]
    done = 0
    while ready:
        v = ready.pop()
        done += 1
        togo[v] = 0.0 if v == dest else togo[v]
        for e in into.get(v, ()):
            u = int(machine.link_src[e])
            togo[u] = min(togo[u], float(delay[e]) + togo[v])
            pending[u] -= 1
            if pending[u] == 0:
                ready.append(u)
    return togo if done == len(nodes) else None


def routes(machine: Machine, solution: FlowSolution, flows: np.ndarray, delay: np.ndarray
           ) -> list[PairRoutes]:
    """Routes of every pair of the modelled commodities, in the commodities' pair order.

    ``flows`` are the modelled commodities' flows (``solution.flow`` or a tidier one at the same
    makespan); ``delay`` is per link, for the chunks to be scheduled (the smallest of them is
    fine: it only orders choices). Commodities by destination (a Gather) are decomposed on the
    reversed machine, where they flow out of their destination, and turned around. Parallel
    links are lanes: a route that takes one may take any.
    """
    from scipy.sparse.csgraph import dijkstra

    demand = solution.demand
    reverse = demand.by == "destination"
    oriented = machine.reversed() if reverse else machine
    floor = NOISE * float(demand.pair_bytes.max())
    graphs = [simple_graph(oriented, weight, reverse=back) for back in (False, True)
              for weight in (delay, solution.prices)]
    found: list[PairRoutes] = []
    for row, k in enumerate(solution.modelled.tolist()):
        origin = int(demand.origin[k])
        pairs = np.flatnonzero(demand.commodity == k)
        ends = (demand.pair_src if reverse else demand.pair_dst)[pairs]
        flow = np.where(flows[row] > floor, flows[row], 0.0)
        _cancel_cycles(oriented, flow, floor)
        paths = _decompose(oriented, flow, origin, dict(zip(ends.tolist(), demand.pair_bytes[pairs].tolist())),
                           floor)
        from_delay, from_priced = (dijkstra(graph, indices=origin) for graph in graphs[:2])
        to_delay, to_priced = (dijkstra(graph, indices=ends) for graph in graphs[2:])
        for i, (end, amount) in enumerate(zip(ends.tolist(), demand.pair_bytes[pairs].tolist())):
            shortest = _on_shortest(from_delay, delay, to_delay[i], oriented, from_delay[end])
            mine = paths.get(end) or [(_one_shortest(oriented, shortest, origin, end, from_delay), amount)]
            lp_links = {e for path, _ in mine for e in path}
            cheap = _on_shortest(from_priced, solution.prices, to_priced[i], oriented, from_priced[end])
            free = _through(oriented, shortest & cheap, origin, end)
            source, dest = (end, origin) if reverse else (origin, end)
            dag = next((r for r in (_route(machine, _lanes(machine, links), source, dest, delay)
                                    for links in (lp_links | free, lp_links)) if r is not None), None)
            if dag is None:
                raise AssertionError(f"no acyclic route from {source} to {dest}")
            forward = [(path[::-1] if reverse else path, amount) for path, amount in mine]
            found.append(PairRoutes(dag, forward))
    return found


def _one_shortest(machine: Machine, shortest: np.ndarray, start: int, end: int,
                  dist: np.ndarray) -> list[int]:
    """One shortest path start → end (links), walking back from ``end`` over ``shortest`` links."""
    path, v = [], end
    while v != start:
        into = np.flatnonzero(shortest & (machine.link_dst == v))
        e = int(into[np.argmin(dist[machine.link_src[into]])])
        path.append(e)
        v = int(machine.link_src[e])
    return path[::-1]


def _lanes(machine: Machine, links: set[int]) -> set[int]:
    """``links`` and every link parallel to one of them."""
    return {lane for e in links for lane in machine.links_between(machine.link_src[e], machine.link_dst[e])}


def path_route(machine: Machine, path: list[int], delay: np.ndarray) -> Route:
    """A route that is one path (any lane of each hop)."""
    out = {int(machine.link_src[e]): list(machine.links_between(machine.link_src[e], machine.link_dst[e]))
           for e in path}
    dest = int(machine.link_dst[path[-1]])
    togo, left = {}, 0.0
    for e in reversed(path):
        togo[int(machine.link_dst[e])] = left if int(machine.link_dst[e]) != dest else 0.0
        left += float(delay[e])
        togo[int(machine.link_src[e])] = left
    return Route(int(machine.link_src[path[0]]), dest, out, togo)


def _route(machine: Machine, links: set[int], source: int, dest: int, delay: np.ndarray) -> Route | None:
    """The route over ``links`` (forward orientation), or None if they close a cycle."""
    out: dict[int, list[int]] = {}
    for e in sorted(links):
        out.setdefault(int(machine.link_src[e]), []).append(e)
    togo = _togo(out, dest, machine, delay)
    if togo is None or togo.get(source, np.inf) == np.inf:
        return None
    return Route(source, dest, out, togo)
