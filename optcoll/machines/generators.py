"""Built-in topology generators (docs/model.md §3), one function per family, each a ``Machine``.

Conventions every generator shares:

- ``bandwidth`` is bytes/second per link per direction, ``latency`` seconds per link (per hop);
  a message through a switch crosses two links and pays two latencies.
- A bidirectional cable is two links. Switches are nodes numbered after the NPUs.
- Ring-like dimensions (rings, torus dimensions, ASTRA-sim Ring dimensions) of size 2 make ONE
  cable between the two NPUs, not two: "next" and "previous" are the same neighbour, and TACOS's
  dense link matrix can hold only one link per ordered pair, so its tori of size 2 behave the same.
  A double cable is an explicit-graph matter (``count = 2``). Dimensions of size 1 add no links.
- Grid NPU ids follow TACOS: dimension 0 (x) varies fastest, so 2D id = row·width + col and
  3D id = z·X·Y + y·X + x; ASTRA-sim multi-dimensional networks number NPUs the same way.
- Failed links/NPUs are ``Machine.without``; sub-communicators are a collective's ``ranks``.

``GENERATORS`` maps the kind names model files use (``kind = "torus2d"``) to a parameter spec.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import combinations
from typing import TYPE_CHECKING, Any

from optcoll.errors import InputError
from optcoll.machines.checks import check_bandwidth, check_int, check_latency
from optcoll.machines.clusters import Network, NodeGroup, cluster, cluster_kind
from optcoll.machines.machine import Machine, MachineBuilder, check_size
from optcoll.units import bandwidth_text, format_time

if TYPE_CHECKING:
    import networkx as nx

# -- argument checks (see checks.py) ------------------------------------------------------------


def _per_dim(name: str, value: Any, ndim: int, check: Callable[[str, Any], float]) -> list[float]:
    """One value for every dimension, or a list with one value per dimension (x first)."""
    if isinstance(value, (list, tuple)):
        if len(value) != ndim:
            raise InputError(f"needs one value per dimension ({ndim}), got {len(value)}", field=name)
        return [check(f"{name}[{d}]", v) for d, v in enumerate(value)]
    return [check(name, value)] * ndim


def _dims(value: Any, ndim: int | None = None) -> list[int]:
    if not isinstance(value, (list, tuple)) or not value:
        raise InputError(f"must be a non-empty list of sizes, got {value!r}", field="dims")
    if ndim is not None and len(value) != ndim:
        raise InputError(f"must list {ndim} sizes, got {len(value)}", field="dims")
    dims = [check_int(f"dims[{d}]", v, 1) for d, v in enumerate(value)]
    if math.prod(dims) < 2:
        raise InputError(f"a network needs at least 2 NPUs, got {'x'.join(map(str, dims))}", field="dims")
    return dims


def _same(values: list[float]) -> bool:
    return all(v == values[0] for v in values)


def _link_text(bandwidths: list[float], latencies: list[float]) -> str:
    bw = (bandwidth_text(bandwidths[0]) if _same(bandwidths)
          else " / ".join(bandwidth_text(b) for b in bandwidths))
    lat = (format_time(latencies[0]) if _same(latencies)
           else " / ".join(format_time(t) for t in latencies))
    return f"{bw}, {lat} per link"


# -- layout helpers ----------------------------------------------------------------------------------


def _circle(n: int, radius: float = 1.0, start: float = 0.0) -> list[tuple[float, float]]:
    """Clockwise from the top (12 o'clock), the first point ``start`` steps past it."""
    angles = [2 * math.pi * (i + start) / n for i in range(n)]
    return [(radius * math.sin(a), radius * math.cos(a)) for a in angles]


def _lines(sizes: Sequence[int], d: int) -> Iterator[list[int]]:
    """The NPU groups along dimension d (ids differing only in coordinate d), lowest id first."""
    stride, size = math.prod(sizes[:d]), sizes[d]
    for base in range(math.prod(sizes)):
        if (base // stride) % size == 0:
            yield [base + i * stride for i in range(size)]


def _chain(members: Sequence[int], wrap: bool) -> list[tuple[int, int]]:
    """Neighbouring pairs along ``members``, closed into a cycle when ``wrap`` and there are more
    than two (with two, the closing pair would repeat the only one)."""
    pairs = list(zip(members, members[1:]))
    if wrap and len(members) > 2:
        pairs.append((members[-1], members[0]))
    return pairs


def _coords(v: int, dims: Sequence[int]) -> list[int]:
    out = []
    for size in dims:
        v, c = divmod(v, size)
        out.append(c)
    return out


def _grid_xy(coords: Sequence[float], dims: Sequence[int]) -> tuple[float, float]:
    """Even dimensions go right, odd ones down; dimensions beyond the second repeat the block
    beside (or below) itself with a one-node gap, so a 3D grid shows its z-planes side by side."""
    pos = [0.0, 0.0]
    span = [1, 1]
    for d, (c, size) in enumerate(zip(coords, dims)):
        axis, gap = d % 2, (1 if d >= 2 else 0)
        pos[axis] += c * (span[axis] + gap)
        span[axis] = size * (span[axis] + gap) - gap
    return pos[0], -pos[1]


# -- rings, lines, full meshes, stars -------------------------------------------------------------


def ring(n: int, bandwidth: float, latency: float, *, bidirectional: bool = True) -> Machine:
    """NPU i → i+1 (mod n), and back when bidirectional. n = 2 is one cable either way."""
    n = check_int("n", n, 2)
    bandwidth, latency = check_bandwidth("bandwidth", bandwidth), check_latency("latency", latency)
    both = bidirectional or n == 2
    kind = "bidirectional" if bidirectional else "unidirectional"
    b = MachineBuilder(f"ring{n}" if bidirectional else f"uniring{n}", n,
                       f"{kind} ring of {n} NPUs, {_link_text([bandwidth], [latency])}")
    for u, v in _chain(range(n), wrap=True):
        b.add_link(u, v, bandwidth=bandwidth, latency=latency, bidirectional=both)
    b.positions.update(enumerate(_circle(n)))
    return b.build()


def line(n: int, bandwidth: float, latency: float) -> Machine:
    """NPUs 0 – 1 – ... – n-1 with bidirectional cables (a ring with one cable cut)."""
    n = check_int("n", n, 2)
    bandwidth, latency = check_bandwidth("bandwidth", bandwidth), check_latency("latency", latency)
    b = MachineBuilder(f"line{n}", n, f"line of {n} NPUs, {_link_text([bandwidth], [latency])}")
    for u, v in _chain(range(n), wrap=False):
        b.add_link(u, v, bandwidth=bandwidth, latency=latency, bidirectional=True)
    b.positions.update((i, (float(i), 0.0)) for i in range(n))
    return b.build()


def fully_connected(n: int, bandwidth: float, latency: float) -> Machine:
    """A direct link between every ordered pair of NPUs."""
    n = check_int("n", n, 2)
    bandwidth, latency = check_bandwidth("bandwidth", bandwidth), check_latency("latency", latency)
    check_size(n, n * (n - 1))  # quadratic: refuse before adding millions of links one by one
    b = MachineBuilder(f"fc{n}", n, f"fully connected {n} NPUs, {_link_text([bandwidth], [latency])}")
    for i, j in combinations(range(n), 2):
        b.add_link(i, j, bandwidth=bandwidth, latency=latency, bidirectional=True)
    b.positions.update(enumerate(_circle(n)))
    return b.build()


def _star(name: str, description: str, n: int, bandwidth: float, latency: float, *,
          switch_label: str, npu_labels: list[str] | None, multicast: bool, reduce: bool,
          links_per_npu: int) -> Machine:
    b = MachineBuilder(name, n, description, npu_labels)
    hub = b.add_switch(switch_label, multicast=multicast, reduce=reduce)
    for i in range(n):
        b.add_link(i, hub, bandwidth=bandwidth, latency=latency, count=links_per_npu, bidirectional=True)
    b.positions.update(enumerate(_circle(n)))
    b.positions[hub] = (0.0, 0.0)
    return b.build()


def _switch_flags(multicast: bool, reduce: bool) -> str:
    flags = [name for name, on in (("multicast", multicast), ("in-network reduction", reduce)) if on]
    return f" with {' and '.join(flags)}" if flags else ""


def switch(n: int, bandwidth: float, latency: float, *, multicast: bool = False,
           reduce: bool = False, links_per_npu: int = 1) -> Machine:
    """n NPUs each cabled to one switch ``sw``: NPU→NPU is two hops (2·latency)."""
    n, count = check_int("n", n, 2), check_int("links_per_npu", links_per_npu, 1)
    bandwidth, latency = check_bandwidth("bandwidth", bandwidth), check_latency("latency", latency)
    cables = f"{count} cables" if count > 1 else "a cable"
    text = (f"{n} NPUs on one switch{_switch_flags(multicast, reduce)}, {cables} each of "
            f"{_link_text([bandwidth], [latency])}")
    return _star(f"switch{n}", text, n, bandwidth, latency, switch_label="sw", npu_labels=None,
                 multicast=multicast, reduce=reduce, links_per_npu=count)


#: NVLink2 (V100): 25 GB/s per link per direction. Per-hop latency: an estimate of the order NCCL's
#: own tuning model charges for an NVLink hop with its low-latency protocol (~0.5 µs).
NVLINK2_BANDWIDTH = 25e9
NVLINK_LATENCY = 0.5e-6


def nvswitch(n: int = 8, bandwidth: float = 6 * NVLINK2_BANDWIDTH, latency: float = NVLINK_LATENCY, *,
             multicast: bool = False, reduce: bool = False) -> Machine:
    """n GPUs on an NVSwitch fabric, modelled as one switch node ``nvswitch``.

    Each GPU's NVLinks to the fabric are aggregated into one link per direction of ``bandwidth``
    (NCCL stripes a transfer over all of them); ``multicast``/``reduce`` model NVLS (H100 onward).
    """
    n = check_int("n", n, 2)
    bandwidth, latency = check_bandwidth("bandwidth", bandwidth), check_latency("latency", latency)
    text = (f"{n} GPUs on an NVSwitch fabric{_switch_flags(multicast, reduce)}, "
            f"GPU<->switch {_link_text([bandwidth], [latency])}")
    return _star(f"nvswitch{n}", text, n, bandwidth, latency, switch_label="nvswitch",
                 npu_labels=[f"gpu{i}" for i in range(n)], multicast=multicast, reduce=reduce,
                 links_per_npu=1)


def dgx2(bandwidth: float = 6 * NVLINK2_BANDWIDTH, latency: float = NVLINK_LATENCY) -> Machine:
    """DGX-2: 16 V100 GPUs, 6 NVLink2 each (6 x 25 GB/s per direction) into the NVSwitch fabric."""
    machine = nvswitch(16, bandwidth, latency)
    return machine.renamed("dgx2", "DGX-2: 16 V100 GPUs on NVSwitch, GPU<->switch "
                           + _link_text([bandwidth], [latency]))


# -- grids -----------------------------------------------------------------------------------------


def _grid(dims: Any, bandwidth: Any, latency: Any, *, wrap: bool, ndim: int | None = None) -> Machine:
    dims = _dims(dims, ndim)
    bws = _per_dim("bandwidth", bandwidth, len(dims), check_bandwidth)
    lats = _per_dim("latency", latency, len(dims), check_latency)
    shape = "x".join(map(str, dims))
    family = "torus" if wrap else "mesh"
    hetero = not (_same(bws) and _same(lats))
    n = math.prod(dims)
    b = MachineBuilder(("het" if hetero else "") + f"{family}{shape}", n,
                       ("heterogeneous " if hetero else "")
                       + f"{len(dims)}D {family} {shape}, {_link_text(bws, lats)}")
    for d in range(len(dims)):  # dimension by dimension, row by row: TACOS's link order
        for members in _lines(dims, d):
            for u, v in _chain(members, wrap):
                b.add_link(u, v, bandwidth=bws[d], latency=lats[d], bidirectional=True)
    b.positions.update((v, _grid_xy(_coords(v, dims), dims)) for v in range(n))
    return b.build()


def mesh(dims: Sequence[int], bandwidth: float | Sequence[float], latency: float | Sequence[float]
         ) -> Machine:
    """A k-dimensional mesh (x fastest). ``bandwidth``/``latency`` may be one value or one per
    dimension, x first: a heterogeneous 2D mesh is ``mesh([w, h], [bw_x, bw_y], [lat_x, lat_y])``
    (TACOS's Mesh2D_Hetero: x links are those between (x, y) and (x+1, y))."""
    return _grid(dims, bandwidth, latency, wrap=False)


def torus(dims: Sequence[int], bandwidth: float | Sequence[float], latency: float | Sequence[float]
          ) -> Machine:
    """A k-dimensional torus: a mesh plus a wraparound cable per row of length > 2."""
    return _grid(dims, bandwidth, latency, wrap=True)


def hypercube(dim: int, bandwidth: float, latency: float) -> Machine:
    """2^dim NPUs, i cabled to i XOR 2^k for every bit k: the diameter is ``dim`` hops."""
    dim = check_int("dim", dim, 1)
    bandwidth, latency = check_bandwidth("bandwidth", bandwidth), check_latency("latency", latency)
    n = 1 << dim
    b = MachineBuilder(f"hypercube{dim}", n,
                       f"binary hypercube of 2^{dim} = {n} NPUs, {_link_text([bandwidth], [latency])}")
    for k in range(dim):
        for i in range(n):
            if not i >> k & 1:
                b.add_link(i, i | 1 << k, bandwidth=bandwidth, latency=latency, bidirectional=True)
    b.positions.update((i, _grid_xy(_coords(i, [2] * dim), [2] * dim)) for i in range(n))
    return b.build()


# -- DGX-1 -----------------------------------------------------------------------------------------

#: NVLinks between GPUs i and j of a DGX-1 (V100) hybrid cube-mesh; 2 is a double NVLink.
DGX1_NVLINKS = (
    (0, 2, 1, 1, 2, 0, 0, 0),
    (2, 0, 1, 2, 0, 1, 0, 0),
    (1, 1, 0, 2, 0, 0, 2, 0),
    (1, 2, 2, 0, 0, 0, 0, 1),
    (2, 0, 0, 0, 0, 2, 1, 1),
    (0, 1, 0, 0, 2, 0, 1, 2),
    (0, 0, 2, 0, 1, 1, 0, 2),
    (0, 0, 0, 1, 1, 2, 2, 0),
)
# Cube drawing: GPUs 0-3 on the outer square, 4-7 on the inner one, i beside i+4.
_DGX1_POSITIONS = ((0.0, 2.0), (2.0, 2.0), (0.0, 0.0), (2.0, 0.0),
                   (0.6, 1.4), (1.4, 1.4), (0.6, 0.6), (1.4, 0.6))


def dgx1(bandwidth: float = NVLINK2_BANDWIDTH, latency: float = NVLINK_LATENCY) -> Machine:
    """DGX-1 (V100): 8 GPUs, 6 NVLinks each; a double NVLink is two parallel links per direction."""
    bandwidth, latency = check_bandwidth("bandwidth", bandwidth), check_latency("latency", latency)
    b = MachineBuilder("dgx1", 8, "DGX-1 (V100) hybrid cube-mesh: 8 GPUs, 6 NVLinks each (some "
                       f"doubled), {_link_text([bandwidth], [latency])}",
                       [f"gpu{i}" for i in range(8)])
    for i, j in combinations(range(8), 2):
        if DGX1_NVLINKS[i][j]:
            b.add_link(i, j, bandwidth=bandwidth, latency=latency, count=DGX1_NVLINKS[i][j],
                       bidirectional=True)
    b.positions.update(enumerate(_DGX1_POSITIONS))
    return b.build()


# -- multi-node ------------------------------------------------------------------------------------


INTRA_FABRICS = ("nvswitch", "full_mesh")


def _node_fabric(intra: str, gpus: int, bandwidth: float, latency: float, multicast: bool,
                 reduce: bool) -> Machine:
    """One server of ``multinode``: ``bandwidth`` is each GPU's total per direction."""
    if intra not in INTRA_FABRICS:
        raise InputError(f"unknown intra-node fabric {intra!r}; one of {', '.join(INTRA_FABRICS)}",
                         field="intra")
    if intra == "full_mesh" and (multicast or reduce):
        raise InputError("multicast/reduce are NVSwitch (NVLS) features: use intra = \"nvswitch\"",
                         field="intra")
    if gpus == 1:
        return MachineBuilder("gpu", 1).build()
    if intra == "nvswitch":
        return nvswitch(gpus, bandwidth, latency, multicast=multicast, reduce=reduce)
    return fully_connected(gpus, bandwidth / (gpus - 1), latency)


def multinode(nodes: int, gpus_per_node: int, *, nvlink_bandwidth: float, nvlink_latency: float,
              nic_bandwidth: float, nic_latency: float, gpus_per_nic: int = 1,
              pcie_bandwidth: float | None = None, pcie_latency: float = 0.0,
              multicast: bool = False, reduce: bool = False, intra: str = "nvswitch") -> Machine:
    """``nodes`` servers of ``gpus_per_node`` GPUs on one switch ``spine``; NPU id =
    node·gpus_per_node + gpu. A ``clusters.cluster`` with one group and a ``leaf`` network.

    ``nvlink_bandwidth`` is each GPU's total NVLink bandwidth per direction. ``intra`` =
    "nvswitch": the GPUs sit on an NVSwitch fabric (switch ``n<k>.nvswitch``, NVLS flags
    ``multicast``/``reduce``); "full_mesh": every GPU pair has one link carrying an equal share
    (e.g. 4 A100s with 4 NVLinks per pair: 300 GB/s per GPU, 100 GB/s per pair). NIC j serves
    GPUs j·gpus_per_nic ..; with one GPU per NIC the GPU's own cable is the NIC link, otherwise
    the NIC is a switch node ``n<k>.nic<j>`` reached over PCIe (``pcie_bandwidth`` defaults to the
    NIC bandwidth, so the shared NIC is the bottleneck). Single-GPU servers get no NVLink fabric;
    a single server gets no NICs and no spine.
    """
    nodes, gpn = check_int("nodes", nodes, 1), check_int("gpus_per_node", gpus_per_node, 1)
    gpn_nic = check_int("gpus_per_nic", gpus_per_nic, 1)
    if nodes * gpn < 2:
        raise InputError("a network needs at least 2 GPUs", field="gpus_per_node")
    if gpn % gpn_nic:
        raise InputError(f"must divide gpus_per_node ({gpn}), got {gpn_nic}", field="gpus_per_nic")
    nv_bw = check_bandwidth("nvlink_bandwidth", nvlink_bandwidth)
    nv_lat = check_latency("nvlink_latency", nvlink_latency)
    nic_bw, nic_lat = check_bandwidth("nic_bandwidth", nic_bandwidth), check_latency("nic_latency", nic_latency)
    pcie_bw = None if pcie_bandwidth is None else check_bandwidth("pcie_bandwidth", pcie_bandwidth)
    pcie_lat = check_latency("pcie_latency", pcie_latency)
    node = _node_fabric(intra, gpn, nv_bw, nv_lat, multicast, reduce)
    nics = gpn // gpn_nic
    fabric = "NVSwitch" if intra == "nvswitch" else "NVLink full mesh"
    inside = f"{nodes} nodes x {gpn} GPUs: {fabric} {_link_text([nv_bw], [nv_lat])} inside"
    text = (f"{inside}, {nics} NIC(s) per node at {_link_text([nic_bw], [nic_lat])} to a spine switch"
            if nodes > 1 else f"{inside}; a single node: no NICs or network")
    group = NodeGroup(node, nodes, tuple(tuple(range(j * gpn_nic, (j + 1) * gpn_nic)) for j in range(nics)),
                      nic_bw, nic_lat, pcie_bw if gpn_nic == 1 or pcie_bw is not None else None, pcie_lat)
    return cluster([group], Network("leaf"), name=f"cluster{nodes}x{gpn}", description=text,
                   leaf_label="spine")


# -- ASTRA-sim multi-dimensional networks ----------------------------------------------------------

ASTRA_TOPOLOGIES = ("Ring", "FullyConnected", "Switch")


@dataclass(frozen=True)
class AstraDim:
    """One dimension of an ASTRA-sim network.yml: its building block, size, and link figures.

    ``multicast``/``reduce`` apply to a Switch dimension's switches only.
    """

    topology: str
    npus_count: int
    bandwidth: float
    latency: float
    multicast: bool = False
    reduce: bool = False


def _astra_dim(d: int, dim: AstraDim) -> AstraDim:
    where = f"dims[{d}]"
    canonical = {t.lower(): t for t in ASTRA_TOPOLOGIES}
    topo = canonical.get(str(dim.topology).lower())
    if topo is None:
        raise InputError(f"unknown topology {dim.topology!r}; use one of {', '.join(ASTRA_TOPOLOGIES)}",
                         field=f"{where}.topology")
    if (dim.multicast or dim.reduce) and topo != "Switch":
        raise InputError(f"multicast/reduce apply to Switch dimensions only, not {topo}", field=where)
    return AstraDim(topo, check_int(f"{where}.npus_count", dim.npus_count, 1),
                    check_bandwidth(f"{where}.bandwidth", dim.bandwidth),
                    check_latency(f"{where}.latency", dim.latency), dim.multicast, dim.reduce)


def _astra_layout(spec: list[AstraDim]) -> list[tuple[float, float]]:
    """Without Switch dimensions, a grid. Otherwise the dimensions before the first Switch one form
    a grid block, and the blocks stand on a circle, so a switch (drawn at the mean of its members)
    sits inside the circle with its links fanning out instead of running along a row of NPUs."""
    sizes = [dim.npus_count for dim in spec]
    n = math.prod(sizes)
    first = next((d for d, dim in enumerate(spec) if dim.topology == "Switch"), None)
    if first is None:
        return [_grid_xy(_coords(v, sizes), sizes) for v in range(n)]
    inner = sizes[:first]
    size = math.prod(inner)
    local = [_grid_xy(_coords(v, inner), inner) for v in range(size)]
    cx, cy = (sum(p[k] for p in local) / size for k in (0, 1))
    extent = max(max(abs(x - cx), abs(y - cy)) for x, y in local) + 1
    blocks = n // size
    radius = max(blocks * 2 * extent / (2 * math.pi), 2 * extent)
    ring = _circle(blocks, radius, 0.5)  # half a step round: no block level with the hubs
    return [(ring[v // size][0] + local[v % size][0] - cx, ring[v // size][1] + local[v % size][1] - cy)
            for v in range(n)]


def astra(dims: Sequence[AstraDim]) -> Machine:
    """An ASTRA-sim-style multi-dimensional network; NPU id: dimension 0 varies fastest.

    Each dimension connects every group of NPUs that differ only in that coordinate: a Ring is a
    bidirectional ring (size 2: one cable), FullyConnected cables every pair, a Switch adds one
    switch node ``d<dim>.sw<group>`` per group (groups numbered by their lowest NPU id).
    """
    if not isinstance(dims, (list, tuple)) or not dims:
        raise InputError("must be a non-empty list of dimensions", field="dims")
    spec = [_astra_dim(d, dim) for d, dim in enumerate(dims)]
    sizes = [dim.npus_count for dim in spec]
    n = math.prod(sizes)
    if n < 2:
        raise InputError("a network needs at least 2 NPUs", field="dims")
    check_size(*astra_size([(dim.topology, dim.npus_count) for dim in spec]))
    short = {"Ring": "ring", "FullyConnected": "fc", "Switch": "switch"}
    text = " x ".join(f"{dim.topology}({dim.npus_count}, {_link_text([dim.bandwidth], [dim.latency])})"
                      for dim in spec)
    b = MachineBuilder("astra_" + "_".join(f"{short[d.topology]}{d.npus_count}" for d in spec), n,
                       f"ASTRA-sim-style network {text}")
    b.positions.update(enumerate(_astra_layout(spec)))
    for d, dim in enumerate(spec):
        if dim.npus_count == 1:
            continue
        cable = partial(b.add_link, bandwidth=dim.bandwidth, latency=dim.latency, bidirectional=True)
        for g, members in enumerate(_lines(sizes, d)):
            if dim.topology != "Switch":
                pairs = _chain(members, True) if dim.topology == "Ring" else combinations(members, 2)
                for u, v in pairs:
                    cable(u, v)
            else:
                hub = b.add_switch(f"d{d}.sw{g}", multicast=dim.multicast, reduce=dim.reduce)
                for v in members:
                    cable(v, hub)
                x, y = (sum(b.positions[v][k] for v in members) / len(members) for k in (0, 1))
                b.positions[hub] = (x, y + 0.3 * d)  # a later Switch dim's hubs sit a bit higher
    return b.build()



def astra_size(dims: Sequence[tuple[str, int]]) -> tuple[int, int]:
    """(nodes, directed links) at most of the ASTRA-style machine with these (topology, npus_count)
    dimensions, counted without building it: per NPU and dimension two links for a Ring or a
    Switch (a cable to the hub and back), one to each peer of a FullyConnected group; one switch
    per group of a Switch dimension."""
    n = math.prod(size for _, size in dims)
    switches = sum(n // size for topology, size in dims if topology == "Switch")
    links = sum(n * (size - 1 if topology == "FullyConnected" else 2) for topology, size in dims)
    return n + switches, links

# -- networkx import -------------------------------------------------------------------------------


def from_networkx(graph: nx.Graph, *, name: str | None = None, bandwidth: float | None = None,
                  latency: float | None = None, description: str = "") -> Machine:
    """A machine from a networkx graph.

    Nodes with attribute ``switch=True`` are switches (``multicast``/``reduce`` node attributes
    are their flags), all others NPUs. NPUs are numbered in sorted node order (insertion order
    when the node names do not sort); labels are ``str(node)``. An undirected edge is a cable
    (two links), a directed edge one link, and each edge of a multigraph its own link. Edge
    attributes ``bandwidth`` (B/s) and ``latency`` (s) override the defaults given here; an edge
    with neither attribute nor default is an error. Node attribute ``pos`` = (x, y) on every node
    becomes the drawing layout.
    """
    nodes = list(graph.nodes)
    try:
        nodes = sorted(nodes)
    except TypeError:
        pass
    switches = [v for v in nodes if graph.nodes[v].get("switch", False)]
    npus = [v for v in nodes if not graph.nodes[v].get("switch", False)]
    if not npus:
        raise InputError("the graph has no NPU nodes (every node has switch=True)")
    b = MachineBuilder(name or graph.graph.get("name") or "networkx", len(npus), description,
                       [str(v) for v in npus])
    handle: dict[Hashable, int | str] = {v: i for i, v in enumerate(npus)}
    for v in switches:
        attrs = graph.nodes[v]
        handle[v] = b.add_switch(str(v), multicast=bool(attrs.get("multicast", False)),
                                 reduce=bool(attrs.get("reduce", False)))
    defaults = {"bandwidth": bandwidth, "latency": latency}
    for u, v, attrs in graph.edges(data=True):
        values = {}
        for key, check in (("bandwidth", check_bandwidth), ("latency", check_latency)):
            value = attrs.get(key, defaults[key])
            if value is None:
                raise InputError(f"edge {u!r}-{v!r} has no {key} attribute and no default was given",
                                 field=key)
            values[key] = check(f"edge {u!r}-{v!r} {key}", value)
        b.add_link(handle[u], handle[v], bidirectional=not graph.is_directed(), **values)
    if all("pos" in graph.nodes[v] for v in nodes):
        b.positions.update((handle[v], tuple(map(float, graph.nodes[v]["pos"]))) for v in nodes)
    return b.build()


# -- registry for model files ----------------------------------------------------------------------

#: Parameter types a model file may use; modelfile.py converts TOML values by these names.
PARAM_TYPES = ("int", "ints", "bool", "str", "ratio", "bandwidth", "latency", "bandwidths", "latencies",
               "astra_dims", "node_groups")
REQUIRED = object()


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: Any = REQUIRED
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class GeneratorSpec:
    kind: str
    build: Callable[..., Machine]
    params: tuple[Param, ...]
    doc: str

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


def _spec(kind: str, build: Callable[..., Machine], doc: str, *params: Param) -> GeneratorSpec:
    return GeneratorSpec(kind, build, params, doc)


_N = Param("n", "int", doc="number of NPUs")
_BW = Param("bandwidth", "bandwidth", doc="per link per direction")
_LAT = Param("latency", "latency", doc="per link (hop)")
_MC = Param("multicast", "bool", False, "switch may copy what it forwards (NVLS-like)")
_RED = Param("reduce", "bool", False, "switch may combine partials (SHARP-like)")
_GRID = (Param("bandwidth", "bandwidths", doc="one value, or one per dimension (x first)"),
         Param("latency", "latencies", doc="one value, or one per dimension (x first)"))


def _grid_specs() -> list[GeneratorSpec]:
    specs = []
    for family, wrap in (("mesh", False), ("torus", True)):
        for ndim in (None, 2, 3):
            kind = family + (f"{ndim}d" if ndim else "")
            count = f"{ndim} sizes" if ndim else "sizes"
            specs.append(_spec(kind, partial(_grid, wrap=wrap, ndim=ndim),
                               f"{ndim or 'k'}-dimensional {family}, NPU id with x fastest",
                               Param("dims", "ints", doc=f"{count}, x first"), *_GRID))
    return specs


GENERATORS: dict[str, GeneratorSpec] = {spec.kind: spec for spec in [
    _spec("ring", ring, "ring of n NPUs", _N, _BW, _LAT,
          Param("bidirectional", "bool", True, "cables both ways")),
    _spec("line", line, "line of n NPUs", _N, _BW, _LAT),
    _spec("fully_connected", fully_connected, "a link between every pair", _N, _BW, _LAT),
    _spec("switch", switch, "n NPUs on one switch", _N, _BW, _LAT, _MC, _RED,
          Param("links_per_npu", "int", 1, "parallel cables per NPU")),
    *_grid_specs(),
    _spec("hypercube", hypercube, "binary hypercube of 2^dim NPUs", Param("dim", "int"), _BW, _LAT),
    _spec("dgx1", dgx1, "DGX-1 (V100) hybrid cube-mesh with double NVLinks",
          Param("bandwidth", "bandwidth", NVLINK2_BANDWIDTH, "per NVLink per direction"),
          Param("latency", "latency", NVLINK_LATENCY, "per NVLink")),
    _spec("dgx2", dgx2, "DGX-2: 16 GPUs on NVSwitch",
          Param("bandwidth", "bandwidth", 6 * NVLINK2_BANDWIDTH, "GPU<->NVSwitch per direction"),
          Param("latency", "latency", NVLINK_LATENCY, "per hop")),
    _spec("nvswitch", nvswitch, "n GPUs on NVSwitch", Param("n", "int", 8, "number of GPUs"),
          Param("bandwidth", "bandwidth", 6 * NVLINK2_BANDWIDTH, "GPU<->NVSwitch per direction"),
          Param("latency", "latency", NVLINK_LATENCY, "per hop"), _MC, _RED),
    _spec("multinode", multinode, "servers of GPUs on NVSwitch or an NVLink mesh, NICs to one switch",
          Param("nodes", "int"), Param("gpus_per_node", "int"),
          Param("nvlink_bandwidth", "bandwidth", doc="per GPU and direction, all its NVLinks"),
          Param("nvlink_latency", "latency"), Param("nic_bandwidth", "bandwidth"),
          Param("nic_latency", "latency"), Param("gpus_per_nic", "int", 1),
          Param("pcie_bandwidth", "bandwidth", None, "GPU<->shared NIC; default: NIC bandwidth"),
          Param("pcie_latency", "latency", 0.0), _MC, _RED,
          Param("intra", "str", "nvswitch", "intra-node fabric: nvswitch or full_mesh (equal share per pair)")),
    _spec("cluster", cluster_kind, "groups of nodes (any model) joined by NICs: rail, leaf or fat tree",
          Param("groups", "node_groups", doc="[[topology.groups]] tables: nodes, node (a model), nic_gpus, "
                "nic_bandwidth, nic_latency, pcie_bandwidth, pcie_latency"),
          Param("network", "str", "rail", "rail, leaf or fat_tree"),
          Param("network_latency", "latency", None, "per leaf<->spine link"),
          Param("oversubscription", "ratio", 1.0, "leaf uplink = the leaf's NIC bandwidth / this"),
          Param("nodes_per_leaf", "int", None, "fat tree: nodes sharing a leaf")),
    _spec("astra", astra, "ASTRA-sim multi-dimensional network (dimension 0 fastest)",
          Param("dims", "astra_dims", doc="[[topology.dims]] tables: topology, npus_count, "
                "bandwidth, latency (+ multicast, reduce for Switch)")),
]}


def generate(kind: str, **params: Any) -> Machine:
    """Calls a registered generator by kind name with already-converted Python values."""
    if kind not in GENERATORS:
        raise InputError(f"unknown generator kind {kind!r}; known: {', '.join(GENERATORS)}", field="kind")
    return GENERATORS[kind].build(**params)
