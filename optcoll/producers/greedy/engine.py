"""The event-driven link–chunk matching of TACOS (FIELD-NOTES section 4), on any machine.

At every event time, each (chunk, destination) pair still missing, in a random order, takes the
free incoming link whose source holds the chunk *now* and whose delivery is earliest (ties at
random); the link is then busy until the transfer's occupancy ends, a new event. Holdings change
only when a transfer is delivered, so a transfer can carry only what its source held when it
started, on heterogeneous links too.

Per destination the random order needs no global shuffle: links into different destinations
never compete, and a pair skipped because none of its links is free stays skipped (links only
get busier within an event), so the next pair to be served is uniform among the pairs that *can*
be served. ``Engine._match`` draws exactly that, so the work per event is proportional to the
transfers it starts, not to the pairs still missing: the reason it scales to thousands of NPUs.

Beyond TACOS (which knows only NPU-to-NPU AllGather) the engine routes through nodes that do not
want a chunk: switches, NPUs outside a sub-communicator, ranks that are not a Gather's root. When
no in-neighbour of a node closer to the chunk's source will get the chunk anyway, the node asks
the closest such in-neighbour to pull it (recursively), one request per forward at nodes that
forward each arrival only once (``FIFO``/``EXCLUSIVE`` modes, see ``optcoll.producers.spread``).
"""
from __future__ import annotations

import heapq
import math
from array import array
from collections import deque

import numpy as np

from optcoll.instances.clock import check_current
from optcoll.producers.base import NotApplicable
from optcoll.producers.greedy import bits
from optcoll.producers.greedy.coverage import kernel_pays
from optcoll.producers.greedy.distance import ChunkDistances, chunk_distances
from optcoll.producers.spread import COPY, EXCLUSIVE, SpreadProblem
from optcoll.schedules.schedule import Schedule, from_arrays

# Event kinds: a delivery that also frees its link (link occupancy), a delivery alone, a release.
ARRIVE_FREE, ARRIVE, FREE = 0, 1, 2
_RANDOM_BATCH = 1 << 14


class Engine:
    """One greedy run over a spread problem; ``run()`` returns the schedule."""

    def __init__(self, problem: SpreadProblem, rng: np.random.Generator):
        self.p = problem
        self.rng = rng
        m = problem.machine
        n = self.n = m.num_nodes
        self.K = problem.num_chunks
        self.lsrc = m.link_src.tolist()
        self.ldst = m.link_dst.tolist()
        self.delay = problem.delay.tolist()
        self.busy = problem.busy.tolist()
        self.same_release = bool(np.all(problem.delay == problem.busy))
        # A dual's port window ends with the transfer's delivery (``SpreadProblem.port_shift``):
        # ports are then held from the start to the delivery, which covers it.
        self.late_ports = (problem.reversed and not self.same_release
                           and bool(problem.send_ports or problem.recv_ports))
        self.in_links = [a.tolist() for a in m.in_links]
        self.out_links = [a.tolist() for a in m.out_links]
        self.mode = problem.mode.tolist()
        self.plain = [md != COPY for md in self.mode]
        self.any_plain = any(self.plain)
        self.relays = problem.has_relays
        self.general = self.any_plain or bool(problem.send_ports) or bool(problem.recv_ports)
        self.link_free = [True] * m.num_links
        self.free_in = [list(links) for links in self.in_links]
        num_npus = m.num_npus
        self.send_cap = [problem.send_ports if v < num_npus and problem.send_ports else math.inf
                         for v in range(n)]
        self.recv_cap = [problem.recv_ports if v < num_npus and problem.recv_ports else math.inf
                         for v in range(n)]
        self.sending = [0] * n
        self.receiving = [0] * n
        pre_c, pre_v = problem.pre.pairs()
        need_c, need_v = problem.needs
        self.avail = bits.per_node(pre_c, pre_v, n, self.K)  # COPY nodes: held chunks
        self.have = list(self.avail)  # held or on the way (COPY nodes)
        self.need = bits.per_node(need_c, need_v, n, self.K)  # a destination's own needs
        self.want = list(self.need)  # wanted and not yet on the way
        self.remaining = int(need_c.size)
        self.tokens: dict[int, int] = {}  # plain nodes: u*n + w -> chunks held for w
        self.token_count: dict[int, int] = {}  # (u*n + w)*K + c -> how many
        self.requests: dict[int, deque[int]] = {}  # FIFO nodes: c*n + u -> requesters in order
        self.token_out: set[int] = set()  # EXCLUSIVE nodes: c*n + u while a token is held/coming
        self.events: dict[float, list[tuple[int, int, int, int]]] = {}
        self.heap: list[float] = []
        self.dirty: set[int] = set()
        # The schedule as compact typed columns: 16 bytes per transfer, not ~100 as Python lists.
        self.out_chunk = array("q")
        self.out_link = array("q")
        self.out_start = array("d")
        self._randoms: list[float] = []
        self._distances: ChunkDistances | None = None
        self._dist_rows: dict[int, list[float]] = {}

    # -- randomness -------------------------------------------------------------------------
    def random(self) -> float:
        """A uniform float in [0, 1), drawn from the seeded generator in batches."""
        if not self._randoms:
            self._randoms = self.rng.random(_RANDOM_BATCH).tolist()
        return self._randoms.pop()

    # -- the run ----------------------------------------------------------------------------
    def initial_requests(self) -> list[tuple[int, int]]:
        """(chunk, destination) pairs in the order their relay requests are issued at t = 0:
        by destination, then chunk."""
        return [(c, v) for v, need in enumerate(self.need) for c in bits.members(need)]

    def run(self) -> Schedule:
        """The schedule; under a solver's clock (a start schedule), until it ends (``check_current``)."""
        if self.p.has_relays:
            for i, (c, v) in enumerate(self.initial_requests()):
                if i % 1024 == 0:
                    check_current()
                self.request(c, v)
        self.dirty |= {v for v in range(self.n) if self.want[v]}
        t = 0.0
        while True:
            while self.dirty:  # matching may re-open a node at the same instant
                order = sorted(self.dirty)
                self.dirty = set()
                if len(order) > 1:
                    order = [order[i] for i in self.rng.permutation(len(order)).tolist()]
                for d in order:
                    if self.want[d] and self.free_in[d]:
                        check_current()  # at each match and event, not every k: one instant may hold seconds of matches
                        self._match(d, t)
            if self.remaining == 0:
                break
            if not self.heap:
                self._stuck()
            t = heapq.heappop(self.heap)
            check_current()
            self._apply(self.events.pop(t))
        return from_arrays(np.frombuffer(self.out_chunk, dtype=np.int64),
                           np.frombuffer(self.out_link, dtype=np.int64),
                           np.frombuffer(self.out_start, dtype=np.float64))

    def _apply(self, records: list[tuple[int, int, int, int]]) -> None:
        """Delivers and releases what the records say; marks the nodes worth matching again."""
        dirty, ldst, avail, plain = self.dirty, self.ldst, self.avail, self.plain
        link_free, free_in = self.link_free, self.free_in
        gained: dict[int, int] = {}
        for kind, e, c, tag in records:
            d = ldst[e]
            if kind != FREE:
                if plain[d]:
                    self._token_arrived(d, c, tag)
                else:
                    bit = 1 << c
                    avail[d] |= bit
                    gained[d] = gained.get(d, 0) | bit
            if kind != ARRIVE:
                link_free[e] = True
                free_in[d].append(e)
                dirty.add(d)
            if self.general and (kind != FREE if self.late_ports else kind != ARRIVE):
                u = self.lsrc[e]
                self.receiving[d] -= 1
                dirty.add(d)
                if self.sending[u] == self.send_cap[u]:
                    dirty.update(ldst[f] for f in self.out_links[u])
                self.sending[u] -= 1
        want, out_links = self.want, self.out_links
        for v, got in gained.items():
            for e in out_links[v]:
                if link_free[e]:
                    w = ldst[e]
                    if want[w] & got:
                        dirty.add(w)

    def _stuck(self) -> None:
        for v, want in enumerate(self.want):
            missing = want & self.need[v]
            if missing:
                c = bits.kth_bit(missing, 0)
                raise NotApplicable(
                    f"chunk {c} cannot reach node {self.p.machine.label(v)}: no path from a node "
                    f"that holds it (failed links or a disconnected network?)")
        raise AssertionError("greedy stopped with needs left but nothing wanted")

    # -- matching ---------------------------------------------------------------------------
    def offers(self, d: int) -> list[list[int]]:
        """[link, chunks, how many] for every free link into d whose source may send now and
        holds something d wants (popcounts are kept, not recounted: on 4096-chunk sets a count
        costs more than an AND)."""
        wd, lsrc = self.want[d], self.lsrc
        if not self.general:
            avail = self.avail
            return [[e, x, x.bit_count()] for e in self.free_in[d] if (x := avail[lsrc[e]] & wd)]
        out = []
        for e in self.free_in[d]:
            u = lsrc[e]
            if self.sending[u] >= self.send_cap[u]:
                continue
            x = (self.tokens.get(u * self.n + d, 0) if self.plain[u] else self.avail[u]) & wd
            if x:
                out.append([e, x, x.bit_count()])
        return out

    def _match(self, d: int, t: float) -> None:
        """TACOS: a uniformly random servable pair, then its earliest-arriving free link.

        The pair is drawn as a uniform (offer, chunk) pair accepted with probability one over
        the number of offers holding the chunk: uniform over the union, without building it.
        """
        offers = self.offers(d)
        cap = self.recv_cap[d] - self.receiving[d]
        delay, random, kth_bit = self.delay, self.random, bits.kth_bit
        while offers and cap > 0:
            if len(offers) == 1:
                e, x, count = offers[0]
                self.assign(kth_bit(x, int(random() * count)), e, t)
                return
            total = sum(offer[2] for offer in offers)
            while True:
                r = random() * total
                for _, x, count in offers:
                    if r < count:
                        break
                    r -= count
                c = kth_bit(x, int(r))
                bit = 1 << c
                holding = [offer for offer in offers if offer[1] & bit]
                if len(holding) == 1 or random() * len(holding) < 1.0:
                    break
            best: list[list[int]] = []
            best_delay = math.inf
            for offer in holding:
                de = delay[offer[0]]
                if de < best_delay:
                    best, best_delay = [offer], de
                elif de == best_delay:
                    best.append(offer)
            chosen = best[0] if len(best) == 1 else best[int(random() * len(best))]
            offers.remove(chosen)
            self.assign(c, chosen[0], t)
            cap -= 1
            offers = self.still_open(offers, c)

    def still_open(self, offers: list[list[int]], c: int) -> list[list[int]]:
        """Offers after chunk c was taken: c removed, senders out of send ports dropped."""
        bit = 1 << c
        out = []
        for offer in offers:
            if self.general and self.sending[self.lsrc[offer[0]]] >= self.send_cap[self.lsrc[offer[0]]]:
                continue
            if offer[1] & bit:
                offer[1] ^= bit
                offer[2] -= 1
            if offer[2]:
                out.append(offer)
        return out

    def assign(self, c: int, e: int, t: float) -> None:
        """Starts chunk c on link e at time t and books its delivery and release."""
        d = self.ldst[e]
        self.out_chunk.append(c)
        self.out_link.append(e)
        self.out_start.append(t)
        self.link_free[e] = False
        self.free_in[d].remove(e)
        tag = -1
        if self.general:
            tag = self._assign_general(c, e, d)
        else:
            self.want[d] ^= 1 << c
            if self.relays:
                self.have[d] |= 1 << c
                if self.need[d] >> c & 1:
                    self.remaining -= 1
            else:
                self.remaining -= 1
        arrive = t + self.delay[e]
        self._push(arrive, (ARRIVE_FREE if self.same_release else ARRIVE, e, c, tag))
        if not self.same_release:
            self._push(t + self.busy[e], (FREE, e, c, tag))

    def _assign_general(self, c: int, e: int, d: int) -> int:
        """assign's bookkeeping for port limits and plain nodes; returns the token's requester."""
        u = self.lsrc[e]
        bit = 1 << c
        self.sending[u] += 1
        self.receiving[d] += 1
        if self.plain[u]:
            self._token_sent(u, d, c)
        if self.plain[d]:
            return self._token_incoming(d, c)
        self.want[d] &= ~bit
        self.have[d] |= bit
        if self.need[d] & bit:
            self.remaining -= 1
        if self.any_plain:
            self._release_tokens_for(d, c)
        return -1

    def _push(self, t: float, record: tuple[int, int, int, int]) -> None:
        bucket = self.events.get(t)
        if bucket is None:
            self.events[t] = [record]
            heapq.heappush(self.heap, t)
        else:
            bucket.append(record)

    # -- nodes that forward each arrival once (FIFO / EXCLUSIVE) -----------------------------
    def _token_incoming(self, s: int, c: int) -> int:
        """A token of c starts toward plain node s: it is for the oldest requester still waiting."""
        key = c * self.n + s
        queue = self.requests[key]
        tag = self.bind(s, queue)
        if self.mode[s] == EXCLUSIVE:
            self.token_out.add(key)
            self.want[s] &= ~(1 << c)
        elif not queue:
            self.want[s] &= ~(1 << c)
        return tag

    def bind(self, s: int, queue: deque[int]) -> int:
        """The requester a token starting toward plain node s serves (removed from the queue):
        the oldest."""
        return queue.popleft()

    def _waits(self, w: int, c: int) -> bool:
        """Whether requester w still waits for a token of c."""
        if self.plain[w]:
            return bool(self.requests.get(c * self.n + w))
        return bool(self.want[w] >> c & 1)

    def _token_arrived(self, s: int, c: int, tag: int) -> None:
        if self._waits(tag, c):
            key = s * self.n + tag
            self.tokens[key] = self.tokens.get(key, 0) | 1 << c
            count_key = key * self.K + c
            self.token_count[count_key] = self.token_count.get(count_key, 0) + 1
            self.dirty.add(tag)
        else:  # the requester got c elsewhere meanwhile: this token is spare (pruned later)
            self._token_done(s, c)

    def _token_sent(self, s: int, w: int, c: int) -> None:
        key = s * self.n + w
        count_key = key * self.K + c
        left = self.token_count[count_key] - 1
        if left:
            self.token_count[count_key] = left
        else:
            del self.token_count[count_key]
            self.tokens[key] &= ~(1 << c)
        self._token_done(s, c)

    def _token_done(self, s: int, c: int) -> None:
        """An EXCLUSIVE node no longer holds a token of c: it may take the next one."""
        key = c * self.n + s
        if self.mode[s] == EXCLUSIVE and key in self.token_out:
            self.token_out.discard(key)
            if self.requests[key]:
                self.want[s] |= 1 << c
                self.dirty.add(s)

    def _release_tokens_for(self, w: int, c: int) -> None:
        """COPY node w now gets c: plain in-neighbours drop w's requests, and the token they hold
        for w is spare (a token still on its way is recognised as spare when it arrives)."""
        bit = 1 << c
        for e in self.in_links[w]:
            s = self.lsrc[e]
            if not self.plain[s]:
                continue
            queue = self.requests.get(c * self.n + s)
            if queue and w in queue:
                queue.remove(w)
                if not queue:
                    self.want[s] &= ~bit
            key = s * self.n + w
            if self.token_count.pop(key * self.K + c, 0):
                self.tokens[key] &= ~bit
                self._token_done(s, c)

    # -- routing through relays -------------------------------------------------------------
    def distances(self, c: int) -> list[float]:
        """Shortest delivery time from c's nearest holder to every node (a cached list)."""
        if self._distances is None:
            self._distances = chunk_distances(self.p)
        row = int(self._distances.row_of[c])
        out = self._dist_rows.get(row)
        if out is None:
            out = self._dist_rows[row] = self._distances.rows[row].tolist()
        return out

    def request(self, c: int, v: int) -> None:
        """v wants c: unless an in-neighbour closer to c's holders will have c anyway, ask the
        closest one to pull it (ties at random), and so on toward the holders."""
        dist = self.distances(c)
        bit = 1 << c
        while True:
            dv = dist[v]
            closest: list[int] = []
            best = math.inf
            for e in self.in_links[v]:
                u = self.lsrc[e]
                du = dist[u]
                if du >= dv:
                    continue
                if not self.plain[u] and (self.have[u] | self.want[u]) & bit:
                    return
                if du < best:
                    closest, best = [u], du
                elif du == best and u not in closest:
                    closest.append(u)
            if not closest:
                return  # unreachable: reported when the run gets stuck
            u = closest[0] if len(closest) == 1 else closest[int(self.random() * len(closest))]
            self.ask(c, u, v)
            v = u

    def ask(self, c: int, u: int, requester: int) -> None:
        """Relay u is to pull c for its out-neighbour ``requester`` (one request per forward at
        nodes that forward each arrival once)."""
        bit = 1 << c
        if self.plain[u]:
            key = c * self.n + u
            self.requests.setdefault(key, deque()).append(requester)
            if not (self.mode[u] == EXCLUSIVE and key in self.token_out):
                self.want[u] |= bit
        else:
            self.want[u] |= bit


def spread_greedy(problem: SpreadProblem, rng: np.random.Generator, compiled: bool | None = None
                  ) -> Schedule:
    """The plain TACOS-style greedy on one spread problem, through the compiled kernel where it
    covers the problem and (``compiled`` None) is big enough to pay for loading it
    (``coverage.kernel_pays``); the same schedule either way."""
    if kernel_pays(problem, compiled):
        from optcoll.producers.greedy import kernel  # numba: loaded only here

        return kernel.run(problem, rng, plus=False)
    return Engine(problem, rng).run()
