"""Instance suites: a directory of instance files plus an optional ``suite.toml``.

A suite is named by a path to a directory (or one instance file), or by the name of a built-in
suite (``quick``, ``standard``, ``frontier``, ``machines``, ``sizes``) found like the built-in machine models: in
``optcoll/_instances`` of an installed wheel, in ``instances/`` of a source checkout.

``suite.toml`` (optional) says which instances the report's plots use::

    [suite]
    description = "..."
    runs = 20                         # greedy seeds per instance unless --runs says otherwise

    [plots.sizes]                     # time versus message size
    instance = "dgx1-allgather-c1"    # file name without .toml
    chunks = [1, 2, 3]                # one optimal curve per chunk count
    from = "1 KiB"
    to = "1 GiB"
    points = 11                       # geometric steps

    [plots.pareto]                    # the step model's Pareto front
    instance = "dgx1-allgather-c1"
    max_chunks = 6

Every instance is carried as an ``InstanceSpec``: its parsed file (without the recorded
``[results]``) and optional overrides of size, C and link occupancy, with a content hash that
keys cached results.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from optcoll.bundled import bundled_dir, bundled_origin
from optcoll.errors import InputError
from optcoll.instances.instance import Instance
from optcoll.inputfiles import known_keys, read_toml
from optcoll.instances.instancefile import instance_from_dict
from optcoll.units import parse_size

SUITE_FILE = "suite.toml"
_SUITE_KEYS = {"suite", "plots", "check"}  # [check]: thresholds of ``optcoll check``


def instances_dir() -> Path:
    """Built-in suites: ``optcoll/_instances`` when installed, ``instances/`` in a checkout."""
    return bundled_dir("instances")


def builtin_suite_origin(ref: str) -> str | None:
    """Which copy a built-in suite name reads (None when ``ref`` is a path, not a name)."""
    if "/" in ref or Path(ref).exists() or ref not in builtin_suite_names():
        return None
    return f"built-in suite {ref}: {instances_dir() / ref} ({bundled_origin('instances')})"


def builtin_suite_names() -> list[str]:
    root = instances_dir()
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


@dataclass(frozen=True)
class InstanceSpec:
    """One instance as a sweep sees it: where it came from, its content, and any overrides."""

    path: Path
    data: dict[str, Any]
    size: str | None = None
    chunks_per_rank: int | None = None
    occupancy: str | None = None  # the timed model's link occupancy (docs/model.md §5)

    @property
    def name(self) -> str:
        base = self.data.get("instance", {}).get("name", self.path.stem)
        parts = [base] + ([f"size={self.size}"] if self.size else []) + \
            ([f"C={self.chunks_per_rank}"] if self.chunks_per_rank else []) + \
            ([f"occupancy={self.occupancy}"] if self.occupancy else [])
        return parts[0] if len(parts) == 1 else f"{parts[0]}[{','.join(parts[1:])}]"

    def derive(self, *, size: str | None = None, chunks_per_rank: int | None = None,
               occupancy: str | None = None) -> "InstanceSpec":
        return InstanceSpec(self.path, self.data, size or self.size, chunks_per_rank or self.chunks_per_rank,
                            occupancy or self.occupancy)

    @cached_property
    def instance(self) -> Instance:
        data = {k: v for k, v in self.data.items() if k != "results"}
        table = dict(data["instance"]) if isinstance(data.get("instance"), dict) else {}
        if self.size is not None:
            table["size"] = self.size
        if self.chunks_per_rank is not None:
            table["chunks_per_rank"] = self.chunks_per_rank
        if table:
            table["name"] = self.name
            data["instance"] = table
        if self.occupancy is not None:
            data["model"] = {**(data.get("model") or {}), "occupancy": self.occupancy}
        return instance_from_dict(data, str(self.path), self.path.parent, default_name=self.name)

    @cached_property
    def content_key(self) -> str:
        """A hash of everything a result depends on: the instance's tables (not the recorded
        results), the overrides, the machine in explicit form (a built-in model may change),
        chunk sizes where they differ (an AlltoAllv matrix file may change) and the allowed C
        of an instance that leaves C free."""
        from optcoll.machines.modelfile import machine_to_dict

        data = {k: v for k, v in self.data.items() if k != "results"}
        sizes = self.instance.collective.chunk_sizes
        choices = self.instance.chunk_choices  # "free" names a set that may change: hash the set
        return digest({"instance": data, "size": self.size, "chunks_per_rank": self.chunks_per_rank,
                       **({"occupancy": self.occupancy} if self.occupancy else {}),
                       "machine": machine_to_dict(self.instance.machine),
                       **({"chunk_choices": list(choices)} if choices else {}),
                       **({} if sizes is None else {"chunk_sizes": hashlib.sha256(sizes.tobytes()).hexdigest()})})

    @cached_property
    def question_key(self) -> str:
        """The content key without what does not change the answer: the budget and the names.
        Instances of two suites with one question key ask one question (issue 34)."""
        from optcoll.machines.modelfile import machine_to_dict

        inst = self.instance
        data = {k: v for k, v in self.data.items() if k not in ("results", "budget")}
        table = {k: v for k, v in data.get("instance", {}).items() if k not in ("name", "description", "machine",
                                                                                 "size", "chunks_per_rank")}
        c = inst.collective
        sizes = c.chunk_sizes
        return digest({"instance": {**data, "instance": table}, "size": c.size_bytes, "chunks": c.chunks_per_rank,
                       "machine": machine_to_dict(inst.machine), "chunk_choices": list(inst.chunk_choices),
                       **({} if sizes is None else {"chunk_sizes": hashlib.sha256(sizes.tobytes()).hexdigest()})})

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the cached instance: a remote worker rebuilds it from the content."""
        return {k: v for k, v in self.__dict__.items() if k != "instance"}


def _read_spec(path: Path) -> InstanceSpec:
    """An instance file, read in full now: a bad instance anywhere in a suite stops the command
    before anything runs or is written."""
    data = read_toml(path)
    if "instance" not in data:
        raise InputError("not an instance file (no [instance] table)", source=str(path))
    spec = InstanceSpec(path, data)
    _ = spec.instance
    return spec


@dataclass(frozen=True)
class SizesPlot:
    instance: str
    chunks: tuple[int, ...]
    sizes: tuple[float, ...]


@dataclass(frozen=True)
class ParetoPlot:
    instance: str
    max_chunks: int


@dataclass(frozen=True)
class Suite:
    name: str
    directory: Path
    specs: tuple[InstanceSpec, ...]
    description: str = ""
    runs: int | None = None
    sizes: SizesPlot | None = None
    pareto: ParetoPlot | None = None

    def spec(self, name: str) -> InstanceSpec:
        for spec in self.specs:
            if spec.path.stem == name or spec.name == name:
                return spec
        raise InputError(f"no instance named {name!r} in suite {self.name!r}",
                         source=str(self.directory / SUITE_FILE))


def geometric_sizes(start: float, stop: float, points: int) -> tuple[float, ...]:
    """``points`` sizes from start to stop, equal ratios, rounded to whole bytes."""
    if points == 1:
        return (start,)
    ratio = (stop / start) ** (1 / (points - 1))
    return tuple(float(round(start * ratio ** i)) for i in range(points))


def _sizes_plot(table: Any, source: str) -> SizesPlot:
    def err(key: str, message: str) -> InputError:
        return InputError(message, source=source, field=f"plots.sizes.{key}")

    known_keys(table, "plots.sizes", ("instance", "chunks", "from", "to", "points"), source)
    if not isinstance(table.get("instance"), str):
        raise err("instance", "missing or not a string")
    chunks = table.get("chunks", [1])
    if not isinstance(chunks, list) or not chunks or not all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in chunks):
        raise err("chunks", "must be a non-empty list of positive integers")
    try:
        start, stop = parse_size(table.get("from", "1 KiB")), parse_size(table.get("to", "1 GiB"))
    except InputError as exc:
        raise exc.located(source, "plots.sizes") from None
    points = table.get("points", 11)
    if isinstance(points, bool) or not isinstance(points, int) or points < 1 or not 0 < start <= stop:
        raise err("points", "needs points ≥ 1 and 0 < from ≤ to")
    return SizesPlot(table["instance"], tuple(chunks), geometric_sizes(start, stop, points))


def _pareto_plot(table: Any, source: str) -> ParetoPlot:
    known_keys(table, "plots.pareto", ("instance", "max_chunks"), source)
    if not isinstance(table.get("instance"), str):
        raise InputError("missing or not a string", source=source, field="plots.pareto.instance")
    max_chunks = table.get("max_chunks", 4)
    if isinstance(max_chunks, bool) or not isinstance(max_chunks, int) or max_chunks < 1:
        raise InputError("must be a positive integer", source=source, field="plots.pareto.max_chunks")
    return ParetoPlot(table["instance"], max_chunks)


def _config(directory: Path) -> dict[str, Any]:
    """suite.toml's tables ([check] is read by ``optcoll.check.config``)."""
    path = directory / SUITE_FILE
    if not path.exists():
        return {}
    source = str(path)
    data = read_toml(path)
    known_keys(data, "", sorted(_SUITE_KEYS), source, sections=True)
    known_keys(data.get("suite", {}), "suite", ("description", "runs"), source)
    known_keys(data.get("plots", {}), "plots", ("sizes", "pareto"), source)
    if not isinstance(data.get("suite", {}).get("description", ""), str):
        raise InputError("must be a string", source=source, field="suite.description")
    return data


def find_suite(ref: str) -> Suite:
    """A suite from a built-in name, a directory, or a single instance file."""
    path = Path(ref)
    if path.is_file():
        return Suite(path.stem, path.parent, (_read_spec(path),))
    if not path.is_dir():
        builtin = instances_dir() / ref
        if "/" in ref or not builtin.is_dir():
            raise InputError(f"no suite directory or instance file {ref!r}, and no built-in suite "
                             f"of that name; built-in: {', '.join(builtin_suite_names()) or 'none'}")
        path = builtin
    files = sorted(p for p in path.glob("*.toml") if p.name != SUITE_FILE)
    if not files:
        raise InputError("no instance files (*.toml) in this directory", source=str(path))
    specs = tuple(_read_spec(p) for p in files)
    config = _config(path)
    source = str(path / SUITE_FILE)
    head = config.get("suite", {})
    runs = head.get("runs")
    if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 1):
        raise InputError("must be a positive integer", source=source, field="suite.runs")
    plots = config.get("plots", {})
    suite = Suite(path.name, path, specs, str(head.get("description", "")), runs,
                  _sizes_plot(plots["sizes"], source) if "sizes" in plots else None,
                  _pareto_plot(plots["pareto"], source) if "pareto" in plots else None)
    for plot in (suite.sizes, suite.pareto):
        if plot is not None:
            suite.spec(plot.instance)
    return suite


def size_label(nbytes: float) -> str:
    """A size as an exact, parseable string for instance overrides ("1048576 B")."""
    if not math.isfinite(nbytes) or nbytes <= 0:
        raise ValueError(nbytes)
    return f"{int(nbytes)} B" if float(nbytes).is_integer() else f"{nbytes!r} B"
