"""The machine model: a directed multigraph of NPUs (ranks 0..N-1) and switches (N..).

Links are stored as parallel numpy arrays (structure of arrays) so the verifier, the bounds and
the solvers can work on thousands of links without Python loops. A bidirectional cable is two
links; parallel links between one pair (DGX-1's double NVLinks) are separate links.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from optcoll import limits
from optcoll.errors import InputError

if TYPE_CHECKING:
    import networkx as nx

#: Largest network whose hop counts are found by the bit-parallel search (``Machine.hop_counts``).
BITSET_BFS_NODES = 256


@dataclass(frozen=True)
class Switch:
    """A forwarding node: holds no buffer of its own in pre/postconditions.

    ``multicast``: may send what it received on several links (NVLS-like); otherwise each arrival
    is forwarded at most once. ``reduce``: may combine partials (SHARP-like in-network reduction).
    """

    label: str
    multicast: bool = False
    reduce: bool = False


@dataclass(frozen=True)
class Link:
    """One directed link, a view of one row of the machine's link arrays."""

    id: int
    src: int
    dst: int
    latency: float  # seconds
    bandwidth: float  # bytes / second


@dataclass(frozen=True, eq=False)
class Machine:
    """An immutable network. Build one with ``MachineBuilder`` or a generator."""

    name: str
    num_npus: int
    switches: tuple[Switch, ...]
    link_src: np.ndarray
    link_dst: np.ndarray
    link_latency: np.ndarray
    link_bandwidth: np.ndarray
    npu_labels: tuple[str, ...]
    description: str = ""
    #: Optional drawing coordinates per node (generators know a natural layout).
    positions: tuple[tuple[float, float], ...] | None = field(default=None, repr=False)
    #: Where numbers not given as plain values came from (e.g. an NCCL latency preset), one
    #: sentence each, for ``instance show`` and ``model show``.
    sources: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        for name in ("link_src", "link_dst", "link_latency", "link_bandwidth"):
            getattr(self, name).setflags(write=False)

    # -- sizes -------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return self.num_npus + len(self.switches)

    @property
    def num_links(self) -> int:
        return int(self.link_src.shape[0])

    @property
    def npus(self) -> range:
        return range(self.num_npus)

    def is_switch(self, node: int) -> bool:
        return node >= self.num_npus

    def switch(self, node: int) -> Switch:
        return self.switches[node - self.num_npus]

    def label(self, node: int) -> str:
        return self.npu_labels[node] if node < self.num_npus else self.switch(node).label

    @cached_property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.label(v) for v in range(self.num_nodes))

    # -- links -------------------------------------------------------------------------------
    def link(self, link_id: int) -> Link:
        e = int(link_id)
        return Link(e, int(self.link_src[e]), int(self.link_dst[e]),
                    float(self.link_latency[e]), float(self.link_bandwidth[e]))

    def links(self) -> list[Link]:
        return [self.link(e) for e in range(self.num_links)]

    @cached_property
    def _pair_index(self) -> dict[tuple[int, int], tuple[int, ...]]:
        index: dict[tuple[int, int], list[int]] = {}
        for e, (u, v) in enumerate(zip(self.link_src.tolist(), self.link_dst.tolist())):
            index.setdefault((u, v), []).append(e)
        return {pair: tuple(ids) for pair, ids in index.items()}

    def links_between(self, src: int, dst: int) -> tuple[int, ...]:
        """Ids of every link src→dst (several when links are parallel), in id order."""
        return self._pair_index.get((int(src), int(dst)), ())

    @cached_property
    def out_links(self) -> tuple[np.ndarray, ...]:
        order = np.argsort(self.link_src, kind="stable")
        bounds = np.searchsorted(self.link_src[order], np.arange(self.num_nodes + 1))
        return tuple(order[bounds[v]:bounds[v + 1]] for v in range(self.num_nodes))

    @cached_property
    def in_links(self) -> tuple[np.ndarray, ...]:
        order = np.argsort(self.link_dst, kind="stable")
        bounds = np.searchsorted(self.link_dst[order], np.arange(self.num_nodes + 1))
        return tuple(order[bounds[v]:bounds[v + 1]] for v in range(self.num_nodes))

    # -- graph views -------------------------------------------------------------------------
    def to_networkx(self) -> "nx.MultiDiGraph":
        """A MultiDiGraph whose edges carry ``id``, ``latency`` and ``bandwidth``."""
        import networkx as nx  # loaded by the graph views only: a plain solve does not need it

        graph = nx.MultiDiGraph(name=self.name)
        for v in range(self.num_nodes):
            graph.add_node(v, label=self.label(v), switch=self.is_switch(v))
        for link in self.links():
            graph.add_edge(link.src, link.dst, key=link.id, id=link.id,
                           latency=link.latency, bandwidth=link.bandwidth)
        return graph

    def hop_counts(self) -> np.ndarray:
        """All-pairs hop count (inf if unreachable): ``[s, v]`` is the fewest links from s to v.

        Up to ``BITSET_BFS_NODES`` nodes: a breadth-first search from every source at once, one
        level per pass, the sources packed 64 to a word (the sources reaching v at the next level
        are those reaching one of v's in-neighbours now). Numpy only: a small solve need not load
        scipy's graph routines, which take longer to import (0.06-0.2 s) than this search takes
        on 256 nodes (0.02 s). Its passes cost E·N/64 words per level, so on larger, deeper
        networks scipy's one search per source is the faster (ring of 1024: 0.02 s against 0.4 s).
        """
        if self.num_nodes > BITSET_BFS_NODES:
            from scipy.sparse import csr_matrix
            from scipy.sparse.csgraph import shortest_path

            graph = csr_matrix((np.ones(self.num_links), (self.link_src, self.link_dst)),
                               shape=(self.num_nodes, self.num_nodes))
            graph.data[:] = 1.0  # parallel links were summed; a hop is a hop
            return shortest_path(graph, method="D", directed=True, unweighted=True)
        n = self.num_nodes
        words = -(-n // 64)
        order = np.argsort(self.link_dst, kind="stable")
        src, dst = self.link_src[order], self.link_dst[order]
        heads, starts = np.unique(dst, return_index=True)
        nodes = np.arange(n)
        frontier = np.zeros((n, words), dtype="<u8")  # bit s of row v: s reaches v now
        frontier[nodes, nodes // 64] = np.uint64(1) << (nodes % 64).astype(np.uint64)
        reached = frontier.copy()
        hops = np.full((n, n), np.inf)
        np.fill_diagonal(hops, 0.0)
        level = 0
        while heads.size:
            level += 1
            arriving = np.zeros_like(frontier)
            arriving[heads] = np.bitwise_or.reduceat(frontier[src], starts, axis=0)
            frontier = arriving & ~reached
            rows, cols = np.nonzero(frontier)
            if rows.size == 0:
                break
            reached |= frontier
            bits = np.unpackbits(frontier[rows, cols].view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
            hit, bit = np.nonzero(bits)
            hops[cols[hit] * 64 + bit, rows[hit]] = level
        return hops

    # -- derived machines --------------------------------------------------------------------
    def reversed(self) -> "Machine":
        """Every link turned around: the graph on which combining collectives are dual."""
        return Machine(self.name + "~reversed", self.num_npus, self.switches,
                       self.link_dst.copy(), self.link_src.copy(), self.link_latency.copy(),
                       self.link_bandwidth.copy(), self.npu_labels, self.description, self.positions,
                       self.sources)

    def without(self, *, links: list[int] | None = None, npus: list[int] | None = None,
                name: str | None = None) -> "Machine":
        """The machine with failed links (by id) and failed NPUs removed.

        NPUs are renumbered densely (a surviving communicator's ranks are 0..N'-1); the original
        names survive in the labels.
        """
        drop_links = set(int(e) for e in (links or ()))
        drop_npus = set(int(v) for v in (npus or ()))
        for e in drop_links:
            if not 0 <= e < self.num_links:
                raise InputError(f"failed link {e} does not exist (the machine has {self.num_links} links)")
        for v in drop_npus:
            if not 0 <= v < self.num_npus:
                raise InputError(f"failed NPU {v} does not exist (the machine has {self.num_npus} NPUs)")
        if len(drop_npus) == self.num_npus:
            raise InputError(f"all {self.num_npus} NPUs failed: a machine needs at least one NPU")
        keep_nodes = [v for v in range(self.num_nodes) if v not in drop_npus]
        renumber = {old: new for new, old in enumerate(keep_nodes)}
        keep = [e for e in range(self.num_links) if e not in drop_links
                and int(self.link_src[e]) in renumber and int(self.link_dst[e]) in renumber]
        keep_arr = np.array(keep, dtype=np.int64)
        src = np.array([renumber[int(u)] for u in self.link_src[keep_arr]], dtype=np.int64)
        dst = np.array([renumber[int(v)] for v in self.link_dst[keep_arr]], dtype=np.int64)
        positions = tuple(self.positions[v] for v in keep_nodes) if self.positions else None
        return Machine(name or self.name, self.num_npus - len(drop_npus), self.switches,
                       src, dst, self.link_latency[keep_arr].copy(),
                       self.link_bandwidth[keep_arr].copy(),
                       tuple(self.npu_labels[v] for v in keep_nodes if v < self.num_npus),
                       self.description, positions, self.sources)

    def renamed(self, name: str, description: str | None = None) -> "Machine":
        return Machine(name, self.num_npus, self.switches, self.link_src, self.link_dst,
                       self.link_latency, self.link_bandwidth, self.npu_labels,
                       self.description if description is None else description, self.positions,
                       self.sources)

    def with_sources(self, *sources: str) -> "Machine":
        """The same machine with ``sources`` added to where its numbers came from."""
        return dataclasses.replace(self, sources=self.sources + tuple(sources))


def check_size(nodes: int, links: int) -> None:
    """``InputError`` when a machine about to be built exceeds the ``nodes``/``links`` caps
    (``optcoll.limits``): far beyond what optcoll can analyse, low enough that a typo
    (npus = 80000000000, a hypercube of dimension 40, count = 10**12) is refused before building
    the machine exhausts memory; a command may narrow them to its own budget (``model show``)."""
    for what, count in (("nodes", nodes), ("links", links)):
        limits.check(what, count, f"{count} {what}", "optcoll can model")


class MachineBuilder:
    """Accumulates NPUs, switches and links, then freezes them into a ``Machine``.

    Switches may be added at any time; they are numbered after all NPUs when built.
    """

    def __init__(self, name: str, num_npus: int, description: str = "",
                 npu_labels: list[str] | None = None):
        if num_npus < 1:
            raise InputError(f"a machine needs at least one NPU, got {num_npus}")
        check_size(num_npus, 0)
        self.name = name
        self.num_npus = num_npus
        self.description = description
        self.npu_labels = list(npu_labels) if npu_labels else [f"npu{i}" for i in range(num_npus)]
        self._switches: list[Switch] = []
        self._links: list[tuple[str | int, str | int, float, float]] = []
        self.positions: dict[int | str, tuple[float, float]] = {}

    def add_switch(self, label: str, *, multicast: bool = False, reduce: bool = False) -> str:
        """Adds a switch and returns its handle (its label) for ``add_link``."""
        if any(s.label == label for s in self._switches):
            raise InputError(f"duplicate switch name {label!r}")
        self._switches.append(Switch(label, multicast, reduce))
        return label

    def add_link(self, src: int | str, dst: int | str, *, bandwidth: float, latency: float,
                 count: int = 1, bidirectional: bool = False) -> None:
        """Adds ``count`` parallel links src→dst (and dst→src when bidirectional).

        NPUs are named by index, switches by the handle ``add_switch`` returned.
        """
        if not bandwidth > 0 or not np.isfinite(bandwidth):
            raise InputError(f"link {src}->{dst}: bandwidth must be positive and finite, got {bandwidth}")
        if not latency >= 0 or not np.isfinite(latency):
            raise InputError(f"link {src}->{dst}: latency must be non-negative and finite, got {latency}")
        if count < 1:
            raise InputError(f"link {src}->{dst}: count must be at least 1, got {count}")
        if src == dst:
            raise InputError(f"link {src}->{dst} is a self-loop")
        check_size(self.num_npus + len(self._switches), len(self._links) + count * (1 + bidirectional))
        for _ in range(count):
            self._links.append((src, dst, latency, bandwidth))
            if bidirectional:
                self._links.append((dst, src, latency, bandwidth))

    def _node_id(self, handle: int | str, switch_ids: dict[str, int]) -> int:
        if isinstance(handle, str):
            if handle not in switch_ids:
                raise InputError(f"link names unknown switch {handle!r}")
            return switch_ids[handle]
        if not 0 <= int(handle) < self.num_npus:
            raise InputError(f"link names NPU {handle}, but NPUs are 0..{self.num_npus - 1}")
        return int(handle)

    def build(self) -> Machine:
        switch_ids = {s.label: self.num_npus + i for i, s in enumerate(self._switches)}
        rows = [(self._node_id(u, switch_ids), self._node_id(v, switch_ids), lat, bw)
                for u, v, lat, bw in self._links]
        src, dst, lat, bw = (np.array(col) for col in zip(*rows)) if rows else (np.zeros(0),) * 4
        positions = None
        if self.positions:
            ids = {**{i: i for i in range(self.num_npus)}, **switch_ids}
            by_id = {ids[h]: xy for h, xy in self.positions.items()}
            if len(by_id) == self.num_npus + len(self._switches):
                positions = tuple(by_id[v] for v in range(len(by_id)))
        return Machine(self.name, self.num_npus, tuple(self._switches),
                       src.astype(np.int64), dst.astype(np.int64), lat.astype(float),
                       bw.astype(float), tuple(self.npu_labels), self.description, positions)
