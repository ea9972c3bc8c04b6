"""Per-NPU bandwidth figures from a model's sources, and the check that the model is not faster
(docs/model.md §3: "a model must never be faster than the hardware it names").

A model file may state, under ``[figures]``, what its cited documents give per NPU and direction:
``scale_up`` (NVLink, Infinity Fabric, ICI, NeuronLink: the NPU's links inside its scale-up
domain) and ``scale_out`` (its NIC ports). A cluster's figures are composed from its node models'
figures and its NICs. Loading a model whose NPUs send or receive more than their figures say is
an error; ``optcoll model show`` prints the comparison.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.machines.machine import Machine
from optcoll.units import bandwidth_text

#: Relative slack for float noise when comparing a model with its figures.
_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class Figures:
    """Bytes/s per direction, one entry per NPU."""

    scale_up: np.ndarray
    scale_out: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.scale_up + self.scale_out

    @classmethod
    def uniform(cls, npus: int, scale_up: float, scale_out: float = 0.0) -> "Figures":
        return cls(np.full(npus, float(scale_up)), np.full(npus, float(scale_out)))

    @classmethod
    def concat(cls, parts: list["Figures"]) -> "Figures":
        return cls(np.concatenate([p.scale_up for p in parts]), np.concatenate([p.scale_out for p in parts]))


def npu_bandwidth(machine: Machine) -> tuple[np.ndarray, np.ndarray]:
    """(egress, ingress) of every NPU in B/s: the sums over its out- and in-links."""
    nodes, n = machine.num_nodes, machine.num_npus
    egress = np.bincount(machine.link_src, weights=machine.link_bandwidth, minlength=nodes)[:n]
    ingress = np.bincount(machine.link_dst, weights=machine.link_bandwidth, minlength=nodes)[:n]
    return egress, ingress


def faster_than_figures(machine: Machine, figures: Figures) -> list[str]:
    """One line per way the machine's NPUs exceed their figures (empty: it does not)."""
    limit = figures.total * (1 + _TOLERANCE)
    problems = []
    for what, values in zip(("sends", "receives"), npu_bandwidth(machine)):
        for v in np.flatnonzero(values > limit)[:3]:
            problems.append(f"NPU {machine.label(int(v))} {what} {bandwidth_text(float(values[v]))}, but "
                            f"its sources give {bandwidth_text(float(figures.total[v]))} per direction")
    return problems


def render_figures(machine: Machine, figures: Figures | None) -> str:
    """A line comparing the per-NPU bandwidth with the figures of the sources."""
    if figures is None:
        return "  per-NPU figures: none stated in the model file"
    egress, ingress = npu_bandwidth(machine)

    def span(values: np.ndarray) -> str:
        low, high = float(values.min()), float(values.max())
        return bandwidth_text(low) if low == high else f"{bandwidth_text(low)} .. {bandwidth_text(high)}"

    equal = np.allclose(egress, figures.total, rtol=_TOLERANCE) and np.allclose(ingress, figures.total,
                                                                                 rtol=_TOLERANCE)
    parts = f"scale-up {span(figures.scale_up)}"
    if figures.scale_out.any():
        parts += f" + scale-out {span(figures.scale_out)}"
    verdict = "equal to" if equal else "below"
    return (f"  per-NPU bandwidth per direction: {span(egress)} out, {span(ingress)} in; "
            f"{verdict} the sources' {parts}")
