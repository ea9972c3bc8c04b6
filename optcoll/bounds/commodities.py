"""A unicast collective as flow commodities, and what each link can carry of them in time T
(docs/model.md §5–§6; the multi-commodity-flow bound of ``optcoll.bounds.mcf`` rests on it).

*Unicast*: non-combining, and every chunk that must move has one holder and one destination
(AlltoAll, AlltoAllv, Scatter, Gather, MSCCL's AllToNext, custom point-to-point patterns). A copy
then serves no other destination, so in any valid schedule the chunk's bytes cross a whole path
from its holder to its destination, and summing them per link is a flow.

Commodities aggregate the (source, destination) pairs by source, or by destination when there
are fewer destinations (a Gather): either way the flow LP keeps its optimum, because one
source's flow to many destinations decomposes into paths ending at each of them in the right
amounts (and symmetrically for one destination).

**What a link can carry.** Link e = (u, v) can be used by a useful transfer only inside a
window: it starts no earlier than ``a_e``, the first moment u can hold a needed chunk (0 at a
holder, else the shortest delay from a holder), and the chunk must still reach a destination
after it, at least ``z_e`` later (0 at a destination). The transfer holds the link for ``busy``
and delivers ``delay − busy`` after releasing it (α with serialization occupancy, 0 with link
occupancy). So the transfers of e fit in ``T − L_e`` with ``L_e = a_e + z_e + (delay − busy)``.
A chunk of b bytes holds e for busy_e(b) ≥ b · busy_e(b_max)/b_max when b ≤ b_max (busy is α or
0 plus b/B), so ``w_ke = busy_e(b_k)/b_k``, b_k the largest chunk of commodity k, prices a byte
of k on e in seconds of link time without ever overcharging. Delays are taken at the smallest
chunk. Port limits are not used (the bound stays valid, maybe weaker).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine

if TYPE_CHECKING:
    import scipy.sparse as sp


@dataclass(frozen=True, eq=False)
class Commodities:
    """The moving chunks of a unicast collective, as (source, destination) pairs and commodities.

    Pairs are sorted by (source, destination); ``pair_bytes`` sums the pair's chunks and
    ``pair_smallest`` is its smallest chunk;
    ``commodity`` of a pair is the index of its source (``by == "source"``) or destination in
    ``origin``; ``largest`` is each commodity's largest chunk; ``smallest`` the smallest of all.
    """

    by: str
    origin: np.ndarray
    pair_src: np.ndarray
    pair_dst: np.ndarray
    pair_bytes: np.ndarray
    pair_smallest: np.ndarray
    commodity: np.ndarray
    largest: np.ndarray
    smallest: float

    @property
    def num(self) -> int:
        return int(self.origin.shape[0])

    @cached_property
    def holders(self) -> np.ndarray:
        return np.unique(self.pair_src)

    @cached_property
    def destinations(self) -> np.ndarray:
        return np.unique(self.pair_dst)

    def supply(self, num_nodes: int, which: np.ndarray | None = None) -> np.ndarray:
        """Net bytes each commodity (rows: ``which``, default all) puts into each node: its
        source sends, its destinations receive."""
        which = np.arange(self.num) if which is None else np.asarray(which)
        row_of = np.full(self.num, -1)
        row_of[which] = np.arange(which.size)
        out = np.zeros((which.size, num_nodes))
        keep = row_of[self.commodity] >= 0
        rows = row_of[self.commodity[keep]]
        np.add.at(out, (rows, self.pair_src[keep]), self.pair_bytes[keep])
        np.add.at(out, (rows, self.pair_dst[keep]), -self.pair_bytes[keep])
        return out

    @cached_property
    def uniform_complete(self) -> bool:
        """Every ordered pair of one member set moves the same bytes in equal chunks (AlltoAll):
        then any relabelling that keeps the member set keeps the demand."""
        members = self.holders
        return (np.array_equal(members, self.destinations) and self.by == "source"
                and self.pair_src.size == members.size * (members.size - 1)
                and bool(np.all(self.pair_bytes == self.pair_bytes[0]))
                and bool(np.all(self.largest == self.largest[0])))


def unicast_commodities(collective: Collective) -> Commodities | None:
    """The commodities of a unicast collective (module docstring), or None if it is not one."""
    if collective.combining:
        return None
    chunk, dest = collective.needs
    if chunk.size == 0 or np.unique(chunk).size != chunk.size:
        return None
    if np.any(collective.pre.counts()[chunk] != 1):
        return None
    source = collective.pre.nodes[collective.pre.indptr[chunk]]
    size = collective.sizes()[chunk]
    n = int(max(source.max(), dest.max())) + 1
    key = source * n + dest
    pairs, index = np.unique(key, return_inverse=True)
    pair_bytes = np.bincount(index, weights=size)
    pair_smallest = np.full(pairs.size, np.inf)
    np.minimum.at(pair_smallest, index, size)
    pair_src, pair_dst = pairs // n, pairs % n
    by = _aggregation(source, dest, size)
    ends = pair_src if by == "source" else pair_dst
    origin, commodity = np.unique(ends, return_inverse=True)
    chunk_commodity = np.searchsorted(origin, source if by == "source" else dest)
    largest = np.zeros(origin.size)
    np.maximum.at(largest, chunk_commodity, size)
    return Commodities(by, origin, pair_src, pair_dst, pair_bytes, pair_smallest, commodity, largest,
                       float(size.min()))


def _aggregation(source: np.ndarray, dest: np.ndarray, size: np.ndarray) -> str:
    """By source, unless there are fewer destinations (a Gather) or, with unequal chunks, some
    destination receives more than any source sends (hot receivers, as a popular expert in MoE
    traffic): the commodity's own windows (``LinkWindows.own``) then sharpen that side."""
    senders, receivers = np.unique(source).size, np.unique(dest).size
    if senders != receivers:
        return "source" if senders < receivers else "destination"
    if np.all(size == size[0]):
        return "source"
    sent, received = np.bincount(source, weights=size), np.bincount(dest, weights=size)
    return "destination" if received.max() > sent.max() else "source"


@dataclass(frozen=True, eq=False)
class LinkWindows:
    """Per link: ``lost`` = L_e (seconds of T the link cannot use), and per distinct largest chunk
    size, the seconds of link time one byte costs (``per_byte[j]`` for ``sizes[j]``).

    ``own`` (commodities × links, or None) is each commodity's own L_ke, from its own chunks'
    first possible start and last useful delivery: its transfers on e fit in T − L_ke, a second
    valid row wherever it exceeds L_e (a hot receiver's link cannot start before the first of its
    own chunks can reach it, which may be much later than the smallest chunk of all).
    """

    lost: np.ndarray
    sizes: np.ndarray
    per_byte: np.ndarray  # len(sizes) × links
    own: np.ndarray | None = None

    def cost(self, commodity_largest: float) -> np.ndarray:
        return self.per_byte[int(np.searchsorted(self.sizes, commodity_largest))]

    def capped(self, floor: float) -> "LinkWindows":
        """The windows with no link losing more than ``floor`` (unusable links stay unusable): a
        relaxation when every schedule takes at least ``floor`` (an LP row w·f ≤ T − L_e forces
        T ≥ L_e even on a link it leaves empty, which no schedule is bound by)."""
        def cap(lost: np.ndarray) -> np.ndarray:
            return np.where(np.isfinite(lost), np.minimum(lost, floor), lost)
        return LinkWindows(cap(self.lost), self.sizes, self.per_byte,
                           None if self.own is None else cap(self.own))

    @property
    def largest_loss(self) -> float:
        losses = [self.lost] + ([] if self.own is None else [self.own.ravel()])
        finite = np.concatenate([x[np.isfinite(x)] for x in losses])
        return float(finite.max(initial=0.0))


def simple_graph(machine: Machine, weight: np.ndarray, reverse: bool = False) -> sp.csr_matrix:
    """The machine as a csr matrix with the least weight over parallel links; zero weights stay
    edges (scipy's shortest paths treat explicit zeros as edges)."""
    import scipy.sparse as sp  # the flow bounds' graphs: loaded when a unicast collective needs them

    n = machine.num_nodes
    src, dst = (machine.link_dst, machine.link_src) if reverse else (machine.link_src, machine.link_dst)
    key = src.astype(np.int64) * n + dst
    order = np.lexsort((weight, key))
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    pick = order[first]
    return sp.csr_matrix((weight[pick].astype(float), (src[pick], dst[pick])), shape=(n, n))


def link_windows(machine: Machine, demand: Commodities, model: TimeModel) -> LinkWindows:
    """L_e and the byte costs w of the module docstring."""
    from scipy.sparse.csgraph import dijkstra

    timing = model.link_timing(machine, demand.smallest)
    delay = timing.delay
    ahead = dijkstra(simple_graph(machine, delay), indices=demand.holders, min_only=True)
    behind = dijkstra(simple_graph(machine, delay, reverse=True), indices=demand.destinations,
                      min_only=True)
    lost = ahead[machine.link_src] + behind[machine.link_dst] + (delay - timing.busy)
    sizes = np.unique(demand.largest)
    per_byte = np.stack([model.link_timing(machine, float(b)).busy / b for b in sizes])
    own = None
    if not demand.uniform_complete and demand.pair_src.size * machine.num_links <= OWN_WINDOW_WORK:
        own = _own_windows(machine, demand, model) + (delay - timing.busy)
    return LinkWindows(lost, sizes, per_byte, own)


#: Commodity windows are computed when pairs × links stays below this (they cost that much).
OWN_WINDOW_WORK = 20_000_000


def _own_windows(machine: Machine, demand: Commodities, model: TimeModel) -> np.ndarray:
    """a_ke + z_ke per commodity and link, with each pair's smallest chunk: a path's delay at b
    bytes is Σα + b·Σ1/B ≥ (least Σα) + b·(least Σ1/B), so distances by latency and by inverse
    bandwidth bound every chunk's own delay from below."""
    from scipy.sparse.csgraph import dijkstra

    zero = model.link_timing(machine, 0.0).delay
    per_byte = model.link_timing(machine, 1.0).delay - zero
    graphs = [simple_graph(machine, weight) for weight in (zero, per_byte)]
    ends = np.unique(np.concatenate([demand.pair_src, demand.pair_dst]))
    row = np.searchsorted(ends, np.arange(machine.num_nodes)).clip(0, ends.size - 1)
    forward = [dijkstra(graph, indices=ends) for graph in graphs]
    backward = [dijkstra(graph.T.tocsr(), indices=ends) for graph in graphs]
    u, v = machine.link_src, machine.link_dst
    out = np.full((demand.num, machine.num_links), np.inf)
    for k in range(demand.num):
        pairs = np.flatnonzero(demand.commodity == k)
        s, d, b = (row[demand.pair_src[pairs]], row[demand.pair_dst[pairs]],
                   demand.pair_smallest[pairs, None])
        first = forward[0][s][:, u] + b * forward[1][s][:, u]
        last = backward[0][d][:, v] + b * backward[1][d][:, v]
        out[k] = np.min(first, axis=0) + np.min(last, axis=0)
    return out

