"""The cluster an AxoNN configuration runs on: nodes of GPUs on NVLink, NICs to a spine.

One description feeds both yardsticks: the ring model reads the intra-node bandwidth and the
node's injection bandwidth from it, and ``machine`` builds the real network
(``generators.multinode``) on which optcoll's bounds and verified schedules are computed.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any

from optcoll.errors import InputError
from optcoll.inputfiles import read_toml
from optcoll.machines.modelpaths import model_path
from optcoll.machines.generators import GENERATORS, multinode
from optcoll.machines.machine import Machine
from optcoll.machines.modelfile import machine_from_dict
from optcoll.machines.sources import unwrap_sources
from optcoll.units import parse_bandwidth, parse_time

_PARSE = {"bandwidth": parse_bandwidth, "latency": parse_time}


@dataclass(frozen=True)
class Cluster:
    """``generators.multinode``'s parameters (bytes/s, seconds), plus a name for reports.

    NPU id = node · gpus_per_node + local GPU, as the generator numbers them.
    """

    nodes: int
    gpus_per_node: int
    nvlink_bandwidth: float
    nvlink_latency: float
    nic_bandwidth: float
    nic_latency: float
    gpus_per_nic: int = 1
    pcie_bandwidth: float | None = None
    pcie_latency: float = 0.0
    multicast: bool = False
    reduce: bool = False
    intra: str = "nvswitch"
    name: str = ""

    def __post_init__(self) -> None:
        self.machine  # the generator checks every field and names the bad one

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @cached_property
    def machine(self) -> Machine:
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}
        built = multinode(**kwargs)
        return built.renamed(self.name, built.description) if self.name else built

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node

    @property
    def intra_bandwidth(self) -> float:
        """What one GPU can send into its node's NVLink fabric (B/s): a ring inside a node runs
        at this rate on a switch fabric (on a full mesh only with one ring per peer)."""
        return self.nvlink_bandwidth

    @property
    def node_injection_bandwidth(self) -> float:
        """What a node can send to the spine at once (B/s): its NICs, each capped by the PCIe
        links feeding it when NICs are shared."""
        per_nic = self.nic_bandwidth
        if self.gpus_per_nic > 1:
            pcie = self.nic_bandwidth if self.pcie_bandwidth is None else self.pcie_bandwidth
            per_nic = min(per_nic, self.gpus_per_nic * pcie)
        return (self.gpus_per_node // self.gpus_per_nic) * per_nic

    def with_gpus(self, gpus: int) -> "Cluster":
        """The same kind of node, as many of them as ``gpus`` needs."""
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise InputError(f"must be a positive integer, got {gpus!r}", field="gpus")
        if gpus % self.gpus_per_node:
            raise InputError(f"{gpus} GPUs do not fill whole nodes of {self.gpus_per_node}",
                             field="gpus")
        return replace(self, nodes=gpus // self.gpus_per_node)


def cluster_from_model(ref: str, gpus: int | None = None) -> Cluster:
    """A ``Cluster`` from a machine-model file (path or built-in name) whose ``[topology]`` is a
    ``multinode`` generator call; ``gpus`` (when given) replaces its node count."""
    path = model_path(ref)
    source = str(path)
    try:
        data: dict[str, Any] = read_toml(path)
    except InputError as exc:  # the --machine option names it
        raise exc.located(field="machine") from None
    topology = unwrap_sources(data, source)[0].get("topology")
    if not isinstance(topology, dict) or topology.get("kind") != "multinode":
        raise InputError("the AxoNN analysis needs a cluster of nodes: [topology] kind = \"multinode\"",
                         source=source, field="topology.kind")
    if "failures" in data:
        raise InputError("the AxoNN analysis needs an intact cluster (its ring model knows no "
                         "failed links)", source=source, field="failures")
    machine_from_dict(data, source, path.stem)  # every field checked, errors name the file
    spec = GENERATORS["multinode"]
    values = {p.name: _PARSE.get(p.type, lambda v: v)(topology[p.name])
              for p in spec.params if p.name in topology}
    name = data.get("machine", {}).get("name", path.stem)
    cluster = Cluster(**values, name=name)
    if gpus is None:
        return cluster
    try:
        return cluster.with_gpus(gpus)
    except InputError as exc:
        raise exc.located(source) from None
