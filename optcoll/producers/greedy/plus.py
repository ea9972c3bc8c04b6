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
"""
from __future__ import annotations

import numpy as np

from optcoll.producers.greedy import bits, kernel
from optcoll.producers.greedy.engine import Engine
from optcoll.producers.spread import SpreadProblem
from optcoll.schedules.schedule import Schedule


class PlusEngine(Engine):
    def __init__(self, problem: SpreadProblem, rng: np.random.Generator):
        super().__init__(problem, rng)
        counts = problem.pre.counts().tolist()
        self.holders = counts
        self.rarity = [0] * (max(counts, default=0).bit_length() + 1)
        for c, count in enumerate(counts):
            self.rarity[count.bit_length()] |= 1 << c

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
            c = self.rarest(best_pool)
            offers.remove(best_offer)
            self.assign(c, best_offer[0], t)
            cap -= 1
            offers = self.still_open(offers, c)


def spread_plus(problem: SpreadProblem, rng: np.random.Generator, compiled: bool = True
                ) -> Schedule:
    """tacos+ on one spread problem (``compiled``: through the kernel where it applies)."""
    if compiled and kernel.applicable(problem):
        return kernel.run(problem, rng, plus=True)
    return PlusEngine(problem, rng).run()
