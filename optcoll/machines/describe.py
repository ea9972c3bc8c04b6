"""What a person wants to know about a machine before trusting numbers computed on it.

``describe_machine`` returns a JSON-ready dict (bandwidths in B/s, times in s) and
``render_description`` renders it; both are what ``optcoll model show`` prints. The diameter and
the worst cut are computed only within the ``show_search`` and ``show_cut`` caps
(``optcoll.limits``): beyond them ``not_computed`` says which figure was left out and why.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, shortest_path

from optcoll import limits
from optcoll.machines.machine import Machine
from optcoll.units import bandwidth_text, format_time


def _adjacency(machine: Machine) -> csr_matrix:
    n = machine.num_nodes
    graph = csr_matrix((np.ones(machine.num_links), (machine.link_src, machine.link_dst)), shape=(n, n))
    graph.data[:] = 1.0  # parallel links were summed; a hop is a hop
    return graph


def strongly_connected_among(machine: Machine, nodes: Iterable[int]) -> bool:
    """True when every node of ``nodes`` reaches every other one (relaying through any node)."""
    members = np.unique(np.fromiter((int(v) for v in nodes), dtype=np.int64))
    if members.size <= 1:
        return True
    graph = _adjacency(machine)
    for g in (graph, graph.T.tocsr()):
        reached = np.zeros(machine.num_nodes, dtype=bool)
        reached[breadth_first_order(g, int(members[0]), directed=True, return_predecessors=False)] = True
        if not reached[members].all():
            return False
    return True


def npu_diameter(machine: Machine, block: int = 256) -> float:
    """Largest hop count from an NPU to another NPU (relaying anywhere); inf if one is unreachable.

    Runs breadth-first searches a block of sources at a time so memory stays block × nodes.
    """
    graph, n = _adjacency(machine), machine.num_npus
    worst = 0.0
    for start in range(0, n, block):
        hops = shortest_path(graph, directed=True, unweighted=True,
                             indices=np.arange(start, min(start + block, n)))[:, :n]
        worst = max(worst, float(hops.max()))
    return worst


def _range(values: np.ndarray) -> list[float] | None:
    return [float(values.min()), float(values.max())] if values.size else None


def describe_machine(machine: Machine, *, cut_finder: Callable[[Machine, list[int]], Any] | None = None
                     ) -> dict[str, Any]:
    """Counts, degree and bandwidth ranges, NPU diameter, connectivity and, given a ``cut_finder``
    (``optcoll.bounds.cuts.worst_cut``: bounds build on machines, so the caller hands it in), the
    worst cut.

    The worst cut is max over node sets S holding some but not all NPUs of |S ∩ NPUs| / B⁺(S)
    (seconds per byte): an AllGather of M bytes takes at least (M / N) times it (ForestColl).
    """
    n, nodes = machine.num_npus, machine.num_nodes
    src, dst, bw = machine.link_src, machine.link_dst, machine.link_bandwidth
    pairs = Counter(zip(src.tolist(), dst.tolist()))
    skipped = {}  # figure -> why it was not computed (over its cap in optcoll.limits)
    connected = strongly_connected_among(machine, range(n))
    search, flows = n * (nodes + machine.num_links), n * machine.num_links
    diameter = None
    if not connected:
        pass
    elif limits.within("show_search", search):
        diameter = npu_diameter(machine)
    else:
        skipped["npu_diameter_hops"] = limits.refusal(
            "show_search", f"{search} NPU x (node + link) search steps", "`model show` computes").detail
    info: dict[str, Any] = {
        "name": machine.name,
        "description": machine.description,
        "units": {"bandwidth": "B/s", "time": "s"},
        "npus": n,
        "switches": [{"name": s.label, "multicast": s.multicast, "reduce": s.reduce}
                     for s in machine.switches],
        "links": machine.num_links,
        "bidirectional_pairs": sum(1 for u, v in pairs if u < v and (v, u) in pairs),
        "parallel_pairs": sum(1 for count in pairs.values() if count > 1),
        "max_parallel_links": max(pairs.values(), default=0),
        "npu_in_degree": _range(np.bincount(dst, minlength=nodes)[:n]),
        "npu_out_degree": _range(np.bincount(src, minlength=nodes)[:n]),
        "link_bandwidth": _range(bw),
        "link_latency": _range(machine.link_latency),
        "npu_diameter_hops": int(diameter) if diameter is not None else None,
        "strongly_connected": connected,
        "min_npu_ingress_bandwidth": float(np.bincount(dst, weights=bw, minlength=nodes)[:n].min()),
        "min_npu_egress_bandwidth": float(np.bincount(src, weights=bw, minlength=nodes)[:n].min()),
        "worst_cut": None,
        "sources": list(machine.sources),
        "not_computed": skipped,
    }
    if cut_finder is not None and connected and n >= 2 and not limits.within("show_cut", flows):
        skipped["worst_cut"] = limits.refusal("show_cut", f"{flows} NPU x link max-flow steps",
                                              "`model show` computes").detail
    elif cut_finder is not None and connected and n >= 2:
        result = cut_finder(machine, list(machine.npus))
        inside = sorted(int(v) for v in result.inside)
        info["worst_cut"] = {
            "ratio": float(result.ratio),
            "npus_inside": sum(1 for v in inside if v < n),
            "inside": [machine.label(v) for v in inside],
            "bandwidth_out": float(result.bandwidth_out),
            "exact": bool(result.exact),
            "allgather_bandwidth_bound": n / float(result.ratio),
        }
    return info


_FIGURES = {"npu_diameter_hops": "diameter", "worst_cut": "worst cut"}


def _span(values: list[float] | None, fmt) -> str:
    if values is None:
        return "none"
    low, high = values
    return fmt(low) if low == high else f"{fmt(low)} .. {fmt(high)}"


def render_description(info: dict[str, Any]) -> str:
    """The ``describe_machine`` dict as a few lines of text."""
    def count(v: list[float] | None) -> str:
        return _span(v, lambda x: f"{x:g}")

    switches = info["switches"]
    flagged = [f"{s['name']} ({', '.join(k for k in ('multicast', 'reduce') if s[k])})"
               for s in switches if s["multicast"] or s["reduce"]]
    if len(flagged) > 3:
        flagged = flagged[:2] + [f"... {len(flagged) - 2} more"]
    def plural(k: int, word: str, suffix: str = "s") -> str:
        return f"{k} {word}{suffix if k != 1 else ''}"

    lines = [
        f"{info['name']}: {info['description']}" if info["description"] else info["name"],
        f"  {plural(info['npus'], 'NPU')}, {plural(len(switches), 'switch', 'es')}"
        + (f" (with in-network features: {'; '.join(flagged)})" if flagged else ""),
        f"  {info['links']} directed links: {info['bidirectional_pairs']} node pairs linked both ways, "
        f"{info['parallel_pairs']} ordered pairs with parallel links (up to {info['max_parallel_links']})",
        f"  NPU in-degree {count(info['npu_in_degree'])}, out-degree {count(info['npu_out_degree'])}",
        f"  link bandwidth {_span(info['link_bandwidth'], bandwidth_text)}, "
        f"latency {_span(info['link_latency'], format_time)}",
        ("  NPUs strongly connected, diameter " + (f"{plural(info['npu_diameter_hops'], 'hop')}"
                                                    if info["npu_diameter_hops"] is not None else "not computed"))
        if info["strongly_connected"] else "  NPUs NOT strongly connected: some NPU cannot reach another",
        f"  per-NPU bandwidth at least {bandwidth_text(info['min_npu_ingress_bandwidth'])} in, "
        f"{bandwidth_text(info['min_npu_egress_bandwidth'])} out",
    ]
    cut = info.get("worst_cut")
    if cut:
        lines.append(
            f"  worst cut: {cut['npus_inside']} of {info['npus']} NPUs inside, "
            f"{bandwidth_text(cut['bandwidth_out'])} leaving; an AllGather of M bytes takes at least "
            f"M / ({bandwidth_text(cut['allgather_bandwidth_bound'])})")
    lines += [f"  {source}" for source in info.get("sources", ())]
    for figure, why in info.get("not_computed", {}).items():
        lines.append(f"  {_FIGURES[figure]} not computed: {why}")
    return "\n".join(lines)
