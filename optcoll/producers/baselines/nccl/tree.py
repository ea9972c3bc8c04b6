"""NCCL's tree AllReduce: a double binary tree across nodes, chains inside them.

From NCCL 2.30.7: ``src/graph/trees.cc`` (``ncclGetBtree``, ``ncclGetDtree``),
``src/graph/connect.cc`` (``ncclTopoPreset``, ``connectTrees``) and ``src/device/all_reduce.h``
(``runTreeSplit``):

* Across the K nodes, tree 0 is NCCL's binary tree over node indices: node 0 is the root with one
  child; node r ≠ 0 with lowest set bit b hangs under (r xor b) | 2b, or r xor b when that is
  ≥ K. Tree 1 is its mirror (r → K−1−r) for even K and its shift by one for odd K, so nodes that
  are leaves in one tree are inner nodes in the other.
* Inside a node, the channel's GPUs form a chain g0 ← g1 ← … (``treeIntra``), entered at the GPU
  local to the channel's NIC. With NCCL's default BALANCED_TREE pattern, g0 talks to the parent
  node and a node's first child (the one with the smaller index) attaches to g1, its second to g0.
* Each channel has both trees (channels c and c + nChannels); chunk k of the vector uses tree
  k mod 2 and rail (k div 2) mod #rails. ``runTreeSplit`` reduces up and broadcasts down at once,
  pipelined: here every chunk is reduced to the root along its tree (each GPU adds its children's
  partials and passes the sum up) and copied back down, chunk after chunk (``flows``).

One node is a single chain (NCCL's tree within one node). NCCL runs the tree for AllReduce only.
"""
from __future__ import annotations

from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.flows import Flow
from optcoll.producers.baselines.nccl.topology import NcclTopology, nccl_topology
from optcoll.schedules.schedule import COPY, REDUCE


def btree_parent(n: int, r: int) -> int:
    """The parent of r in NCCL's binary tree over 0..n−1 (−1 for the root 0)."""
    if r == 0:
        return -1
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    return up if up < n else r ^ bit


def double_tree(n: int) -> list[list[tuple[int, int]]]:
    """For trees 0 and 1: (parent, child type) per node index, child type 0 for a parent's first
    child and 1 for its second, as ``ncclGetDtree`` numbers them (module docstring)."""
    def shifted(r: int, tree: int) -> int:
        if tree == 0:
            return r
        return (r - 1) % n if n % 2 else n - 1 - r

    def unshifted(r: int, tree: int) -> int:
        if tree == 0:
            return r
        return (r + 1) % n if n % 2 else n - 1 - r

    out = []
    for tree in (0, 1):
        row = []
        for r in range(n):
            x = shifted(r, tree)
            up = btree_parent(n, x)
            row.append((-1, 0) if up < 0 else (unshifted(up, tree), 0 if x < up else 1))
        out.append(row)
    return out


def gpu_tree(topo: NcclTopology, tree: int, rail: int) -> dict[int, int]:
    """Parent GPU of every member for one tree and rail (the root maps to −1)."""
    chains = [topo.chain(n, rail) for n in range(topo.num_nodes)]
    parent: dict[int, int] = {}
    for node, chain in enumerate(chains):
        for a, b in zip(chain, chain[1:]):
            parent[b] = a
        up, kind = double_tree(topo.num_nodes)[tree][node]
        if up < 0:
            parent[chain[0]] = -1
        else:
            above = chains[up]
            parent[chain[0]] = above[1] if kind == 0 and len(above) > 1 else above[0]
    return parent


def tree_depths(parent: dict[int, int]) -> dict[int, int]:
    depth: dict[int, int] = {}
    for v in parent:
        d, x = 0, v
        while parent[x] >= 0:
            x, d = parent[x], d + 1
        depth[v] = d
    return depth


def reduce_broadcast(chunk: int, parent: dict[int, int]) -> list[Flow]:
    """Reduce ``chunk`` up a tree (deepest first) and copy the sum back down it."""
    depth = tree_depths(parent)
    up = sorted((v for v in parent if parent[v] >= 0), key=lambda v: (-depth[v], v))
    down = sorted((v for v in parent if parent[v] >= 0), key=lambda v: (depth[v], v))
    return ([Flow(chunk, v, parent[v], REDUCE) for v in up]
            + [Flow(chunk, parent[v], v, COPY) for v in down])


def nccl_tree(instance: Instance) -> list[Flow]:
    coll = instance.collective
    if coll.kind != "allreduce":
        raise NotApplicable(f"nccl-tree does not implement {coll.kind}; NCCL runs its tree for "
                            "AllReduce only")
    if coll.num_ranks < 2:
        raise NotApplicable("nccl-tree needs at least 2 ranks")
    topo = nccl_topology(instance.machine, coll.ranks)
    rails = max(topo.num_rails, 1)
    trees = {(t, r): gpu_tree(topo, t, r) for t in (0, 1) for r in range(rails)}
    flows: list[Flow] = []
    for k in range(coll.num_chunks):
        flows += reduce_broadcast(k, trees[(k % 2, (k // 2) % rails)])
    return flows
