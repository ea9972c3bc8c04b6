"""ASTRA-sim 2.0 ``network.yml``: read it into a machine, and write a machine back when expressible
(exactly, or as its NPU-facing dimensions with what is left out named: ``network_view``).

The file holds equal-length lists, one entry per dimension (dimension 0 varies fastest in NPU
ids): ``topology`` (Ring | FullyConnected | Switch), ``npus_count`` (> 1), ``bandwidth`` and
``latency``. ASTRA-sim's analytical backend converts ``bandwidth`` with ``GB/s · 2^30 / 1e9``
bytes per ns, so its "GB/s" is GiB/s here; ``latency`` is ns per link (a Switch hop crosses two
links). A scalar instead of a one-entry list is accepted for one-dimensional networks.

``AstraNetwork`` keeps the numbers as ASTRA-sim reads them (GiB/s and ns, unrounded) because the
predictor must redo ASTRA-sim's floating-point arithmetic exactly; ``machine()`` builds optcoll's
model of the same network with ``generators.astra``.
"""
from __future__ import annotations

import math
from collections import Counter
from decimal import Decimal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optcoll.errors import InputError
from optcoll.fileio import write_text_atomic
from optcoll.inputfiles import known_keys, read_yaml
from optcoll.machines.generators import ASTRA_TOPOLOGIES, AstraDim, astra, astra_size
from optcoll.machines.machine import Machine
from optcoll.machines.modelfile import check_machine_size

#: ASTRA-sim's "GB" in network.yml (see module docstring).
GB = 2**30


def ns_to_seconds(ns: float) -> float:
    """Decimal scaling, as units.parse_time does, so "500 ns" is the same float either way."""
    return float(Decimal(repr(float(ns))) * Decimal("1e-9"))


def seconds_to_ns(seconds: float) -> float:
    return float(f"{float(Decimal(repr(float(seconds))) * Decimal(10**9)):.12g}")

KEYS = ("topology", "npus_count", "bandwidth", "latency")
HOPS = {"Ring": None, "FullyConnected": 1, "Switch": 2}  # Ring: shortest way round


@dataclass(frozen=True)
class NetDim:
    """One dimension in ASTRA-sim's own units: bandwidth in GB/s (= GiB/s), latency in ns."""

    topology: str
    npus_count: int
    bandwidth_gbps: float
    latency_ns: float

    def hops(self, src: int, dst: int) -> int:
        """Hops from local index src to dst as ASTRA-sim counts them (bidirectional Ring)."""
        fixed = HOPS[self.topology]
        if fixed is not None:
            return fixed
        clockwise = (dst - src) % self.npus_count
        return min(clockwise, self.npus_count - clockwise)

    @property
    def bytes_per_ns(self) -> float:
        """ASTRA-sim's ``bw_GBps_to_Bpns``: the same double arithmetic, same rounding."""
        return self.bandwidth_gbps * GB / 1e9


@dataclass(frozen=True)
class AstraNetwork:
    """A multi-dimensional ASTRA-sim network; NPU id = Σ coordinate_d · Π_{k<d} npus_count_k."""

    dims: tuple[NetDim, ...]
    name: str = "astra"

    @property
    def num_npus(self) -> int:
        return math.prod(d.npus_count for d in self.dims)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(d.npus_count for d in self.dims)

    def coords(self, npu: int) -> tuple[int, ...]:
        out = []
        for size in self.sizes:
            npu, c = divmod(npu, size)
            out.append(c)
        return tuple(out)

    def stride(self, dim: int) -> int:
        return math.prod(self.sizes[:dim])

    def group(self, npu: int, dim: int) -> list[int]:
        """The NPUs that differ from ``npu`` only in coordinate ``dim``, by local index."""
        stride, c = self.stride(dim), self.coords(npu)[dim]
        base = npu - c * stride
        return [base + k * stride for k in range(self.dims[dim].npus_count)]

    def machine(self) -> Machine:
        """optcoll's machine for this network (bandwidth B/s = GB/s · 2^30, latency s = ns · 1e-9)."""
        built = astra([AstraDim(d.topology, d.npus_count, d.bandwidth_gbps * GB, ns_to_seconds(d.latency_ns))
                       for d in self.dims])
        return built if self.name == "astra" else built.renamed(self.name, built.description)

    def describe(self) -> str:
        return " x ".join(f"{d.topology}({d.npus_count}, {_num(d.bandwidth_gbps)} GB/s, "
                          f"{_num(d.latency_ns)} ns)" for d in self.dims)


# -- reading ---------------------------------------------------------------------------------------


def _as_list(value: Any, key: str, source: str) -> list[Any]:
    if value is None:
        raise InputError("is missing (network.yml needs topology, npus_count, bandwidth, latency)",
                         source=source, field=key)
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _number(value: Any, where: str, source: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"must be a number, got {value!r}", source=source, field=where)
    if value < 0 or (positive and value == 0):
        raise InputError(f"must be {'positive' if positive else 'non-negative'}, got {value!r}",
                         source=source, field=where)
    return float(value)


def parse_network(data: Any, source: str = "network.yml", name: str = "astra") -> AstraNetwork:
    """A network from the parsed YAML mapping; errors name ``source`` and the field."""
    if not isinstance(data, dict):
        raise InputError("must be a mapping with keys topology, npus_count, bandwidth, latency",
                         source=source)
    known_keys(data, "", KEYS, source)
    columns = {key: _as_list(data.get(key), key, source) for key in KEYS}
    ndim = len(columns["topology"])
    if ndim == 0:
        raise InputError("lists no dimension", source=source, field="topology")
    for key in KEYS[1:]:
        if len(columns[key]) != ndim:
            raise InputError(f"has {len(columns[key])} entries but topology has {ndim}",
                             source=source, field=key)
    canonical = {t.lower(): t for t in ASTRA_TOPOLOGIES}
    dims = []
    for d in range(ndim):
        topo = columns["topology"][d]
        if not isinstance(topo, str) or topo.lower() not in canonical:
            raise InputError(f"unknown topology {topo!r}; use one of {', '.join(ASTRA_TOPOLOGIES)}",
                             source=source, field=f"topology[{d}]")
        count = columns["npus_count"][d]
        if isinstance(count, bool) or not isinstance(count, int) or count < 2:
            raise InputError(f"must be an integer larger than 1 (ASTRA-sim rejects smaller), got "
                             f"{count!r}", source=source, field=f"npus_count[{d}]")
        dims.append(NetDim(canonical[topo.lower()], count,
                           _number(columns["bandwidth"][d], f"bandwidth[{d}]", source, positive=True),
                           _number(columns["latency"][d], f"latency[{d}]", source, positive=False)))
    network = AstraNetwork(tuple(dims), name)
    check_machine_size(*astra_size([(d.topology, d.npus_count) for d in network.dims]), source=source,
                       field="npus_count")
    return network


def read_network(path: str | Path) -> AstraNetwork:
    """Reads an ASTRA-sim network.yml."""
    return parse_network(read_yaml(path), str(path), name=Path(path).stem)


def read_machine(path: str | Path) -> Machine:
    """network.yml straight to optcoll's machine model."""
    return read_network(path).machine()


# -- writing ---------------------------------------------------------------------------------------


def _num(value: float) -> str:
    """A number as a person would write it: 12 significant digits, no float noise, no '.0'."""
    clean = float(f"{value:.12g}")
    return str(int(clean)) if clean.is_integer() and abs(clean) < 1e15 else repr(clean)


def format_network(network: AstraNetwork, comment: str = "") -> str:
    """network.yml text for ``network`` (flow lists, one key a line, units in a comment)."""
    head = [f"# {line}" for line in comment.splitlines()] if comment else []
    head.append("# ASTRA-sim analytical network: bandwidth in GB/s read as GiB/s (2^30 B), "
                "latency in ns per link")
    rows = {"topology": [d.topology for d in network.dims],
            "npus_count": [str(d.npus_count) for d in network.dims],
            "bandwidth": [_num(d.bandwidth_gbps) for d in network.dims],
            "latency": [_num(d.latency_ns) for d in network.dims]}
    return "\n".join(head + [f"{key}: [ {', '.join(values)} ]" for key, values in rows.items()]) + "\n"


def write_network(machine_or_network: Machine | AstraNetwork, path: str | Path) -> NetworkView:
    """Writes network.yml atomically: a network as it is, a machine as ``network_view`` sees it
    (what it leaves out is written in the file's comment too)."""
    view = (NetworkView(machine_or_network, ()) if isinstance(machine_or_network, AstraNetwork)
            else network_view(machine_or_network))
    network = view.network
    comment = "\n".join([f"written by optcoll for {network.name}: {network.describe()}"] +
                        [f"left out: {line}" for line in view.left_out])
    write_text_atomic(path, format_network(network, comment))
    return view


# -- recognising a machine as an ASTRA-sim network --------------------------------------------------


def _signature(machine: Machine) -> Counter:
    """The machine's links with switches named by the NPUs they connect (their ids do not matter)."""
    def key(v: int) -> Any:
        if not machine.is_switch(v):
            return v
        sw = machine.switch(v)
        nbrs = frozenset(int(u) for u in machine.link_dst[machine.out_links[v]])
        return ("switch", nbrs, sw.multicast, sw.reduce)

    return Counter((key(int(u)), key(int(v)), float(a), float(b)) for u, v, a, b in zip(
        machine.link_src, machine.link_dst, machine.link_latency, machine.link_bandwidth))


def _first_link(machine: Machine, u: int, v: int) -> tuple[float, float] | None:
    ids = machine.links_between(u, v)
    return (float(machine.link_latency[ids[0]]), float(machine.link_bandwidth[ids[0]])) if ids else None


def _candidates(machine: Machine, stride: int, size: int) -> Iterator[AstraDim]:
    """Dimensions of this size at this stride that NPU 0's own links allow (checked fully later)."""
    members = [k * stride for k in range(size)]
    direct = _first_link(machine, 0, stride)
    if direct is not None:
        lat, bw = direct
        yield AstraDim("Ring", size, bw, lat)
        if size > 3:  # Ring and FullyConnected coincide up to 3 NPUs
            yield AstraDim("FullyConnected", size, bw, lat)
    for e in machine.out_links[0]:
        hub = int(machine.link_dst[e])
        if machine.is_switch(hub) and _first_link(machine, hub, stride) is not None:
            nbrs = sorted(int(v) for v in machine.link_dst[machine.out_links[hub]])
            if nbrs == members:
                sw = machine.switch(hub)
                yield AstraDim("Switch", size, float(machine.link_bandwidth[e]),
                               float(machine.link_latency[e]), sw.multicast, sw.reduce)


def _search(machine: Machine, target: Counter, prefix: list[AstraDim], stride: int
            ) -> list[AstraDim] | None:
    n = machine.num_npus
    if stride == n:
        try:
            return prefix if _signature(astra(prefix)) == target else None
        except InputError:
            return None
    rest = n // stride
    for size in (s for s in range(2, rest + 1) if rest % s == 0):
        for dim in _candidates(machine, stride, size):
            found = _search(machine, target, prefix + [dim], stride * size)
            if found is not None:
                return found
    return None


def _not_astra(machine: Machine, extra: str = "") -> InputError:
    return InputError(f"machine {machine.name!r} is not an ASTRA-sim multi-dimensional network: no "
                      "list of Ring/FullyConnected/Switch dimensions (NPU id with dimension 0 "
                      "fastest, one bandwidth and latency per dimension) builds exactly its links" + extra,
                      field="machine")


def _capabilities(dims: list[AstraDim]) -> list[tuple[int, str]]:
    """(dimension, sentence) for each dimension whose switches multicast or reduce."""
    out = []
    for d, dim in enumerate(dims):
        what = " and ".join(w for w, on in (("multicast", dim.multicast), ("reduce", dim.reduce)) if on)
        if what:
            out.append((d, f"dimension {d}'s switches {what} (NVLS/SHARP), which ASTRA-sim's network.yml "
                           "cannot express: ASTRA-sim sees plain switches"))
    return out


def astra_dims_of(machine: Machine) -> list[AstraDim]:
    """The ASTRA-sim dimensions that build exactly this machine, or an InputError saying why none do.

    Recognition is structural (any generator's output that matches counts: ring(8) is Ring(8),
    torus 4x4 is Ring(4) x Ring(4)); switch numbering and labels do not matter, link latencies,
    bandwidths and multiplicities must match exactly.
    """
    if machine.num_npus < 2:
        raise InputError(f"machine {machine.name!r} has fewer than 2 NPUs; network.yml needs npus_count > 1")
    found = _search(machine, _signature(machine), [], 1)
    if found is None:
        raise _not_astra(machine)
    flagged = _capabilities(found)
    if flagged:
        raise InputError(f"machine {machine.name!r}: {flagged[0][1]}", field=f"dims[{flagged[0][0]}]")
    return found


def _network(dims: list[AstraDim], name: str) -> AstraNetwork:
    return AstraNetwork(tuple(NetDim(d.topology, d.npus_count, float(f"{d.bandwidth / GB:.12g}"),
                                     seconds_to_ns(d.latency)) for d in dims), name)


def network_of(machine: Machine) -> AstraNetwork:
    """The ASTRA-sim network (GB/s = GiB/s, ns) equal to ``machine``."""
    return _network(astra_dims_of(machine), machine.name)


@dataclass(frozen=True)
class NetworkView:
    """The network.yml ASTRA-sim can run for a machine, and what of the machine it leaves out."""

    network: AstraNetwork
    left_out: tuple[str, ...]  # one sentence per thing left out; empty: the same machine


def _spine_links(machine: Machine) -> tuple[list[int], list[str]]:
    """Links of switches that reach no NPU directly (a cluster's spine), and those switches."""
    spines = [v for v in range(machine.num_npus, machine.num_nodes)
              if all(machine.is_switch(int(u)) for u in machine.link_dst[machine.out_links[v]])]
    links = [e for e in range(machine.num_links)
             if int(machine.link_src[e]) in spines or int(machine.link_dst[e]) in spines]
    return links, [machine.label(v) for v in spines]


def network_view(machine: Machine) -> NetworkView:
    """network.yml for ``machine``: the same machine when it is an ASTRA-sim network (``network_of``),
    else its NPU-facing dimensions when only switches above them (a rail cluster's spine) and
    switch capabilities stand in the way, each named in ``left_out``; an InputError otherwise.

    network.yml has one topology per dimension and nothing above them: a rail cluster is
    [Switch(GPUs per node, NVLink), Switch(nodes, NIC)] (GPU g of every node on rail g's switch),
    and the spine that joins the rail leaves has no place in it; ASTRA-sim's own collectives
    never cross dimensions in one message, and its analytical backends (astra-network-analytical
    599a047, ``backends.py``) time a message between NPUs that differ in several coordinates in
    the lowest one that differs. network.yml also has no multicast or reducing switch (NVLS,
    SHARP): ASTRA-sim sees plain switches there.
    """
    if machine.num_npus < 2:
        raise InputError(f"machine {machine.name!r} has fewer than 2 NPUs; network.yml needs npus_count > 1")
    found = _search(machine, _signature(machine), [], 1)
    left_out: list[str] = []
    if found is None:
        links, spines = _spine_links(machine)
        if not links:
            raise _not_astra(machine)
        rest = machine.without(links=links)
        found = _search(rest, _signature(rest), [], 1)
        if found is None:
            raise _not_astra(machine, ", with or without its spine")
        left_out.append(f"switch(es) {', '.join(spines)} and their links: network.yml has one topology "
                        "per dimension and nothing above them, so no traffic crosses a spine in ASTRA-sim")
    left_out += [sentence for _, sentence in _capabilities(found)]
    return NetworkView(_network(found, machine.name), tuple(left_out))
