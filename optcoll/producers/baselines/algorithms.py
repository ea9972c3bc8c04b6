"""The classical algorithms as logical message lists over a communicator.

Each function takes a spread problem (``optcoll.producers.spread``) and returns ``Messages``:
who sends which chunk to whom, in order, and for synchronous algorithms in which stage. The list
scheduler turns them into timed schedules on the real network, and ``compose`` turns spreads
into reductions, so ring ReduceScatter, recursive halving, Rabenseifner AllReduce, binomial
Reduce and double-binary-tree AllReduce all come out of the spread algorithms written here.

Members are indexed by their position in the communicator (``problem.ranks``). An algorithm
that does not fit the problem raises ``NotApplicable`` saying why.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.dims import coordinates, grid_dims, npu_id
from optcoll.producers.baselines.rings import disjoint_rings, ring_order
from optcoll.producers.spread import Shape, SpreadProblem


@dataclass
class Messages:
    """Logical messages in scheduling order; ``stage`` is None for pipelined algorithms."""

    chunk: list[int] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    stage: list[int] | None = None
    notes: dict = field(default_factory=dict)

    def add(self, c: int, a: int, b: int, stage: int | None = None) -> None:
        self.chunk.append(c)
        self.src.append(a)
        self.dst.append(b)
        if stage is not None:
            if self.stage is None:
                self.stage = []
            self.stage.append(stage)


def single_holder(problem: SpreadProblem, name: str) -> tuple[list[int], list[list[int]]]:
    """Each chunk's holder and its destinations (members that lack it)."""
    if not np.all(problem.pre.counts() == 1):
        raise NotApplicable(f"{name} needs every chunk to start at exactly one rank")
    holders = problem.pre.nodes.tolist()
    need_c, need_v = problem.needs
    dests: list[list[int]] = [[] for _ in range(problem.num_chunks)]
    for c, v in zip(need_c.tolist(), need_v.tolist()):
        dests[c].append(v)
    return holders, dests


def require_shape(problem: SpreadProblem, name: str, *kinds: str) -> Shape:
    shape = problem.shape
    if shape.kind not in kinds:
        raise NotApplicable(f"{name} applies to {', '.join(kinds)}-shaped collectives, not to this "
                            f"{shape.kind} one")
    return shape


def power_of_two(n: int, name: str) -> int:
    if n < 2 or n & (n - 1):
        raise NotApplicable(f"{name} needs a power-of-two number of ranks, got {n}")
    return n.bit_length() - 1


def _walks(order: list[int], holders: list[int], dests: list[list[int]], chunks: list[int],
           directions: tuple[int, ...], out: list[tuple[int, int, int, int]]) -> None:
    """Each chunk travels along the ring ``order`` from its holder until it has passed its last
    destination; with directions (1, -1) each destination is reached the shorter way round
    (ties clockwise). Appends (hop, chunk, from, to)."""
    n = len(order)
    where = {v: i for i, v in enumerate(order)}
    for c in chunks:
        start = where.get(holders[c])
        if start is None:
            raise NotApplicable(f"chunk {c} starts at node {holders[c]}, outside the ring")
        reach = {d: 0 for d in directions}
        for v in dests[c]:
            ahead = (where[v] - start) % n
            if len(directions) == 1 or ahead <= n - ahead:
                reach[directions[0]] = max(reach[directions[0]], ahead)
            else:
                reach[-1] = max(reach[-1], n - ahead)
        for d, hops in reach.items():
            for h in range(hops):
                out.append((h, c, order[(start + d * h) % n], order[(start + d * (h + 1)) % n]))


def ring_messages(problem: SpreadProblem, rings: list[list[int]], directions: tuple[int, ...]
                  ) -> Messages:
    """Chunk c walks ring c mod R from its holder past its last destination (``_walks``); one
    message per hop, in hop order."""
    holders, dests = single_holder(problem, "a ring algorithm")
    hops: list[tuple[int, int, int, int]] = []
    for r, order in enumerate(rings):
        chunks = [c for c in range(problem.num_chunks) if c % len(rings) == r]
        _walks(order, holders, dests, chunks, directions, hops)
    hops.sort()
    out = Messages()
    for _, c, a, b in hops:
        out.add(c, a, b)
    out.notes["rings"] = len(rings)
    return out


def ring(problem: SpreadProblem) -> Messages:
    """Unidirectional ring: every chunk goes round one way, pipelined."""
    order = ring_order(problem.machine, list(problem.ranks), directed=True)
    return ring_messages(problem, [order], (1,))


def ring_bidir(problem: SpreadProblem) -> Messages:
    """Bidirectional ring: each destination is reached the shorter way round."""
    return ring_messages(problem, [ring_order(problem.machine, list(problem.ranks))], (1, -1))


def multiring(problem: SpreadProblem) -> Messages:
    """Edge-disjoint rings (NCCL channels), each used both ways; chunk c uses ring c mod R, so
    C chunks per rank (R dividing C) are needed to use all R rings."""
    rings = disjoint_rings(problem.machine, list(problem.ranks))
    return ring_messages(problem, rings, (1, -1))


def direct(problem: SpreadProblem) -> Messages:
    """Every chunk straight from its holder to each destination (routed when not adjacent),
    destinations visited in rotating order so no rank is hit by everyone at once; with several
    chunks per (holder, destination) pair, the k-th chunk to every destination goes before any
    (k+1)-th, so all peers are served at once, as NCCL's grouped sends run every peer's transfer
    concurrently on its own channels (AlltoAll: ``enqueue.cc`` scheduleP2pTasksToPlan, up to
    NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8 peers per channel batch, NCCL 2.30.7). One chunk per pair
    is the plain rotation."""
    holders, dests = single_holder(problem, "direct")
    pos = {v: i for i, v in enumerate(problem.ranks)}
    n = len(problem.ranks)
    sent: dict[tuple[int, int], int] = {}
    rows = []
    for c in range(problem.num_chunks):
        for v in dests[c]:
            k = sent.get((holders[c], v), 0)
            sent[holders[c], v] = k + 1
            rows.append((k, (pos[v] - pos[holders[c]]) % n, c, v))
    rows.sort()
    out = Messages()
    for _, _, c, v in rows:
        out.add(c, holders[c], v)
    return out


def owner_chunks(problem: SpreadProblem) -> list[list[int]]:
    """AllGather shape: the chunks each member owns, by member index."""
    pos = {v: i for i, v in enumerate(problem.ranks)}
    owned: list[list[int]] = [[] for _ in problem.ranks]
    for c, h in enumerate(problem.pre.nodes.tolist()):
        owned[pos[h]].append(c)
    return owned


def recursive_doubling(problem: SpreadProblem) -> Messages:
    """AllGather by recursive doubling: in stage k member i swaps everything it holds (2^k
    ranks' chunks) with member i XOR 2^k. Reversed it is recursive halving."""
    require_shape(problem, "recursive doubling", "allgather")
    ranks = problem.ranks
    stages = power_of_two(len(ranks), "recursive doubling")
    owned = owner_chunks(problem)
    out = Messages()
    for k in range(stages):
        for i in range(len(ranks)):
            block = (i >> k) << k
            for owner in range(block, block + (1 << k)):
                for c in owned[owner]:
                    out.add(c, ranks[i], ranks[i ^ (1 << k)], k)
    return out


def bruck(problem: SpreadProblem) -> Messages:
    """Bruck's algorithm, any number of ranks: AllGather in ceil(log2 N) stages (stage k sends
    min(2^k, N-2^k) ranks' chunks to the rank 2^k before), AlltoAll by forwarding each chunk
    along the set bits of its rank offset."""
    shape = require_shape(problem, "bruck", "allgather", "alltoall")
    ranks = problem.ranks
    n = len(ranks)
    out = Messages()
    if shape.kind == "allgather":
        owned = owner_chunks(problem)
        k = 0
        while (1 << k) < n:
            count = min(1 << k, n - (1 << k))
            for i in range(n):
                for t in range(count):
                    for c in owned[(i + t) % n]:
                        out.add(c, ranks[i], ranks[(i - (1 << k)) % n], k)
            k += 1
        return out
    pos = {v: i for i, v in enumerate(ranks)}
    holders, dests = single_holder(problem, "bruck")
    hops = []
    for c in range(problem.num_chunks):
        for v in dests[c]:
            at, offset = pos[holders[c]], (pos[v] - pos[holders[c]]) % n
            for k in range(offset.bit_length()):
                if offset >> k & 1:
                    hops.append((k, c, ranks[at], ranks[(at + (1 << k)) % n]))
                    at = (at + (1 << k)) % n
    for k, c, a, b in sorted(hops):
        out.add(c, a, b, k)
    return out


@dataclass(frozen=True)
class RootedTree:
    """A spanning tree over member positions relative to the root (0): ``parent[x]`` (-1 at the
    root) and ``stage[x]``, the stage in which x receives when data flows down it."""

    parent: list[int]
    stage: list[int]

    @property
    def stages(self) -> int:
        return max(self.stage, default=-1) + 1

    def subtree(self, x: int) -> list[int]:
        """x and its descendants, in position order."""
        inside = {x}
        for y in range(len(self.parent)):
            chain, z = [], y
            while z not in inside and self.parent[z] >= 0:
                chain.append(z)
                z = self.parent[z]
            if z in inside:
                inside.update(chain)
        return sorted(inside)


def tree_messages(problem: SpreadProblem, name: str, trees: dict[str, RootedTree]) -> Messages:
    """Broadcast (every chunk down ``trees["broadcast"]``), Scatter (each node's subtree's chunks
    down ``trees["scatter"]``) or Gather (each node's subtree's chunks up ``trees["gather"]``, in
    the stages mirrored) over members in rank order rotated to the root. Stage by stage, receivers
    (or senders, up) in position order, chunks in order."""
    shape = require_shape(problem, name, "broadcast", "gather", "scatter")
    ranks = problem.ranks
    n = len(ranks)
    pos = {v: i for i, v in enumerate(ranks)}
    root = pos[shape.root]

    def member(q: int) -> int:
        return ranks[(root + q) % n]

    holders, _ = single_holder(problem, name)
    tree = trees[shape.kind]
    ends = holders if shape.kind == "gather" else problem.post.nodes.tolist()
    by_member: list[list[int]] = [[] for _ in range(n)]
    if shape.kind != "broadcast":
        for c in range(problem.num_chunks):
            by_member[(pos[ends[c]] - root) % n].append(c)
    rows = []
    for x in range(1, n):
        chunks = (list(range(problem.num_chunks)) if shape.kind == "broadcast"
                  else [c for y in tree.subtree(x) for c in by_member[y]])
        if shape.kind == "gather":
            rows.append((tree.stages - 1 - tree.stage[x], x, chunks, member(x), member(tree.parent[x])))
        else:
            rows.append((tree.stage[x], x, chunks, member(tree.parent[x]), member(x)))
    out = Messages()
    for stage, _, chunks, a, b in sorted(rows, key=lambda row: row[:2]):
        for c in chunks:
            out.add(c, a, b, stage)
    return out


def binomial_trees(n: int) -> dict[str, RootedTree]:
    """Broadcast: stage k, the first 2^k positions each send to the one 2^k further (parent: clear
    the highest set bit). Gather and Scatter: parent = clear the lowest set bit, so Gather sends
    the smallest subtrees first and Scatter the largest halves first."""
    levels = max(1, (n - 1).bit_length())
    high = RootedTree([-1] + [x - (1 << (x.bit_length() - 1)) for x in range(1, n)],
                      [-1] + [x.bit_length() - 1 for x in range(1, n)])
    low = RootedTree([-1] + [x - (x & -x) for x in range(1, n)],
                     [-1] + [levels - 1 - ((x & -x).bit_length() - 1) for x in range(1, n)])
    return {"broadcast": high, "gather": low, "scatter": low}


def binomial_tree(problem: SpreadProblem) -> Messages:
    """Binomial trees rooted at the root (``binomial_trees``). Reversed, the Broadcast is the
    binomial Reduce."""
    return tree_messages(problem, "binomial-tree", binomial_trees(len(problem.ranks)))


def _bit_tree(n: int) -> list[int]:
    """Parent position (1-based, 0 for the root) of each position 1..n in the in-order binary
    tree where position p sits at the level of its lowest set bit (NCCL's tree shape)."""
    parent = [0] * (n + 1)
    for p in range(1, n + 1):
        q = p
        while True:
            low = q & -q
            q = (q - low) | (low << 1)
            if q <= n or q > 2 * n:
                break
        parent[p] = q if q <= n else 0
    return parent


def double_trees(n: int) -> list[list[int]]:
    """Two binary trees over member indices 0..n-1 as parent lists (-1 at the root): the
    in-order tree and its mirror (n even) or its shift by one (n odd), so that ranks that are
    leaves in one tree are inner nodes in the other."""
    parent = _bit_tree(n)
    first = [parent[p] - 1 for p in range(1, n + 1)]
    relabel = ([n + 1 - p for p in range(n + 1)] if n % 2 == 0
               else [0] + [p % n + 1 for p in range(1, n + 1)])
    second = [-1] * n
    for p in range(1, n + 1):
        second[relabel[p] - 1] = relabel[parent[p]] - 1 if parent[p] else -1
    return [first, second]


def tree_roots(n: int) -> list[int]:
    return [tree.index(-1) for tree in double_trees(n)]


def double_binary_tree(problem: SpreadProblem) -> Messages:
    """Double binary tree (NCCL): chunk c goes down tree c mod 2, pipelined; the root first
    hands it to that tree's root. Reversed it reduces up the trees."""
    shape = require_shape(problem, "double-binary-tree", "broadcast", "allgather")
    ranks = problem.ranks
    n = len(ranks)
    if n < 2:
        raise NotApplicable("double-binary-tree needs at least 2 ranks")
    trees = double_trees(n)
    roots = [ranks[t.index(-1)] for t in trees]
    holders, _ = single_holder(problem, "double-binary-tree")
    if shape.kind == "allgather" and any(holders[c] != roots[c % 2] for c in range(problem.num_chunks)):
        raise NotApplicable("double-binary-tree spreads chunks from one root (Broadcast, and the "
                            "two tree roots of its AllReduce), not an AllGather")
    depth = []
    for tree in trees:
        d = [0] * n
        for i in range(n):
            j = i
            while tree[j] >= 0:
                j = tree[j]
                d[i] += 1
        depth.append(d)
    rows = []
    for c in range(problem.num_chunks):
        t = c % 2
        if holders[c] != roots[t]:
            rows.append((-1, c, holders[c], roots[t]))
        rows.extend((depth[t][i], c, ranks[trees[t][i]], ranks[i]) for i in range(n) if trees[t][i] >= 0)
    out = Messages()
    for _, c, a, b in sorted(rows):
        out.add(c, a, b)
    return out


def double_tree_homes(ranks: tuple[int, ...], num_chunks: int) -> np.ndarray:
    """AllReduce homes for the double binary tree: chunk c is reduced at the root of tree c mod 2."""
    roots = [ranks[r] for r in tree_roots(len(ranks))]
    return np.array([roots[c % 2] for c in range(num_chunks)], dtype=np.int64)


def pairwise(problem: SpreadProblem) -> Messages:
    """Pairwise exchange AlltoAll: in stage s every member i sends what it has for member i+s."""
    require_shape(problem, "pairwise", "alltoall")
    ranks = problem.ranks
    n = len(ranks)
    pos = {v: i for i, v in enumerate(ranks)}
    holders, dests = single_holder(problem, "pairwise")
    rows = sorted(((pos[dests[c][0]] - pos[holders[c]]) % n, c) for c in range(problem.num_chunks)
                  if dests[c])
    out = Messages()
    for s, c in rows:
        out.add(c, holders[c], dests[c][0], s)
    return out


def hierarchical(problem: SpreadProblem) -> Messages:
    """ASTRA-sim-style multi-dimensional AllGather: a ring in the last dimension, then in each
    lower one down to dimension 0, one stage per dimension. Reversed it is the ReduceScatter
    up the dimensions, and the AllReduce is RS up, AllGather back down (``localBWAware``)."""
    require_shape(problem, "hierarchical", "allgather")
    machine = problem.machine
    n = machine.num_npus
    if sorted(problem.ranks) != list(range(n)):
        raise NotApplicable("hierarchical needs the communicator to be every NPU of the machine")
    dims = grid_dims(machine)
    if len(dims) < 2:
        raise NotApplicable("hierarchical needs a multi-dimensional machine (torus, mesh, "
                            "hypercube, ASTRA-sim network); the links of this one form no grid")
    holders, _ = single_holder(problem, "hierarchical")
    rows = []
    for c in range(problem.num_chunks):
        have = [holders[c]]
        for stage, d in enumerate(reversed(range(len(dims)))):
            size = dims[d]
            grown = []
            for v in have:
                x = coordinates(v, dims)
                for h in range(size - 1):
                    a, b = list(x), list(x)
                    a[d], b[d] = (x[d] + h) % size, (x[d] + h + 1) % size
                    rows.append((stage, h, c, npu_id(a, dims), npu_id(b, dims)))
                    grown.append(npu_id(b, dims))
            have += grown
    out = Messages()
    for stage, _, c, a, b in sorted(rows):
        out.add(c, a, b, stage)
    out.notes["dims"] = list(dims)
    return out
