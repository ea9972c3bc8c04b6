"""Routes a runtime's peer-to-peer transfer takes on a machine: through switches only.

A GPU writes to or reads from a peer over NVLink, Infinity Fabric or its NIC; no other GPU relays
it. The route is the machine's path of fewest hops (then least latency) whose inner nodes are all
switches; between the same pair a channel ``lane`` picks among parallel links hop by hop. NVLS
groups use the switch that reduces and multicasts and links to and from every member.
"""
from __future__ import annotations

import heapq

from optcoll.errors import InputError
from optcoll.machines.machine import Machine


class Routes:
    def __init__(self, machine: Machine):
        self.machine = machine
        self._paths: dict[tuple[int, int], list[int]] = {}

    def path(self, src: int, dst: int, lane: int = 0) -> list[int]:
        """Link ids from node ``src`` to node ``dst`` (GPU NPU ids or switch nodes)."""
        if (src, dst) not in self._paths:
            self._paths[(src, dst)] = self._search(src, dst)
        hops = self._paths[(src, dst)]
        m = self.machine
        out = []
        for e in hops:
            parallel = m.links_between(int(m.link_src[e]), int(m.link_dst[e]))
            out.append(parallel[lane % len(parallel)])
        return out

    def latency(self, src: int, dst: int) -> float:
        """How long a signal takes from ``src`` to ``dst``: its route's link latencies (lane 0)."""
        return sum(float(self.machine.link_latency[e]) for e in self.path(src, dst))

    def _search(self, src: int, dst: int) -> list[int]:
        m = self.machine
        best: dict[int, tuple[int, float]] = {src: (0, 0.0)}
        back: dict[int, int] = {}
        heap = [(0, 0.0, src)]
        while heap:
            hops, lat, v = heapq.heappop(heap)
            if v == dst:
                break
            if (hops, lat) > best[v] or (v != src and not m.is_switch(v)):
                continue
            for e in m.out_links[v]:
                w = int(m.link_dst[e])
                cost = (hops + 1, lat + float(m.link_latency[e]))
                if w not in best or cost < best[w]:
                    best[w], back[w] = cost, int(e)
                    heapq.heappush(heap, (*cost, w))
        if dst not in back:
            raise InputError(f"machine {m.name!r} has no route from {m.label(src)} to {m.label(dst)} through "
                             "switches only (a runtime's transfer is never relayed by another GPU)", field="machine")
        path, v = [], dst
        while v != src:
            path.append(back[v])
            v = int(m.link_src[back[v]])
        return path[::-1]

    def switch_of(self, members: list[int]) -> int:
        """The switch that reduces and multicasts with links to and from every member (NVLS)."""
        m = self.machine
        for s in range(m.num_npus, m.num_nodes):
            sw = m.switch(s)
            if sw.reduce and sw.multicast and all(m.links_between(v, s) and m.links_between(s, v) for v in members):
                return s
        raise InputError(f"machine {m.name!r} has no switch that reduces and multicasts (NVLS) with links to and "
                         f"from NPUs {members}; the plan's switch channel needs one", field="machine")
