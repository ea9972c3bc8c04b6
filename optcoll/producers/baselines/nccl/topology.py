"""The machine as NCCL's topology search sees it: nodes, NIC rails, NVSwitch fabrics, channels.

NCCL (2.30.7, ``src/graph/search.cc``, ``connect.cc``) builds every algorithm from *channels*.
This module models what its search picks, from the machine's links alone:

* **Nodes.** NCCL groups ranks by host. Here a *network switch* is a switch whose removal splits
  the communicator into at least two parts that each hold at least two members (the spine of
  ``multinode``); the parts are the nodes, in order of their smallest member. A rail fabric has no
  such switch (each rail's leaf and the spine join the nodes together): there the nodes are the
  parts left once the slowest NPU-to-switch links (the NICs) are dropped, and every GPU with such
  a link is a rail. Without either, the whole communicator is one node. (A star of single-GPU
  servers is therefore read as one NVSwitch node: the two are the same graph.)
* **Rails.** A node's members that reach the network switch directly or through their own NIC
  switch, one rail per NIC, in order of the NIC's first GPU. NCCL's ring search starts channel c
  at NIC c mod #NICs and enters the node at that NIC's local GPU (``ncclTopoSearchRecNet``).
* **Fabric.** A switch inside a node linked to every member of it (the NVSwitch); NVLS needs it
  to multicast and reduce.
* **Channels of one node with direct links** (NVLink meshes such as DGX-1): the search packs
  as many directed Hamiltonian rings as the links carry, each link one ring per direction per
  parallel link (``ncclTopoFollowPath`` charges the ring's bandwidth on every link it crosses).
  Modelled as edge-disjoint undirected rings used both ways (``rings.disjoint_rings``), then more
  directed rings searched in the capacity left (double NVLinks).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from optcoll.machines.machine import Machine
from optcoll.producers.baselines.rings import disjoint_rings, ring_order, search_cycle


@dataclass(frozen=True, eq=False)
class NcclTopology:
    """NCCL's view of a communicator on a machine (module docstring)."""

    machine: Machine
    members: tuple[int, ...]
    nodes: tuple[tuple[int, ...], ...]
    rails: tuple[tuple[int, ...], ...]
    network: int | None
    fabrics: tuple[int | None, ...]

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_rails(self) -> int:
        """Rails every node has (NCCL builds one inter-node channel per NIC)."""
        return min((len(r) for r in self.rails), default=0)

    def node_of(self, rank: int) -> int:
        return next(i for i, node in enumerate(self.nodes) if rank in node)

    def chain(self, node: int, rail: int) -> list[int]:
        """The node's members in its physical ring order, starting at rail ``rail``'s GPU
        (the GPU local to the NIC a channel enters through)."""
        order = self.intra_orders[node]
        start = self.rails[node][rail % len(self.rails[node])] if self.rails[node] else order[0]
        i = order.index(start)
        return order[i:] + order[:i]

    @cached_property
    def intra_orders(self) -> tuple[list[int], ...]:
        return tuple(ring_order(self.machine, list(node)) for node in self.nodes)

    @cached_property
    def channels(self) -> tuple[tuple[int, ...], ...]:
        """NCCL's ring channels: directed rings over every member (module docstring)."""
        if self.num_nodes > 1:
            return tuple(tuple(v for n in range(self.num_nodes) for v in self.chain(n, r))
                         for r in range(max(self.num_rails, 1)))
        return tuple(tuple(ring) for ring in directed_rings(self.machine, list(self.members)))


def _components(machine: Machine, keep: np.ndarray) -> np.ndarray:
    """Component label of every node over the links ``keep`` selects (links as undirected)."""
    from scipy.sparse import csr_matrix  # scipy's graph routines: only when NCCL's topology is read
    from scipy.sparse.csgraph import connected_components

    n = machine.num_nodes
    graph = csr_matrix((np.ones(int(keep.sum())), (machine.link_src[keep], machine.link_dst[keep])),
                       shape=(n, n))
    return connected_components(graph, directed=False)[1]


def _network_switch(machine: Machine, members: list[int]) -> tuple[int | None, np.ndarray | None]:
    for s in range(machine.num_npus, machine.num_nodes):
        labels = _components(machine, (machine.link_src != s) & (machine.link_dst != s))
        _, counts = np.unique(labels[members], return_counts=True)
        if counts.size >= 2 and counts.min() >= 2:
            return s, labels
    return None, None


def _rails(machine: Machine, node: tuple[int, ...], network: int) -> tuple[int, ...]:
    """The node's rail GPUs: members linked to the network switch, or the first member behind
    each NIC switch linked to it, ordered by that GPU."""
    inside = set(node)
    out: list[int] = []
    for e in machine.in_links[network].tolist():
        u = int(machine.link_src[e])
        if u in inside:
            out.append(u)
        elif machine.is_switch(u):
            behind = sorted(int(machine.link_src[f]) for f in machine.in_links[u].tolist()
                            if int(machine.link_src[f]) in inside)
            if behind:
                out.append(behind[0])
    return tuple(sorted(set(out)))


def _fabric(machine: Machine, node: tuple[int, ...], network: int | None) -> int | None:
    for s in range(machine.num_npus, machine.num_nodes):
        if s == network or len(node) < 2:
            continue
        linked = {int(machine.link_src[e]) for e in machine.in_links[s].tolist()}
        if set(node) <= linked:
            return s
    return None


def _nic_split(machine: Machine, members: list[int]) -> np.ndarray | None:
    """Component labels once the slowest links between NPUs and switches are dropped, the
    fewest classes of them that split the members into parts of at least two (a rail fabric:
    every GPU's NIC on its rail's switch, no one switch joining the nodes); None if none does."""
    src_npu, dst_npu = machine.link_src < machine.num_npus, machine.link_dst < machine.num_npus
    for slowest in np.unique(machine.link_bandwidth)[:-1].tolist():
        dropped = machine.link_bandwidth <= slowest
        if np.any(dropped & src_npu & dst_npu):
            return None  # a slow link between two NPUs: not a NIC
        labels = _components(machine, ~dropped)
        _, counts = np.unique(labels[members], return_counts=True)
        if counts.size >= 2 and counts.min() >= 2:
            return labels
    return None


def _nic_gpus(machine: Machine, nodes: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    """Per node, its members linked to a switch that members of another node are linked to too
    (their NIC's rail switch), in order."""
    node_of = {v: i for i, node in enumerate(nodes) for v in node}
    reaches: dict[int, set[int]] = {}
    for u, v in zip(machine.link_src.tolist(), machine.link_dst.tolist()):
        if u in node_of and machine.is_switch(v):
            reaches.setdefault(v, set()).add(node_of[u])
    shared = {s for s, seen in reaches.items() if len(seen) >= 2}
    return tuple(tuple(sorted({u for u, v in zip(machine.link_src.tolist(), machine.link_dst.tolist())
                               if u in node and v in shared})) for node in nodes)


def nccl_topology(machine: Machine, members: list[int] | tuple[int, ...]) -> NcclTopology:
    """NCCL's view of the communicator ``members`` on ``machine`` (module docstring)."""
    members = list(members)
    network, labels = _network_switch(machine, members)
    split = _nic_split(machine, members) if labels is None else None
    if labels is None and split is None:
        nodes = (tuple(members),)
        rails: tuple[tuple[int, ...], ...] = ((),)
    else:
        parts = labels if labels is not None else split
        groups: dict[int, list[int]] = {}
        for v in members:
            groups.setdefault(int(parts[v]), []).append(v)
        nodes = tuple(sorted((tuple(g) for g in groups.values()), key=min))
        rails = (tuple(_rails(machine, node, network) for node in nodes) if network is not None
                 else _nic_gpus(machine, nodes))
    fabrics = tuple(_fabric(machine, node, network) for node in nodes)
    return NcclTopology(machine, tuple(members), nodes, rails, network, fabrics)


def directed_rings(machine: Machine, members: list[int], budget: int = 20_000) -> list[list[int]]:
    """Directed Hamiltonian rings over ``members`` that share no link (parallel links each carry
    their own ring): both directions of ``disjoint_rings``, then rings searched in the links
    left. At least one order (possibly with routed hops) is always returned."""
    capacity: dict[tuple[int, int], int] = {}
    inside = set(members)
    for u, v in zip(machine.link_src.tolist(), machine.link_dst.tolist()):
        if u in inside and v in inside:
            capacity[(u, v)] = capacity.get((u, v), 0) + 1
    rings: list[list[int]] = []

    def take(ring: list[int]) -> bool:
        hops = list(zip(ring, ring[1:] + ring[:1]))
        if len(ring) < 2 or any(capacity.get(h, 0) < 1 for h in hops):
            return False
        for h in hops:
            capacity[h] -= 1
        rings.append(ring)
        return True

    for ring in disjoint_rings(machine, members):
        if take(ring):
            take([ring[0]] + ring[:0:-1])
    rng = np.random.default_rng(0)
    index = {v: i for i, v in enumerate(members)}
    while rings and len(members) > 2:
        adj = {v: {w for (u, w), k in capacity.items() if u == v and k > 0} for v in members}
        pairs = [(index[u], index[w]) for u in members for w in adj[u]]
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        graph = csr_matrix((np.ones(len(pairs)), tuple(zip(*pairs)) if pairs else ([], [])),
                           shape=(len(members),) * 2)
        if connected_components(graph, directed=True, connection="strong")[0] != 1:
            break  # no directed ring can visit every member through the links left
        found = search_cycle(adj, members[0], rng, budget)
        if found is None or not take(found):
            break
    return rings or [ring_order(machine, members, directed=True)]
