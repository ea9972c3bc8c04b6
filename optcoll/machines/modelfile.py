"""TOML machine-model files: a generator call or an explicit graph, plus optional failures.

A generator call::

    [machine]
    name = "torus4x4"                  # default: the file name without .toml
    description = "..."                # default: the generator's own description

    [topology]
    kind = "torus2d"                   # any key of generators.GENERATORS
    dims = [4, 4]
    bandwidth = "50 GiB/s"             # per link per direction
    latency = "0.5 us"                 # per link; or "nccl:simple:nvlink" (α as NCCL's tuning
                                       # model charges it, optcoll.machines.nccl_latency)

An explicit graph (NPUs are 0..npus-1, switches are named)::

    [machine]
    name = "star4"
    npus = 4
    labels = ["a", "b", "c", "d"]      # optional, one per NPU
    positions = [[0, 0], ...]          # optional drawing layout, one per NPU then per switch

    [[switches]]
    name = "sw"
    multicast = false                  # optional, default false
    reduce = false                     # optional, default false

    [[links]]
    src = 0                            # NPU index or switch name
    dst = "sw"
    bandwidth = "25 GB/s"
    latency = "0.5 us"
    count = 1                          # optional: parallel links, default 1
    bidirectional = true               # optional: also dst -> src, default false

Failures, applied after building (NPU indices and switch names as built)::

    [failures]
    npus = [3]                         # failed NPUs (the survivors are renumbered densely)
    links = [[0, 1], { src = 0, dst = 4, count = 1, bidirectional = false }]

``[u, v]`` removes every link between u and v in both directions; a table removes ``count``
links (default: all) src → dst, and dst → src too unless ``bidirectional = false``.

Any number may carry its source (``sources.py``): ``[sources.<key>]`` tables cite documents and a
value written ``{ value = "450 GB/s", per = "direction", source = "<key>", note = "..." }`` names
one. ``[figures]`` states the per-NPU bandwidth the sources give (``figures.py``)::

    [figures]
    scale_up = { value = "450 GB/s", per = "direction", source = "dgx-h100" }
    scale_out = "50 GB/s"              # optional: NIC ports per NPU

A cluster (``kind = "cluster"``, ``clusters.py``) lists groups of nodes, each a model of its own::

    [[topology.groups]]
    nodes = 4
    node = "dgxh100"                   # built-in name, or a path relative to this file
    nic_bandwidth = "400 Gbit/s"       # one NIC per GPU unless nic_gpus = [[0, 1], ...] says more
    nic_latency = "2 us"

Every value with a unit is a string ("50 GiB/s", "400 Gbit/s", "0.5 us"): a bare number is an
error. Every problem is an ``InputError`` naming the file and the field path; unknown keys are
errors too, so a typo is never silently ignored, and so are machines beyond the ``nodes``/``links``
caps of ``optcoll.limits`` (checked before they are built). ``machine_to_toml`` writes the
explicit form (exactly, link ids preserved), so any machine, e.g. one with failures applied, can
be saved.
"""
from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from optcoll.errors import InputError
from optcoll.inputfiles import join, kind_of, known_keys, read_toml
from optcoll.machines.clusters import NodeGroup
from optcoll.machines.figures import Figures, faster_than_figures
from optcoll.machines.generators import GENERATORS, AstraDim, GeneratorSpec
from optcoll.machines.machine import Machine, MachineBuilder, check_size
from optcoll.machines.modelpaths import model_path
from optcoll.machines.nccl_latency import NcclLatency, is_preset
from optcoll.machines.nccl_latency import resolve as resolve_nccl
from optcoll.machines.sources import Provenance, unwrap_sources
from optcoll.units import parse_bandwidth, parse_time

_TOP = ("machine", "topology", "switches", "links", "failures", "sources", "figures")
_FIGURES = ("scale_up", "scale_out")
_GROUP = ("nodes", "node", "nic_gpus", "nic_bandwidth", "nic_latency", "pcie_bandwidth", "pcie_latency")
#: How deep models may refer to models (a cluster's node being a cluster ...): far beyond any use,
#: low enough that a file naming itself is one clear error.
MAX_MODEL_DEPTH = 4
_MACHINE = ("name", "description", "npus", "labels", "positions")
_SWITCH = ("name", "multicast", "reduce")
_LINK = ("src", "dst", "bandwidth", "latency", "count", "bidirectional")
_FAILURES = ("npus", "links")
_FAILED_LINK = ("src", "dst", "count", "bidirectional")
_ASTRA_DIM = ("topology", "npus_count", "bandwidth", "latency", "multicast", "reduce")

def check_machine_size(nodes: int, links: int, *, source: str | None, field: str | None) -> None:
    """``machine.check_size`` before a machine described in a file is read link by link."""
    try:
        check_size(nodes, links)
    except InputError as exc:
        raise exc.located(source, field) from None


@dataclass(frozen=True)
class MachineModel:
    """A model file as read: the machine, where its numbers come from, and the per-NPU
    bandwidth figures its sources give (``None`` when it states none)."""

    machine: Machine
    provenance: Provenance = Provenance()
    figures: Figures | None = None


class _Reader:
    """Typed access to TOML values; every failure names ``source`` and the field path. Node models
    a cluster names are read through ``resolve`` and kept in ``node_models``."""

    def __init__(self, source: str, resolve: Callable[[str, str], MachineModel] | None = None):
        self.source = source
        self.resolve = resolve
        self.node_models: list[MachineModel] = []
        self.node_groups: list[NodeGroup] = []
        #: NCCL latency presets used: resolved preset -> the fields that named it.
        self.presets: dict[NcclLatency, list[str]] = {}

    def error(self, path: str, message: str) -> InputError:
        return InputError(message, source=self.source, field=path or None)

    def table(self, value: Any, path: str, allowed: tuple[str, ...],
              required: tuple[str, ...] = ()) -> dict[str, Any]:
        known_keys(value, path, allowed, self.source, sections=not path)  # top level: [sections]
        self.require([join(path, key) for key in required if key not in value])
        return value

    def tables(self, value: Any, path: str, allowed: tuple[str, ...],
               required: tuple[str, ...]) -> list[dict[str, Any]]:
        """An array of tables, every item's keys checked before any is read: all the missing
        keys of all items are named in one error, not one per run."""
        items = self.list(value, path)
        for i, item in enumerate(items):
            known_keys(item, f"{path}[{i}]", allowed, self.source)
        self.require([f"{path}[{i}].{key}" for i, item in enumerate(items) for key in required
                      if key not in item])
        return items

    def require(self, missing: list[str]) -> None:
        """One error naming every missing field: the first as the field, the others after it."""
        if missing:
            also = f" (also missing: {', '.join(missing[1:])})" if len(missing) > 1 else ""
            raise self.error(missing[0], f"missing{also}")

    def list(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.error(path, f"must be an array, got {kind_of(value)}")
        return value

    def int(self, value: Any, path: str, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(path, f"must be an integer, got {kind_of(value)} {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(path, f"must be at least {minimum}, got {value}")
        return value

    def bool(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(path, f"must be true or false, got {kind_of(value)} {value!r}")
        return value

    def str(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise self.error(path, f"must be a string, got {kind_of(value)} {value!r}")
        return value

    def unit(self, parse: Callable[[Any], float], value: Any, path: str) -> float:
        try:
            return parse(value)
        except InputError as exc:
            raise exc.located(self.source, path) from None

    def bandwidth(self, value: Any, path: str) -> float:
        return self.unit(parse_bandwidth, value, path)

    def latency(self, value: Any, path: str) -> float:
        """A time, or an NCCL latency preset (``optcoll.machines.nccl_latency``)."""
        if not is_preset(value):
            return self.unit(parse_time, value, path)
        preset = self.unit(resolve_nccl, value, path)
        self.presets.setdefault(preset, []).append(path)
        return preset.seconds

    def sources(self) -> list[str]:
        """One sentence per preset used, naming the fields that used it."""
        return [f"latency {preset.describe()}; used by {', '.join(paths)}"
                for preset, paths in self.presets.items()]

    def number(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(path, f"must be a number, got {kind_of(value)} {value!r}")
        return float(value)

    def node_model(self, ref: Any, path: str) -> MachineModel:
        if self.resolve is None:
            raise self.error(path, "models cannot name other models here")
        try:
            return self.resolve(self.str(ref, path), path)
        except InputError as exc:
            raise exc.located(self.source, path) from None

    def node(self, value: Any, path: str, num_npus: int, switches: dict[str, int]) -> int:
        """An NPU index or a switch name, as a node id."""
        if isinstance(value, str):
            if value not in switches:
                known = ", ".join(switches) or "none"
                raise self.error(path, f"no switch named {value!r} (switches: {known})")
            return switches[value]
        return self.npu(value, path, num_npus)

    def npu(self, value: Any, path: str, num_npus: int) -> int:
        index = self.int(value, path)
        if not 0 <= index < num_npus:
            raise self.error(path, f"NPU {index} does not exist (NPUs are 0..{num_npus - 1})")
        return index


# -- generator calls -------------------------------------------------------------------------------


def _per_dim(one: Callable[[Any, str], float], value: Any, path: str) -> float | list[float]:
    if isinstance(value, list):
        return [one(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return one(value, path)


def _astra_dims(r: _Reader, value: Any, path: str) -> list[AstraDim]:
    dims = []
    for i, table in enumerate(r.tables(value, path, _ASTRA_DIM, ("topology", "npus_count", "bandwidth", "latency"))):
        where = f"{path}[{i}]"
        dims.append(AstraDim(r.str(table["topology"], f"{where}.topology"),
                             r.int(table["npus_count"], f"{where}.npus_count"),
                             r.bandwidth(table["bandwidth"], f"{where}.bandwidth"),
                             r.latency(table["latency"], f"{where}.latency"),
                             r.bool(table.get("multicast", False), f"{where}.multicast"),
                             r.bool(table.get("reduce", False), f"{where}.reduce")))
    return dims


def _node_groups(r: _Reader, value: Any, path: str) -> list[NodeGroup]:
    groups = []
    for i, table in enumerate(r.tables(value, path, _GROUP, ("nodes", "node"))):
        where = f"{path}[{i}]"
        model = r.node_model(table["node"], f"{where}.node")
        r.node_models.append(model)
        nic_gpus = None
        if "nic_gpus" in table:
            nic_gpus = tuple(tuple(r.int(gpu, f"{where}.nic_gpus[{j}][{k}]")
                                   for k, gpu in enumerate(r.list(nic, f"{where}.nic_gpus[{j}]")))
                             for j, nic in enumerate(r.list(table["nic_gpus"], f"{where}.nic_gpus")))
        optional = {key: parse(table[key], f"{where}.{key}")
                    for key, parse in (("nic_bandwidth", r.bandwidth), ("nic_latency", r.latency),
                                       ("pcie_bandwidth", r.bandwidth), ("pcie_latency", r.latency))
                    if key in table}
        groups.append(NodeGroup(model.machine, r.int(table["nodes"], f"{where}.nodes"), nic_gpus,
                                **optional))
    r.node_groups = groups
    return groups


def _convert(r: _Reader, type_: str, value: Any, path: str) -> Any:
    if type_ == "int":
        return r.int(value, path)
    if type_ == "str":
        return r.str(value, path)
    if type_ == "ratio":
        return r.number(value, path)
    if type_ == "node_groups":
        return _node_groups(r, value, path)
    if type_ == "ints":
        return [r.int(v, f"{path}[{i}]") for i, v in enumerate(r.list(value, path))]
    if type_ == "bool":
        return r.bool(value, path)
    if type_ == "bandwidth":
        return r.bandwidth(value, path)
    if type_ == "latency":
        return r.latency(value, path)
    if type_ == "bandwidths":
        return _per_dim(r.bandwidth, value, path)
    if type_ == "latencies":
        return _per_dim(r.latency, value, path)
    if type_ == "astra_dims":
        return _astra_dims(r, value, path)
    raise AssertionError(f"generator parameter type {type_!r} has no converter")


def _generated(r: _Reader, topology: Any) -> Machine:
    if not isinstance(topology, dict):
        raise r.error("topology", f"must be a table, got {kind_of(topology)}")
    if "kind" not in topology:
        raise r.error("topology.kind", f"missing; one of: {', '.join(GENERATORS)}")
    kind = r.str(topology["kind"], "topology.kind")
    spec: GeneratorSpec | None = GENERATORS.get(kind)
    if spec is None:
        close = difflib.get_close_matches(kind, list(GENERATORS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise r.error("topology.kind",
                      f"unknown generator kind {kind!r}{hint}; known: {', '.join(GENERATORS)}")
    names = tuple(p.name for p in spec.params)
    r.table(topology, "topology", ("kind", *names), tuple(p.name for p in spec.params if p.required))
    args = {p.name: _convert(r, p.type, topology[p.name], f"topology.{p.name}")
            for p in spec.params if p.name in topology}
    try:
        return spec.build(**args)
    except InputError as exc:  # generators name the parameter; prefix the table
        raise InputError(exc.detail, source=r.source,
                         field=f"topology.{exc.field}" if exc.field else "topology") from None


# -- explicit graphs -------------------------------------------------------------------------------


def _explicit(r: _Reader, data: dict[str, Any], machine: dict[str, Any], name: str) -> Machine:
    n = r.int(machine["npus"], "machine.npus", 1)
    check_machine_size(n, 0, source=r.source, field="machine.npus")
    labels = None
    if "labels" in machine:
        raw = r.list(machine["labels"], "machine.labels")
        labels = [r.str(v, f"machine.labels[{i}]") for i, v in enumerate(raw)]
        if len(labels) != n:
            raise r.error("machine.labels", f"must list one label per NPU ({n}), got {len(labels)}")
        first: dict[str, int] = {}
        for i, label in enumerate(labels):
            if first.setdefault(label, i) != i:
                raise r.error(f"machine.labels[{i}]",
                              f"duplicate label {label!r} (as labels[{first[label]}])")
    builder = MachineBuilder(name, n, "", labels)
    switch_ids: dict[str, int] = {}
    for i, table in enumerate(r.tables(data.get("switches", []), "switches", _SWITCH, ("name",))):
        where = f"switches[{i}]"
        label = r.str(table["name"], f"{where}.name")
        if label in switch_ids:
            raise r.error(f"{where}.name", f"duplicate switch name {label!r}")
        builder.add_switch(label, multicast=r.bool(table.get("multicast", False), f"{where}.multicast"),
                           reduce=r.bool(table.get("reduce", False), f"{where}.reduce"))
        switch_ids[label] = n + len(switch_ids)
    if "links" not in data:
        raise r.error("links", "missing: an explicit graph lists its [[links]]")
    total = 0
    for i, table in enumerate(r.tables(data["links"], "links", _LINK, ("src", "dst", "bandwidth", "latency"))):
        where = f"links[{i}]"
        src = r.node(table["src"], f"{where}.src", n, switch_ids)
        dst = r.node(table["dst"], f"{where}.dst", n, switch_ids)
        if src == dst:
            raise r.error(where, f"is a self-loop at {table['src']!r}")
        count = r.int(table.get("count", 1), f"{where}.count", 1)
        both = r.bool(table.get("bidirectional", False), f"{where}.bidirectional")
        total += count * (2 if both else 1)
        check_machine_size(n + len(switch_ids), total, source=r.source, field=f"{where}.count")
        builder.add_link(table["src"], table["dst"],
                         bandwidth=r.bandwidth(table["bandwidth"], f"{where}.bandwidth"),
                         latency=r.latency(table["latency"], f"{where}.latency"),
                         count=count, bidirectional=both)
    if "positions" in machine:
        total = n + len(switch_ids)
        switch_labels = {v: label for label, v in switch_ids.items()}
        points = r.list(machine["positions"], "machine.positions")
        if len(points) != total:
            raise r.error("machine.positions", f"must give one [x, y] per node ({total}), got {len(points)}")
        for v, point in enumerate(points):
            where = f"machine.positions[{v}]"
            xy = r.list(point, where)
            if len(xy) != 2 or any(isinstance(c, bool) or not isinstance(c, (int, float))
                                   or not math.isfinite(c) for c in xy):
                raise r.error(where, f"must be [x, y] numbers (finite), got {point!r}")
            builder.positions[v if v < n else switch_labels[v]] = (float(xy[0]), float(xy[1]))
    return builder.build()


# -- failures --------------------------------------------------------------------------------------


def _failed(r: _Reader, machine: Machine, failures: Any) -> tuple[Machine, list[int]]:
    """The machine without the failed parts, and the surviving NPUs' old ids."""
    table = r.table(failures, "failures", _FAILURES)
    switches = {s.label: machine.num_npus + i for i, s in enumerate(machine.switches)}
    npus = []
    for i, v in enumerate(r.list(table.get("npus", []), "failures.npus")):
        node = r.npu(v, f"failures.npus[{i}]", machine.num_npus)
        if node in npus:
            raise r.error(f"failures.npus[{i}]", f"NPU {node} is listed twice")
        npus.append(node)
    if npus and len(npus) == machine.num_npus:
        raise r.error("failures.npus", f"fails all {machine.num_npus} NPUs; at least one must remain")
    removed: set[int] = set()
    for i, item in enumerate(r.list(table.get("links", []), "failures.links")):
        where = f"failures.links[{i}]"
        if isinstance(item, list):
            if len(item) != 2:
                raise r.error(where, f"must be [u, v] or a table with src and dst, got {item!r}")
            entry = {"src": item[0], "dst": item[1]}
            src_path, dst_path = f"{where}[0]", f"{where}[1]"
        else:
            entry = r.table(item, where, _FAILED_LINK, ("src", "dst"))
            src_path, dst_path = f"{where}.src", f"{where}.dst"
        u = r.node(entry["src"], src_path, machine.num_npus, switches)
        v = r.node(entry["dst"], dst_path, machine.num_npus, switches)
        count = r.int(entry["count"], f"{where}.count", 1) if "count" in entry else None
        both = r.bool(entry.get("bidirectional", True), f"{where}.bidirectional")
        for a, b in ((u, v), (v, u)) if both else ((u, v),):
            alive = [e for e in machine.links_between(a, b) if e not in removed]
            if not alive or (count is not None and len(alive) < count):
                have = f"only {len(alive)}" if alive else "no"
                raise r.error(where, f"{have} working link(s) {machine.label(a)} -> "
                                     f"{machine.label(b)} to fail")
            removed.update(alive[:count])
    survivors = [v for v in range(machine.num_npus) if v not in npus]
    return (machine.without(links=sorted(removed), npus=npus) if removed or npus else machine), survivors


# -- entry points ----------------------------------------------------------------------------------


def _plain_figures(r: _Reader, table: Any, npus: int) -> Figures:
    r.table(table, "figures", _FIGURES, ("scale_up",))
    out = r.bandwidth(table["scale_out"], "figures.scale_out") if "scale_out" in table else 0.0
    return Figures.uniform(npus, r.bandwidth(table["scale_up"], "figures.scale_up"), out)


def _cluster_figures(r: _Reader) -> Figures | None:
    """Per GPU: its node model's scale-up figure, plus what it can send into its NICs."""
    if any(model.figures is None for model in r.node_models):
        return None
    multi = sum(group.nodes for group in r.node_groups) > 1
    parts = []
    for group, model in zip(r.node_groups, r.node_models):
        out = np.zeros(group.node.num_npus)
        for served in group.nics if multi else ():
            out[list(served)] += group.port_bandwidth(served)
        parts += [Figures(model.figures.scale_up, out)] * group.nodes
    return Figures.concat(parts)


def _checked_figures(r: _Reader, machine: Machine, figures: Figures) -> Figures:
    problems = faster_than_figures(machine, figures)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise r.error("figures", f"{machine.name} is faster than its sources: {problems[0]}{more}")
    return figures


def model_from_dict(data: dict[str, Any], source: str, default_name: str = "machine", *,
                    base_dir: str | os.PathLike | None = None, depth: int = 0) -> MachineModel:
    """The model a parsed model file describes: machine, provenance and figures. ``base_dir``
    resolves relative paths of the node models a cluster names."""
    r = _Reader(source, _resolver(Path(base_dir) if base_dir is not None else None, depth))
    r.table(data, "", _TOP)
    data, provenance = unwrap_sources(data, source)
    machine = r.table(data.get("machine", {}), "machine", _MACHINE)
    name = r.str(machine["name"], "machine.name") if "name" in machine else default_name
    kind = None
    if "topology" in data:
        for key in ("switches", "links"):
            if key in data:
                raise r.error(key, "an explicit graph cannot be combined with [topology]")
        for key in ("npus", "labels", "positions"):
            if key in machine:
                raise r.error(f"machine.{key}", "is for explicit graphs; [topology] sets it")
        built = _generated(r, data["topology"]).renamed(name)
        kind = data["topology"]["kind"]
    elif "npus" in machine:
        built = _explicit(r, data, machine, name)
    else:
        raise r.error("", "needs either a [topology] table (a generator call) or machine.npus with [[links]]")
    if "description" in machine:
        built = built.renamed(name, r.str(machine["description"], "machine.description"))
    if kind == "cluster":
        if "figures" in data:
            raise r.error("figures", "a cluster's figures come from its node models and NICs")
        figures = _cluster_figures(r)
        provenance = provenance.merged(*(model.provenance.prefixed(f"topology.groups[{i}].node")
                                         for i, model in enumerate(r.node_models)))
    else:
        figures = _plain_figures(r, data["figures"], built.num_npus) if "figures" in data else None
    if "failures" in data:
        built, survivors = _failed(r, built, data["failures"])
        if figures is not None:
            figures = Figures(figures.scale_up[survivors], figures.scale_out[survivors])
    if figures is not None:
        figures = _checked_figures(r, built, figures)
    extra = _machine_sources(r)
    return MachineModel(built.with_sources(*extra) if extra else built, provenance, figures)


def _machine_sources(r: _Reader) -> list[str]:
    """Where the numbers not written as plain values came from (NCCL latency presets), this file's
    and then, once each, its node models'."""
    out = r.sources()
    for model in r.node_models:
        out += [f"{model.machine.name}: {line}" for line in model.machine.sources
                if f"{model.machine.name}: {line}" not in out]
    return out


def machine_from_dict(data: dict[str, Any], source: str, default_name: str = "machine") -> Machine:
    """Builds the machine a parsed model file describes (``model_from_dict`` for the rest)."""
    return model_from_dict(data, source, default_name).machine


def _resolver(base_dir: Path | None, depth: int) -> Callable[[str, str], MachineModel]:
    """Reads a model a cluster names: a built-in name, or a path relative to ``base_dir``."""
    def resolve(ref: str, path: str) -> MachineModel:
        if depth + 1 >= MAX_MODEL_DEPTH:
            raise InputError(f"models name models more than {MAX_MODEL_DEPTH} deep (does {ref!r} "
                             "name itself?)")
        return load_model_file(model_path(ref, base_dir), depth=depth + 1)
    return resolve


def load_model_file(path: str | os.PathLike, *, depth: int = 0) -> MachineModel:
    """Reads a TOML model file; its name defaults to the file name without ``.toml``."""
    path = Path(path)
    return model_from_dict(read_toml(path), str(path), path.stem, base_dir=path.parent, depth=depth)


def load_machine_file(path: str | os.PathLike) -> Machine:
    """The machine of a TOML model file (``load_model_file`` for its sources and figures)."""
    return load_model_file(path).machine


# -- writing ---------------------------------------------------------------------------------------


def _exact(value: float, units: tuple[tuple[str, float], ...]) -> str:
    """The shortest "<number> <unit>" that parses back to exactly ``value``."""
    best = None
    for unit, factor in units:
        number = value / factor
        text = f"{int(number)}" if number.is_integer() and abs(number) < 2**53 else repr(number)
        if float(text) * factor == value and (best is None or len(text) < len(best[0])):
            best = (text, unit)
    assert best is not None, value  # the unit with factor 1 always round-trips
    return f"{best[0]} {best[1]}"


_BANDWIDTH_UNITS = (("GiB/s", 2.0**30), ("GB/s", 1e9), ("MiB/s", 2.0**20), ("MB/s", 1e6), ("B/s", 1.0))
_TIME_UNITS = (("us", 1e-6), ("ns", 1e-9), ("ms", 1e-3), ("s", 1.0))


def machine_to_dict(machine: Machine) -> dict[str, Any]:
    """The explicit-graph form of any machine; link ids survive (consecutive u→v, v→u links with
    equal figures become ``bidirectional``, repeats of that unit become ``count``)."""
    def node(v: int) -> int | str:
        return v if v < machine.num_npus else machine.label(v)

    rows = list(zip(machine.link_src.tolist(), machine.link_dst.tolist(),
                    machine.link_bandwidth.tolist(), machine.link_latency.tolist()))
    links, e = [], 0
    while e < len(rows):
        u, v, bw, lat = rows[e]
        unit = [rows[e]]
        if e + 1 < len(rows) and rows[e + 1] == (v, u, bw, lat):
            unit.append(rows[e + 1])
        count = 1
        while rows[e + count * len(unit):e + (count + 1) * len(unit)] == unit:
            count += 1
        entry: dict[str, Any] = {"src": node(u), "dst": node(v), "bandwidth": _exact(bw, _BANDWIDTH_UNITS),
                                 "latency": _exact(lat, _TIME_UNITS)}
        if count > 1:
            entry["count"] = count
        if len(unit) == 2:
            entry["bidirectional"] = True
        links.append(entry)
        e += count * len(unit)
    head: dict[str, Any] = {"name": machine.name, "description": machine.description,
                            "npus": machine.num_npus, "labels": list(machine.npu_labels)}
    if machine.positions is not None:
        head["positions"] = [[float(x), float(y)] for x, y in machine.positions]
    data: dict[str, Any] = {"machine": head}
    if machine.switches:
        data["switches"] = [{"name": s.label, "multicast": s.multicast, "reduce": s.reduce}
                            for s in machine.switches]
    data["links"] = links
    return data


def machine_to_toml(machine: Machine) -> str:
    import tomli_w  # writing TOML: only here, not for every command that reads a machine

    return tomli_w.dumps(machine_to_dict(machine))
