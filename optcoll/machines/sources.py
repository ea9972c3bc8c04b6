"""Where a model's numbers come from (docs/model.md §3: "every number in a machine file carries
its source, and says per direction or bidirectional").

A model file cites its documents once, in ``[sources.<key>]`` tables, and any number may be written
as a *sourced value* that names one (or a list) of them::

    [sources.dgx-h100]
    title = "NVIDIA DGX H100 User Guide: Introduction to the NVIDIA DGX H100 System"
    url = "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html"

    [topology]
    bandwidth = { value = "900 GB/s", per = "bidirectional", source = "dgx-h100",
                  note = "18 NVLink4 links of 50 GB/s (25 GB/s per direction) per GPU" }
    latency = { value = "0.5 us", source = "nccl-tuning", estimate = true,
                note = "of the order of NCCL's NVLink per-step latency (LL protocol)" }

``per = "bidirectional"`` halves the figure: links are modelled per direction, and the links these
figures describe are symmetric. ``estimate = true`` marks a number no document states; its
``note`` must say what it is based on.

Sources are required of the built-in catalog (a test fails on any physical number without one) and
optional for users: ``unwrap_sources`` accepts plain values and lists the unsourced physical fields,
which ``optcoll model show`` prints; an NCCL latency preset (``"nccl:simple:nvlink"``,
``nccl_latency.py``) names its own source and counts as sourced. Physical fields are the bandwidths, latencies, link counts,
NIC sharing, oversubscription ratios and switch capabilities (``PHYSICAL_KEYS``) and every per-NPU
figure under ``[figures]``; shape parameters (NPU and node counts, dimensions) are the model's
choice and need no source.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optcoll.errors import InputError
from optcoll.inputfiles import join, kind_of, known_keys
from optcoll.machines.nccl_latency import is_preset
from optcoll.units import parse_bandwidth

#: Keys whose values are physical facts of the hardware (besides every key ending in
#: "bandwidth" or "latency").
PHYSICAL_KEYS = frozenset({"count", "links_per_npu", "gpus_per_nic", "multicast", "reduce",
                           "oversubscription"})
#: Top-level sections that hold no numbers about the hardware.
_NOT_HARDWARE = frozenset({"sources", "machine", "failures"})
_VALUE_KEYS = ("value", "source", "per", "note", "estimate")
_CITATION_KEYS = ("title", "url")
PER = ("direction", "bidirectional")


def is_physical(path: str) -> bool:
    """True for a field path whose value is a physical fact (see the module docstring)."""
    if path.startswith("figures."):
        return True
    last = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return last.endswith("bandwidth") or last.endswith("latency") or last in PHYSICAL_KEYS


def _is_bandwidth(path: str) -> bool:
    last = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return last.endswith("bandwidth") or path.startswith("figures.")


@dataclass(frozen=True)
class Citation:
    """One cited document: ``key`` is how values name it."""

    key: str
    title: str
    url: str = ""

    def text(self) -> str:
        return f"{self.title} <{self.url}>" if self.url else self.title


@dataclass(frozen=True)
class SourcedValue:
    """One number of a model file and where it comes from, as written (before halving)."""

    field: str
    value: Any
    sources: tuple[str, ...]
    per: str | None = None
    note: str = ""
    estimate: bool = False

    def text(self) -> str:
        per = f" per {self.per}" if self.per == "direction" else " bidirectional" if self.per else ""
        kind = "estimate" if self.estimate else ", ".join(self.sources) or "no source"
        cited = f"{kind}: {', '.join(self.sources)}" if self.estimate and self.sources else kind
        note = f" ({self.note})" if self.note else ""
        return f"{self.field} = {self.value}{per} [{cited}]{note}"


@dataclass(frozen=True)
class Provenance:
    """Everything a model file says about where its numbers come from."""

    citations: tuple[Citation, ...] = ()
    values: tuple[SourcedValue, ...] = ()
    unsourced: tuple[str, ...] = ()

    def prefixed(self, prefix: str) -> "Provenance":
        """The same provenance with every field path under ``prefix`` (a node model inside a
        cluster); citations keep their keys."""
        return Provenance(self.citations,
                          tuple(SourcedValue(f"{prefix}.{v.field}", v.value, v.sources, v.per, v.note,
                                             v.estimate) for v in self.values),
                          tuple(f"{prefix}.{f}" for f in self.unsourced))

    def merged(self, *others: "Provenance") -> "Provenance":
        citations = {c.key: c for p in (self, *others) for c in p.citations}
        return Provenance(tuple(citations.values()),
                          tuple(v for p in (self, *others) for v in p.values),
                          tuple(f for p in (self, *others) for f in p.unsourced))

    def summary(self, width: int = 80) -> str:
        """One line: the cited documents' titles up to their first colon, shortened."""
        if not self.citations:
            return "no sources cited"
        text = "; ".join(c.title.split(":", 1)[0] for c in self.citations)
        return text if len(text) <= width else text[:width - 1].rstrip() + "…"

    def to_dict(self) -> dict[str, Any]:
        return {"citations": [{"key": c.key, "title": c.title, "url": c.url} for c in self.citations],
                "values": [{"field": v.field, "value": v.value, "sources": list(v.sources),
                            "per": v.per, "note": v.note, "estimate": v.estimate} for v in self.values],
                "unsourced": list(self.unsourced)}

    def render(self) -> str:
        lines = ["  sources:"] if self.citations else ["  sources: none cited"]
        lines += [f"    [{c.key}] {c.text()}" for c in self.citations]
        if self.values:
            lines.append("  sourced values:")
            lines += [f"    {v.text()}" for v in self.values]
        if self.unsourced:
            lines.append(f"  unsourced: {', '.join(self.unsourced)}")
        return "\n".join(lines)


def _citations(data: dict[str, Any], source: str) -> tuple[Citation, ...]:
    table = data.get("sources", {})
    if not isinstance(table, dict):
        raise InputError(f"must be a table of [sources.<key>] tables, got {kind_of(table)}",
                         source=source, field="sources")
    out = []
    for key, entry in table.items():
        where = f"sources.{key}"
        known_keys(entry, where, _CITATION_KEYS, source)
        title, url = entry.get("title"), entry.get("url", "")
        if not isinstance(title, str) or not title.strip():
            raise InputError("missing: every source needs a title", source=source, field=f"{where}.title")
        if not isinstance(url, str):
            raise InputError(f"must be a string, got {kind_of(url)}", source=source, field=f"{where}.url")
        out.append(Citation(str(key), title.strip(), url.strip()))
    return tuple(out)


class _Unwrapper:
    def __init__(self, source: str, citations: tuple[Citation, ...]):
        self.source = source
        self.keys = {c.key for c in citations}
        self.values: list[SourcedValue] = []
        self.unsourced: list[str] = []

    def error(self, path: str, message: str) -> InputError:
        return InputError(message, source=self.source, field=path)

    def walk(self, value: Any, path: str) -> Any:
        if isinstance(value, dict) and "value" in value:
            return self.sourced(value, path)
        if isinstance(value, dict):
            return {k: self.walk(v, join(path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.walk(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if is_physical(path) and not is_preset(value):  # a preset names its own source
            self.unsourced.append(path)
        return value

    def sourced(self, table: dict[str, Any], path: str) -> Any:
        known_keys(table, path, _VALUE_KEYS, self.source)
        value = table["value"]
        if isinstance(value, (dict, list)):
            raise self.error(f"{path}.value", f"must be a single value, got {kind_of(value)}")
        names = table.get("source", [])
        names = [names] if isinstance(names, str) else names
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise self.error(f"{path}.source", "must name a [sources.<key>] table or a list of them")
        for name in names:
            if name not in self.keys:
                known = ", ".join(sorted(self.keys)) or "none"
                raise self.error(f"{path}.source", f"no [sources.{name}] table (sources: {known})")
        note = table.get("note", "")
        estimate = table.get("estimate", False)
        if not isinstance(note, str):
            raise self.error(f"{path}.note", f"must be a string, got {kind_of(note)}")
        if not isinstance(estimate, bool):
            raise self.error(f"{path}.estimate", f"must be true or false, got {kind_of(estimate)}")
        if estimate and not note.strip():
            raise self.error(f"{path}.note", "an estimate must say what it is based on")
        per = table.get("per")
        if per is not None:
            if not _is_bandwidth(path):
                raise self.error(f"{path}.per", "only bandwidths are per direction or bidirectional")
            if per not in PER:
                raise self.error(f"{path}.per", f"must be one of {', '.join(PER)}, got {per!r}")
        if not names and not estimate and is_physical(path):
            self.unsourced.append(path)
        self.values.append(SourcedValue(path, value, tuple(names), per, note.strip(), estimate))
        if per == "bidirectional":
            try:
                return f"{parse_bandwidth(value) / 2!r} B/s"  # repr round-trips exactly
            except InputError as exc:
                raise exc.located(self.source, f"{path}.value") from None
        return value


def unwrap_sources(data: dict[str, Any], source: str) -> tuple[dict[str, Any], Provenance]:
    """``data`` with every sourced value replaced by the value the model uses (per direction),
    and the provenance of its numbers. Problems are ``InputError``s naming ``source`` and field."""
    citations = _citations(data, source)
    unwrapper = _Unwrapper(source, citations)
    plain = {key: value if key in _NOT_HARDWARE else unwrapper.walk(value, key)
             for key, value in data.items() if key != "sources"}
    return plain, Provenance(citations, tuple(unwrapper.values), tuple(unwrapper.unsourced))
