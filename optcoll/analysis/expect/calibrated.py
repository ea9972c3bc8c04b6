"""The calibrated machine: the same graph with what a runtime achieves on each link.

A ``CalibratedMachine`` is its own type (never a ``Machine`` a bound could be computed on): the
physical model's links rated by ``optcoll.machines.calibration`` for one protocol. Links inside a
node (its NVLinks or Infinity Fabric, and its NVSwitch) get the generation's link efficiency and
the protocol's NVLink step latency, split over the hops of one GPU-to-GPU step (two through a
switch); the other links (NICs, leaves, spine) the network efficiency and step latency, split the
same way. The step latencies are a ring step's, or for NCCL's tree (``tree``) a tree level's:
NCCL's tuning model rates the two differently (``calibration.Protocol.steps``); on more than one
node a ring's in-node step costs at least the host's network post overhead
(``calibration.net_overhead``, NCCL's getNetOverhead). Schedules that reduce in a switch (NVLS)
run its links at the generation's NVLS efficiency. Every link's bandwidth also carries the
protocol's payload efficiency. The time model
is ``serialization``: α is pipelined propagation (one step latency per hop), a link is busy only
while it moves bytes. Without ``innetwork`` the switches only route (no multicast, no reduction:
``routing_view``): a runtime that does not use NVLS gets neither its function nor its cost, and
the verifier refuses a schedule that would.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from optcoll.instances.instance import TimeModel
from optcoll.interop.msccl.routes import routing_view
from optcoll.machines.calibration import NET_EFFICIENCY, Generation, Protocol, ll_max_busbw, net_overhead
from optcoll.machines.machine import Machine
from optcoll.producers.baselines.nccl.topology import NcclTopology, nccl_topology

TIME_MODEL = TimeModel(occupancy="serialization")


@dataclass(frozen=True, eq=False)
class CalibratedMachine:
    """A physical machine rated for one protocol of one GPU generation (module docstring)."""

    physical: Machine
    generation: Generation
    protocol: Protocol
    innetwork: bool  # links of reducing switches at NVLS efficiency
    #: What a channel's per-step synchronisation leaves of the rate (``slice_rate``), on the links
    #: a GPU sends on inside its node
    rate: float = 1.0
    #: Step latencies of one level of NCCL's tree (``Protocol.steps``), not of a ring step
    tree: bool = False
    #: The same on the links a GPU sends on into the network (its slices take longer there)
    net_rate: float = 1.0

    @cached_property
    def topology(self) -> NcclTopology:
        return nccl_topology(self.physical, list(self.physical.npus))

    @cached_property
    def scale_up(self) -> np.ndarray:
        """Per link: inside one node (its members and its fabric switch)."""
        m = self.physical
        node_of = np.full(m.num_nodes, -1)
        for i, node in enumerate(self.topology.nodes):
            node_of[list(node)] = i
            if self.topology.fabrics[i] is not None:
                node_of[self.topology.fabrics[i]] = i
        a, b = node_of[m.link_src], node_of[m.link_dst]
        return (a >= 0) & (a == b)

    @cached_property
    def machine(self) -> Machine:
        m, p, g = self.physical, self.protocol, self.generation
        switch_end = np.array([m.is_switch(int(u)) or m.is_switch(int(v))
                               for u, v in zip(m.link_src, m.link_dst)], dtype=bool)
        both_switch = np.array([m.is_switch(int(u)) and m.is_switch(int(v))
                                for u, v in zip(m.link_src, m.link_dst)], dtype=bool)
        up = self.scale_up
        payload = g.ll128_payload if p.name == "ll128" and g.ll128_payload is not None else p.payload
        efficiency = np.where(up, g.link_efficiency.value, NET_EFFICIENCY.value) * payload.value
        nvlink, net = p.steps(self.tree)
        intra = nvlink.value
        if not self.tree and self.topology.num_nodes > 1:  # a ring step across nodes: the host's post
            intra = max(intra, net_overhead(m.name).value * (3 if p.name == "simple" else 1))
        step = np.where(up, intra, net.value) * 1e-6
        latency = np.where(both_switch, 0.0, np.where(switch_end, step / 2, step))
        bandwidth = m.link_bandwidth * efficiency
        if self.innetwork and g.nvls_efficiency.value > 0:
            reducing = np.array([any(m.is_switch(int(x)) and m.switch(int(x)).reduce for x in (u, v))
                                 for u, v in zip(m.link_src, m.link_dst)], dtype=bool)
            bandwidth = np.where(reducing, bandwidth * g.nvls_efficiency.value, bandwidth)
        if p.name == "ll":  # NCCL caps LL's bus bandwidth per GPU (llMaxBws): spread over its links
            bandwidth = self._capped(bandwidth, ll_max_busbw(g, m.name, self.topology.num_nodes).value * 1e9)
        # A channel's per-step synchronisation holds the sending GPU (of what its protocol moves),
        # not a switch forwarding the step: on links a GPU sends on only.
        sends = np.array([not m.is_switch(int(u)) for u in m.link_src], dtype=bool)
        bandwidth = np.where(sends, bandwidth * np.where(up, self.rate, self.net_rate), bandwidth)
        return replace(m if self.innetwork else routing_view(m), link_latency=latency, link_bandwidth=bandwidth,
                       name=f"{m.name} [calibrated {g.name}/{p.name}{'/nvls' if self.innetwork else ''}"
                       f"{'/tree' if self.tree else ''}"
                       f"{f' x{self.rate:.3g}' if self.rate != 1.0 else ''}"
                       f"{f' net x{self.net_rate:.3g}' if self.net_rate != 1.0 else ''}]")

    def _capped(self, bandwidth: np.ndarray, per_npu: float) -> np.ndarray:
        m = self.physical
        out = bandwidth.copy()
        for v in m.npus:
            for links in (m.out_links[v], m.in_links[v]):
                total = float(out[links].sum())
                if total > per_npu:
                    out[links] *= per_npu / total
        return out
