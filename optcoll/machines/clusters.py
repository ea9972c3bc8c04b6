"""Clusters: nodes of GPUs joined through their NICs by a scale-out network (docs/model.md §3,
"multi-node (nodes × GPUs with NICs)").

A cluster is one or more *groups* of identical nodes (two GPU generations are two groups). A node is
any machine (an NVSwitch box, a full mesh, a hybrid cube-mesh, a torus, an imported nvidia-smi
box), copied once per node, plus its NICs; the network joins the NICs:

- ``rail``: NIC r of every node on rail r's leaf switch (rail-optimized, as in DGX SuperPODs);
  the rail leaves are joined by one spine switch when there is more than one rail.
- ``leaf``: every NIC on one switch.
- ``fat_tree``: two levels: ``nodes_per_leaf`` consecutive nodes share a leaf, the leaves are
  joined by one spine switch.

Each leaf's uplink to the spine carries the leaf's NIC bandwidth divided by ``oversubscription``
(1 = non-blocking). A leaf or the spine is one switch node: a non-blocking switch of any radix
(or a non-blocking tier of switches) constrains nothing a single node would not, so more nodes
would only slow every solver down.

A NIC serving one GPU over a PCIe link at least as fast as the NIC (or of unstated speed) is that
GPU's cable to its leaf at the NIC's bandwidth: the NIC binds. Otherwise (a NIC shared by several
GPUs, or a slower PCIe link) the NIC is a forwarding node ``n<k>.nic<j>`` reached over PCIe links.
A single node has no network: its NICs are not built.

NPU ids run node by node (groups in order) and keep each node's own GPU order; labels are
``n<k>g<g>``, a node's switches become ``n<k>.<label>``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from optcoll.errors import InputError
from optcoll.machines.checks import check_bandwidth, check_int, check_latency
from optcoll.machines.machine import Machine, MachineBuilder, check_size
from optcoll.units import bandwidth_text, format_time

NETWORKS = ("rail", "leaf", "fat_tree")


@dataclass(frozen=True)
class NodeGroup:
    """``nodes`` copies of the node machine ``node`` (its NPUs are the GPUs) with their NICs.

    ``nic_gpus``: per NIC, the GPUs that reach it (its affinity); ``None`` means one NIC per GPU.
    Bandwidths are bytes/s per direction, latencies seconds per link. ``pcie_bandwidth`` is each
    GPU's link into a NIC that is a node of its own (``None``: the NIC's bandwidth).
    """

    node: Machine
    nodes: int
    nic_gpus: tuple[tuple[int, ...], ...] | None = None
    nic_bandwidth: float | None = None
    nic_latency: float = 0.0
    pcie_bandwidth: float | None = None
    pcie_latency: float = 0.0

    @property
    def nics(self) -> tuple[tuple[int, ...], ...]:
        if self.nic_gpus is None:
            return tuple((g,) for g in range(self.node.num_npus))
        return self.nic_gpus

    def nic_is_cable(self, gpus: tuple[int, ...]) -> bool:
        """True when a NIC serving ``gpus`` is modelled as its GPU's own cable to the leaf."""
        return len(gpus) == 1 and (self.pcie_bandwidth is None or self.pcie_bandwidth >= self.nic_bandwidth)

    def port_bandwidth(self, gpus: tuple[int, ...]) -> float:
        """What one of ``gpus`` can send into that NIC per direction (B/s)."""
        if self.nic_is_cable(gpus):
            return self.nic_bandwidth
        return self.nic_bandwidth if self.pcie_bandwidth is None else self.pcie_bandwidth


@dataclass(frozen=True)
class Network:
    """The scale-out network: ``kind`` one of ``NETWORKS``; ``latency`` per leaf<->spine link."""

    kind: str = "rail"
    latency: float | None = None
    oversubscription: float = 1.0
    nodes_per_leaf: int | None = None


def _checked_group(i: int, group: NodeGroup, multi_node: bool) -> NodeGroup:
    where = f"groups[{i}]"
    if not isinstance(group, NodeGroup):
        raise InputError(f"must be a NodeGroup, got {type(group).__name__}", field=where)
    check_int(f"{where}.nodes", group.nodes, 1)
    gpus = group.node.num_npus
    if group.nic_gpus is not None:
        for j, served in enumerate(group.nic_gpus):
            if not served:
                raise InputError("a NIC must serve at least one GPU", field=f"{where}.nic_gpus[{j}]")
            for gpu in served:
                check_int(f"{where}.nic_gpus[{j}]", gpu, 0)
                if gpu >= gpus:
                    raise InputError(f"GPU {gpu} does not exist (a {group.node.name} node has GPUs "
                                     f"0..{gpus - 1})", field=f"{where}.nic_gpus[{j}]")
    if not multi_node:
        return group
    if not group.nics:
        raise InputError("the nodes of a multi-node cluster need at least one NIC", field=f"{where}.nic_gpus")
    if group.nic_bandwidth is None:
        raise InputError("missing: the nodes of a multi-node cluster reach each other through NICs",
                         field=f"{where}.nic_bandwidth")
    check_bandwidth(f"{where}.nic_bandwidth", group.nic_bandwidth)
    check_latency(f"{where}.nic_latency", group.nic_latency)
    if group.pcie_bandwidth is not None:
        check_bandwidth(f"{where}.pcie_bandwidth", group.pcie_bandwidth)
    check_latency(f"{where}.pcie_latency", group.pcie_latency)
    return group


def _checked_network(network: Network, total_nodes: int) -> Network:
    if not isinstance(network, Network):
        raise InputError(f"must be a Network, got {type(network).__name__}", field="network")
    if network.kind not in NETWORKS:
        raise InputError(f"unknown network {network.kind!r}; one of {', '.join(NETWORKS)}", field="network")
    ratio = network.oversubscription
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 1 <= ratio < float("inf"):
        raise InputError(f"must be at least 1 (a leaf's uplink carries at most what its NICs bring), "
                         f"got {ratio!r}", field="oversubscription")
    if network.kind == "fat_tree":
        if network.nodes_per_leaf is None:
            raise InputError("missing: a fat tree needs the number of nodes per leaf", field="nodes_per_leaf")
        per_leaf = check_int("nodes_per_leaf", network.nodes_per_leaf, 1)
        if total_nodes % per_leaf:
            raise InputError(f"{total_nodes} nodes do not fill leaves of {per_leaf} nodes",
                             field="nodes_per_leaf")
    elif network.nodes_per_leaf is not None:
        raise InputError(f"only a fat tree has leaves of several nodes, not a {network.kind} network",
                         field="nodes_per_leaf")
    if network.latency is not None:
        check_latency("network_latency", network.latency)
    return network


@dataclass(frozen=True)
class _Leaves:
    """The network's switches: ``leaf[(node, nic)]`` is the handle of that NIC's leaf."""

    labels: tuple[str, ...]
    spine: str | None


def _leaves(groups: Sequence[NodeGroup], network: Network, leaf_label: str) -> _Leaves:
    if network.kind == "leaf":
        return _Leaves((leaf_label,), None)
    if network.kind == "rail":
        rails = max(len(g.nics) for g in groups)
        return _Leaves(tuple(f"rail{r}" for r in range(rails)), "spine" if rails > 1 else None)
    leaves = sum(g.nodes for g in groups) // network.nodes_per_leaf
    return _Leaves(tuple(f"leaf{i}" for i in range(leaves)), "spine" if leaves > 1 else None)


def _leaf_of(network: Network, leaves: _Leaves, node: int, nic: int) -> str:
    if network.kind == "leaf":
        return leaves.labels[0]
    if network.kind == "rail":
        return leaves.labels[nic]
    return leaves.labels[node // network.nodes_per_leaf]


def _describe(groups: Sequence[NodeGroup], network: Network, total_nodes: int) -> str:
    parts = []
    for g in groups:
        nodes = f"{g.nodes} x {g.node.name} ({g.node.num_npus} GPUs)"
        if total_nodes > 1:
            nodes += (f", {len(g.nics)} NIC(s) per node at {bandwidth_text(g.nic_bandwidth)}, "
                      f"{format_time(g.nic_latency)}")
        parts.append(nodes)
    if total_nodes == 1:
        return f"{parts[0]}; a single node: no NICs or network"
    ratio = "" if network.oversubscription == 1 else f", {network.oversubscription:g}:1 oversubscribed"
    shape = {"rail": "rail-optimized (NIC r on rail r's leaf, leaves joined by a spine)",
             "leaf": "every NIC on one switch",
             "fat_tree": f"two-level fat tree, {network.nodes_per_leaf} nodes per leaf"}[network.kind]
    return f"{' + '.join(parts)}; {shape}{ratio}"


def cluster(groups: Sequence[NodeGroup], network: Network = Network(), *, name: str = "cluster",
            description: str | None = None, leaf_label: str = "leaf") -> Machine:
    """The machine of ``groups`` of nodes on ``network`` (see the module docstring).

    ``leaf_label`` names the single switch of a ``leaf`` network (``multinode`` calls it "spine").
    """
    if not isinstance(groups, (list, tuple)) or not groups:
        raise InputError("must list at least one group of nodes", field="groups")
    total_nodes = sum(check_int(f"groups[{i}].nodes", getattr(g, "nodes", None), 1)
                      for i, g in enumerate(groups))
    multi = total_nodes > 1
    groups = [_checked_group(i, g, multi) for i, g in enumerate(groups)]
    network = _checked_network(network, total_nodes)
    leaves = _leaves(groups, network, leaf_label) if multi else _Leaves((), None)
    if leaves.spine is not None and network.latency is None:
        raise InputError("missing: the leaves are joined by a spine, whose links need a latency",
                         field="network_latency")
    npus = sum(g.nodes * g.node.num_npus for g in groups)
    nic_links = sum(g.nodes * sum(2 * (1 if g.nic_is_cable(s) else len(s) + 1) for s in g.nics)
                    for g in groups) if multi else 0
    check_size(npus + sum(g.nodes * (len(g.node.switches) + len(g.nics)) for g in groups) + len(leaves.labels) + 1,
               sum(g.nodes * g.node.num_links for g in groups) + nic_links + 2 * len(leaves.labels))
    labels = [f"n{k}g{x}" for k, g in enumerate(_node_groups(groups)) for x in range(g.node.num_npus)]
    b = MachineBuilder(name, npus, description if description is not None
                       else _describe(groups, network, total_nodes), labels)
    for label in (*leaves.labels, *([leaves.spine] if leaves.spine else [])):
        b.add_switch(label)
    downlink = {label: 0.0 for label in leaves.labels}
    width = sum(g.node.num_npus + 1 for g in _node_groups(groups))
    first, x0 = 0, 0.0
    for k, group in enumerate(_node_groups(groups)):
        node = group.node
        _copy_node(b, node, k, first, x0)
        if multi:
            for j, served in enumerate(group.nics):
                leaf = _leaf_of(network, leaves, k, j)
                downlink[leaf] += group.nic_bandwidth
                _add_nic(b, group, k, j, served, first, leaf, x0)
        first += node.num_npus
        x0 += node.num_npus + 1
    for i, label in enumerate(leaves.labels):
        b.positions[label] = ((width - 2) * (i + 0.5) / len(leaves.labels), -2.5)
    if leaves.spine is not None:
        for label in leaves.labels:
            b.add_link(label, leaves.spine, bandwidth=downlink[label] / network.oversubscription,
                       latency=network.latency, bidirectional=True)
        b.positions[leaves.spine] = ((width - 2) / 2, -4.0)
    return b.build()


def cluster_kind(groups: Sequence[NodeGroup], network: str = "rail", network_latency: float | None = None,
                 oversubscription: float = 1.0, nodes_per_leaf: int | None = None) -> Machine:
    """``cluster`` with the network's fields flat, as a model file's ``kind = "cluster"`` gives them."""
    return cluster(groups, Network(network, network_latency, oversubscription, nodes_per_leaf))


def _node_groups(groups: Sequence[NodeGroup]) -> list[NodeGroup]:
    """One entry per node, in NPU order."""
    return [g for g in groups for _ in range(g.nodes)]


def _copy_node(b: MachineBuilder, node: Machine, k: int, first: int, x0: float) -> None:
    """Node ``k``'s GPUs (NPUs first .. first+n-1), switches and links, laid out in a row."""
    n = node.num_npus
    handle: dict[int, int | str] = {v: first + v for v in range(n)}
    count = len(node.switches)
    for i, switch in enumerate(node.switches):
        label = b.add_switch(f"n{k}.{switch.label}", multicast=switch.multicast, reduce=switch.reduce)
        handle[n + i] = label
        b.positions[label] = (x0 + (n - 1) / 2 + (i - (count - 1) / 2), 1.5)
    for e in range(node.num_links):
        b.add_link(handle[int(node.link_src[e])], handle[int(node.link_dst[e])],
                   bandwidth=float(node.link_bandwidth[e]), latency=float(node.link_latency[e]))
    b.positions.update((first + v, (x0 + v, 0.0)) for v in range(n))


def _add_nic(b: MachineBuilder, group: NodeGroup, k: int, j: int, served: tuple[int, ...], first: int,
             leaf: str, x0: float) -> None:
    if group.nic_is_cable(served):
        b.add_link(first + served[0], leaf, bandwidth=group.nic_bandwidth,
                   latency=group.nic_latency + group.pcie_latency, bidirectional=True)
        return
    nic = b.add_switch(f"n{k}.nic{j}")
    b.positions[nic] = (x0 + sum(served) / len(served), -1.0)
    for gpu in served:
        b.add_link(first + gpu, nic, bandwidth=group.port_bandwidth(served), latency=group.pcie_latency,
                   bidirectional=True)
    b.add_link(nic, leaf, bandwidth=group.nic_bandwidth, latency=group.nic_latency, bidirectional=True)
