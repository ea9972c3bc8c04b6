"""NCCL's algorithms that reduce in the network: NVLS, NVLS-tree and CollNet (NCCL 2.30.7).

**NVLS** (one node whose NVSwitch multicasts and reduces; ``src/device/all_reduce.h``,
``all_gather.h``, ``reduce_scatter.h``, ``RunWorkColl<…, NCCL_ALGO_NVLS, …>``). Every GPU is the
*head* of its own share of the vector (chunk i·C+j: rank i). AllReduce: the head's
``multimem.ld_reduce`` makes the switch read every GPU's contribution and return the sum to the
head, whose ``multimem.st`` sends it back to the switch, which multicasts it to every GPU: per
chunk, every member → switch (reduce), switch → head, head → switch, switch → the others (copies).
Each GPU link carries the vector once plus 1/N of it each way, which is why NVLS reaches about
N/(N+1) of the link bandwidth, beyond what any algorithm without in-network reduction can. That
is the ideal data flow; NCCL's own tuning model derates NVLS further (``nvlsEfficiency`` 0.85 on
Hopper in ``tuning.cc``; about 275 GB/s is measured on 8 × H100 at 450 GB/s per direction), which
a machine model would express in its bandwidths, not here.
ReduceScatter is the first two moves (to each chunk's owner), AllGather owner → switch → all.
All heads work at once, slice by slice: the flows list the j-th chunk of every head before the
(j+1)-th of any.

**NVLS-tree** (several such nodes; ``NCCL_ALGO_NVLS_TREE``, ``connectNvls`` in
``src/graph/connect.cc``): one head per NIC in every node; a chunk's head reduces its node through
the switch as above, adds the partial sums of its child nodes' heads and passes the sum to its
parent node's head along NCCL's double binary tree over nodes (``tree.double_tree``, chunk k on
tree (k div #heads) mod 2, head k mod #heads); from the root the sum flows back down the heads and
each head multicasts it into its node through the switch.

**CollNet** (a network switch that reduces, SHARP-like; ``NCCL_ALGO_COLLNET_DIRECT``): a chunk's
head in every node adds the node's contributions, sends the node's partial to the network switch,
which reduces across nodes and returns the sum to every node's head, which copies it to its node.
NCCL enables it only with a CollNet plugin; here it applies wherever the network switch reduces.
"""
from __future__ import annotations

from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.flows import Flow
from optcoll.producers.baselines.nccl.topology import NcclTopology, nccl_topology
from optcoll.producers.baselines.nccl.tree import double_tree, tree_depths
from optcoll.schedules.schedule import REDUCE


def _nvls_fabrics(topo: NcclTopology, name: str) -> list[int]:
    machine = topo.machine
    out = []
    for node, fabric in zip(topo.nodes, topo.fabrics):
        sw = machine.switch(fabric) if fabric is not None else None
        if sw is None or not (sw.multicast and sw.reduce):
            raise NotApplicable(f"{name} needs every node's GPUs on one switch that multicasts and "
                                f"reduces (NVLS); the node of {machine.label(node[0])} has none")
        out.append(fabric)
    return out


def _heads(topo: NcclTopology, name: str) -> int:
    if topo.num_rails < 1:
        raise NotApplicable(f"{name} needs a NIC (a link to the network switch) in every node")
    return topo.num_rails


def nvls(instance: Instance) -> list[Flow]:
    coll = instance.collective
    if coll.kind not in ("allreduce", "reducescatter", "allgather"):
        raise NotApplicable(f"nccl-nvls does not implement {coll.kind}; it implements allgather, "
                            "allreduce, reducescatter")
    topo = nccl_topology(instance.machine, coll.ranks)
    if topo.num_nodes > 1:
        raise NotApplicable("nccl-nvls runs within one node; across nodes NCCL uses NVLS-tree "
                            "(nccl-nvls-tree) or NVLS with CollNet")
    (switch,) = _nvls_fabrics(topo, "nccl-nvls")
    flows: list[Flow] = []
    per_rank = coll.chunks_per_rank
    for j, head_index in [(j, i) for j in range(per_rank) for i in range(coll.num_ranks)]:
        k, head = head_index * per_rank + j, coll.ranks[head_index]
        others = [v for v in coll.ranks if v != head]
        if coll.kind != "allgather":
            flows += [Flow(k, v, switch, REDUCE) for v in coll.ranks] + [Flow(k, switch, head)]
        if coll.kind != "reducescatter":
            flows += [Flow(k, head, switch)] + [Flow(k, switch, v) for v in others]
    return flows


def nvls_tree(instance: Instance) -> list[Flow]:
    coll = instance.collective
    if coll.kind != "allreduce":
        raise NotApplicable(f"nccl-nvls-tree does not implement {coll.kind}; NCCL runs it for "
                            "AllReduce only")
    topo = nccl_topology(instance.machine, coll.ranks)
    if topo.num_nodes < 2:
        raise NotApplicable("nccl-nvls-tree needs at least 2 nodes (NCCL disables it on one node; "
                            "use nccl-nvls)")
    fabrics = _nvls_fabrics(topo, "nccl-nvls-tree")
    heads = _heads(topo, "nccl-nvls-tree")
    trees = double_tree(topo.num_nodes)
    flows: list[Flow] = []
    for k in range(coll.num_chunks):
        h, parents = k % heads, trees[(k // heads) % 2]
        head = [topo.rails[n][h] for n in range(topo.num_nodes)]
        node_parent = {n: parents[n][0] for n in range(topo.num_nodes)}
        depth = tree_depths(node_parent)
        for n in sorted(node_parent, key=lambda x: (-depth[x], x)):  # children before parents
            flows += [Flow(k, v, fabrics[n], REDUCE) for v in topo.nodes[n]]
            flows.append(Flow(k, fabrics[n], head[n]))
            flows += [Flow(k, head[c], head[n], REDUCE) for c in sorted(node_parent)
                      if node_parent[c] == n]
        for n in sorted(node_parent, key=lambda x: (depth[x], x)):  # parents before children
            if node_parent[n] >= 0:
                flows.append(Flow(k, head[node_parent[n]], head[n]))
            flows.append(Flow(k, head[n], fabrics[n]))
            flows += [Flow(k, fabrics[n], v) for v in topo.nodes[n] if v != head[n]]
    return flows


def collnet(instance: Instance) -> list[Flow]:
    coll = instance.collective
    if coll.kind != "allreduce":
        raise NotApplicable(f"nccl-collnet does not implement {coll.kind}; it implements allreduce")
    topo = nccl_topology(instance.machine, coll.ranks)
    machine = topo.machine
    if topo.network is None or not machine.switch(topo.network).reduce:
        raise NotApplicable("nccl-collnet needs nodes joined by one network switch that reduces "
                            "(SHARP-like); this machine has "
                            + ("one node" if topo.network is None else "a network switch without reduction"))
    heads = _heads(topo, "nccl-collnet")
    net = topo.network
    flows: list[Flow] = []
    for k in range(coll.num_chunks):
        head = [topo.rails[n][k % heads] for n in range(topo.num_nodes)]
        for n, node in enumerate(topo.nodes):
            flows += [Flow(k, v, head[n], REDUCE) for v in node if v != head[n]]
            flows.append(Flow(k, head[n], net, REDUCE))
        for n, node in enumerate(topo.nodes):
            flows.append(Flow(k, net, head[n]))
            flows += [Flow(k, head[n], v) for v in node if v != head[n]]
    return flows
