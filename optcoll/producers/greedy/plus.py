"""tacos+: the TACOS link–chunk matching with a better choice of what to send (our improvement).

Plain TACOS serves a destination's missing chunks in random order on random free links. Its
typical loss on 2D tori is the last step: a node's final chunks turn out to be held by only one
of its neighbours and must queue on that one link. tacos+ keeps the same events and the same
causality, and changes only the choice at each destination (``_match``):

1. *Most constrained link first*: free incoming links are served in order of how few useful
   chunks they can bring (ties at random), so a link with one option is not starved by a link
   with many.
2. *Fewest remaining routes first*: on a link, chunks that no *other* in-neighbour holds come
   first; chunks another neighbour could also bring can wait.
3. *Rarest first*: among those, the chunk with the fewest holders machine-wide (in powers of
   two, the same granularity BitTorrent-style rarest-first needs), so no chunk lags behind.

The choices need only the neighbours' holdings and a per-chunk holder count: no distances, no
per-pair state, the same scaling as the plain greedy.

Where chunks must pass relays (switches, non-members, single-destination collectives) three more
choices decide where requests go, none of them by node id:

4. *Rotation order*: relay requests are issued round by round, round k asking for each chunk at
   the k-th node after its holder, and a token starting toward a switch serves the waiting
   requester served least so far: a switch's first wave reaches every GPU once.
5. *Routes by load*: a request takes the route of earliest estimated arrival from any node that
   holds the chunk or is already routed to get it, over links costed by delay plus the occupancy
   already routed over them, looking through switches to the GPUs behind them.
6. *Farthest first*: with one destination per chunk, a link carries the chunk whose destination
   is farthest away (rarity means nothing there).

Single-destination collectives without port limits skip the requests altogether: the compiled
router (``routes``) plans every chunk's route against the others' load and pushes the chunks
along them (routes by load for all chunks at once, where requests see one chunk at a time).
"""
from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from optcoll.producers.greedy import bits
from optcoll.producers.greedy.coverage import kernel_pays, routes_cover
from optcoll.producers.greedy.rotation import rotation_rounds, server_of
from optcoll.producers.greedy.engine import Engine
from optcoll.producers.spread import SpreadProblem
from optcoll.schedules.schedule import Schedule

#: needs x links up to which tacos+ routes relay requests by load (a Dijkstra per request,
#: about a second at this size); beyond it, requests route as the plain greedy does, except
#: inside a server the chunk already entered (a Dijkstra over the server's few nodes).
#: Single-destination collectives go through the compiled router (``routes``) where it applies.
ROUTING_BUDGET = 5 * 10**7


class PlusEngine(Engine):
    def __init__(self, problem: SpreadProblem, rng: np.random.Generator):
        super().__init__(problem, rng)
        counts = problem.pre.counts().tolist()
        self.holders = counts
        self.rarity = [0] * (max(counts, default=0).bit_length() + 1)
        for c, count in enumerate(counts):
            self.rarity[count.bit_length()] |= 1 << c
        # One destination per chunk (AlltoAll, Gather, Scatter): rarity says nothing there, the
        # chunk with the longest way still to go goes first. Hop counts from every node.
        self.farthest: list[list[float]] | None = None
        if problem.needs[0].size and np.all(problem.post.counts() == 1) and self.relays:
            self.dest = problem.post.nodes.tolist()
            self.farthest = problem.machine.hop_counts().tolist()
        self.inbound: dict[int, int] = {}  # plain node s * n + requester w -> tokens bound so far
        self.routed: dict[int, dict[int, float]] = {}  # chunk -> node -> its estimated arrival
        self.planned = [0.0] * problem.machine.num_links  # occupancy routed over each link
        self.routes_by_load = problem.needs[0].size * problem.machine.num_links <= ROUTING_BUDGET
        # Server (NVLink island) of every node, -1 for the network; None without servers.
        server = server_of(problem.machine)
        self.server: list[int] | None = None if server is None else server.tolist()
        self.entered: dict[int, set[int]] = {}  # chunk -> servers it is held in or routed into

    def assign(self, c: int, e: int, t: float) -> None:
        super().assign(c, e, t)
        before = self.holders[c]
        after = self.holders[c] = before + 1
        level = after.bit_length()
        if level != before.bit_length():
            bit = 1 << c
            self.rarity[level - 1] ^= bit
            if level == len(self.rarity):
                self.rarity.append(0)
            self.rarity[level] |= bit

    def initial_requests(self) -> list[tuple[int, int]]:
        """Rotation order: round k asks for each chunk at the k-th node after its first holder,
        so the first wave through a switch serves every node once instead of node 0 first."""
        need_c, need_v = self.p.needs
        holder = self.p.pre.nodes[self.p.pre.indptr[:-1]]
        server = None if self.server is None else np.asarray(self.server)
        rounds = rotation_rounds(server, holder[need_c], need_v, self.n,
                                        self.p.machine.num_npus)
        order = np.lexsort((need_c, rounds))
        return list(zip(need_c[order].tolist(), need_v[order].tolist()))

    def request(self, c: int, v: int) -> None:
        """v wants c: the route of earliest estimated arrival from any node that holds c or was
        already routed to get it, over links costed by delay plus the occupancy already planned
        on them (Dijkstra, ties at random). Looking past switches to the nodes behind them, a
        remote chunk enters a server once and spreads over its fabric, and the servers' NICs share
        the crossings, instead of every GPU pulling it over its own NIC."""
        if not self.routes_by_load and self.server is None:
            super().request(c, v)
            return
        starts = self.routed.get(c)
        if starts is None:
            starts = self.routed[c] = {int(h): 0.0 for h in self.p.pre.of(c)}
            if self.server is not None:
                self.entered[c] = {self.server[u] for u in starts} - {-1}
        if v in starts:
            return
        # A chunk already held in or routed into v's server reaches v inside it: the network
        # carries it into each server once and the server's fabric spreads it.
        island = (self.server[v] if self.server is not None and self.server[v] in self.entered[c]
                  else None)
        if island is None and not self.routes_by_load:
            # Too large to route by load: into a new server the plain greedy's way (closest
            # in-neighbour toward the holders), inside it by load as above.
            super().request(c, v)
            starts[v] = self.distances(c)[v]
            if self.server[v] >= 0:
                self.entered[c].add(self.server[v])
            return
        arrival = dict(starts)
        via: dict[int, int] = {}
        heap = [(t, self.random(), u) for u, t in starts.items()
                if island is None or self.server[u] == island]
        heapq.heapify(heap)
        while heap:
            t, _, u = heapq.heappop(heap)
            if u == v:
                break
            if t > arrival[u]:
                continue
            for e in self.out_links[u]:
                w = self.ldst[e]
                if island is not None and self.server[w] != island:
                    continue
                reach = t + self.delay[e] + self.planned[e]
                if reach < arrival.get(w, math.inf):
                    arrival[w], via[w] = reach, e
                    heapq.heappush(heap, (reach, self.random(), w))
        if v not in via:
            return  # unreachable: reported when the run gets stuck
        node = v
        while node not in starts:
            e = via[node]
            u = self.lsrc[e]
            self.planned[e] += self.busy[e]
            if not self.plain[node]:
                starts[node] = arrival[node]
                if self.server is not None and self.server[node] >= 0:
                    self.entered[c].add(self.server[node])
            if u not in starts:
                self.ask(c, u, node)
            node = u

    def bind(self, s: int, queue: deque[int]) -> int:
        """The waiting requester with the fewest tokens at or on their way to s (oldest first on
        ties): a switch's downlinks share the load instead of serving one requester at a time."""
        if len(queue) == 1:
            w = queue.popleft()
        else:
            base = s * self.n
            loads = [self.inbound.get(base + w, 0) for w in queue]
            i = loads.index(min(loads))
            w = queue[i]
            del queue[i]
        self.inbound[s * self.n + w] = self.inbound.get(s * self.n + w, 0) + 1
        return w

    def farthest_first(self, x: int, d: int) -> int:
        """A random chunk of x among those whose destination is farthest from d (in hops)."""
        hops = self.farthest[d]
        dest = self.dest
        best: list[int] = []
        most = -1.0
        for c in bits.members(x):
            h = hops[dest[c]]
            if h > most:
                best, most = [c], h
            elif h == most:
                best.append(c)
        return best[0] if len(best) == 1 else best[int(self.random() * len(best))]

    def rarest(self, x: int) -> int:
        """A random chunk of x among those with the fewest holders (by power of two)."""
        for level in self.rarity:
            y = x & level
            if y:
                return bits.kth_bit(y, int(self.random() * y.bit_count()))
        raise AssertionError("chunk set not covered by the rarity levels")

    def _neighbour_sets(self, d: int) -> dict[int, int]:
        """Chunks each in-neighbour of d holds for d (its buffer, or tokens for d)."""
        out: dict[int, int] = {}
        for e in self.in_links[d]:
            u = self.lsrc[e]
            if u not in out:
                out[u] = self.tokens.get(u * self.n + d, 0) if self.plain[u] else self.avail[u]
        return out

    def _match(self, d: int, t: float) -> None:
        """Free links into d, most constrained first; on each the rarest of the chunks only its
        source can bring (else of all it can bring). Every free link that can carry something
        useful does, as in TACOS; only the pairing differs."""
        offers = self.offers(d)
        if not offers:
            return
        cap = self.recv_cap[d] - self.receiving[d]
        held = self._neighbour_sets(d)
        sources = list(held)
        values = [held[u] for u in sources]
        # What every other in-neighbour holds, by prefix/suffix ORs (linear in the degree).
        prefix, suffix = [0], [0]
        for x in values:
            prefix.append(prefix[-1] | x)
        for x in reversed(values):
            suffix.append(suffix[-1] | x)
        k = len(values)
        # ~(what the others hold), so "only this neighbour has it" is one AND per offer
        not_others = {u: ~(prefix[i] | suffix[k - 1 - i]) for i, u in enumerate(sources)}
        while offers and cap > 0:
            best_key = None
            for offer in offers:
                e, x, count = offer
                only = x & not_others[self.lsrc[e]]
                key = (0, only.bit_count(), self.random()) if only else (1, count, self.random())
                if best_key is None or key < best_key:
                    best_key, best_offer, best_pool = key, offer, only or x
            c = self.rarest(best_pool) if self.farthest is None else self.farthest_first(best_pool, d)
            offers.remove(best_offer)
            self.assign(c, best_offer[0], t)
            cap -= 1
            offers = self.still_open(offers, c)


def spread_plus(problem: SpreadProblem, rng: np.random.Generator, compiled: bool | None = None
                ) -> Schedule:
    """tacos+ on one spread problem: through the kernel as ``spread_greedy`` decides
    (``coverage.kernel_pays``), else through the compiled router where it covers the problem
    (its own algorithm: it always runs compiled), else interpreted."""
    if kernel_pays(problem, compiled):
        from optcoll.producers.greedy import kernel  # numba: loaded only here

        return kernel.run(problem, rng, plus=True)
    if not routes_cover(problem):
        return PlusEngine(problem, rng).run()
    from optcoll.instances.kernels import may_run
    from optcoll.producers.greedy import routes  # numba: loaded only here

    if compiled is None and not may_run(routes):  # not compiled first under a job's clock
        return PlusEngine(problem, rng).run()
    return routes.run(problem, rng)
