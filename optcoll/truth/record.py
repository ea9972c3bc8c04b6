"""Recorded ground truth: the best proven lower bound and the best verified schedule, each with
who produced it and how, and the rules for combining old and new claims.

Semantics (docs/model.md §6): the bound is the largest *proven* lower bound ever recorded
(analytic, or a solver's proof in the instance's model); the schedule is the fastest *verified*
schedule ever recorded. "optimal" when they meet. A bound above a verified schedule time cannot
happen unless something is wrong: ``combine`` refuses it with ``TruthContradiction``.

``[results.family]`` is what an exact solve found *within a family of schedules* (AllReduce as
ReduceScatter + AllGather): ``bound`` is the family's own proven bound (the sum of the parts'
bounds), never a lower bound of the instance; ``time`` the family's best schedule (a direct
AllReduce may be faster: that one is ``[results.best]``); ``status``
"optimal" when that time is proven optimal within the family. Records written before this meaning
was fixed kept, for some instances, the solver's instance-wide bound there instead;
``Truth.from_dict`` reads them in this meaning and hands their instance-wide bound over as
``promoted``, which ``truth update`` records as a bound.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

import optcoll
from optcoll.errors import InputError
from optcoll.units import format_time
from optcoll.results.record import MEET_TOLERANCE, meets

OPTIMAL, BOUNDED, UNSOLVED = "optimal", "bounded", "unsolved"
#: ``source`` of a family record: what its ``bound`` is.
FAMILY_SOURCE = "sum of the parts' proven bounds"


class TruthContradiction(Exception):
    """A verified schedule beats a proven bound: a bug in a bound, a solver or the verifier."""


@dataclass(frozen=True)
class Claim:
    """A lower bound or a verified schedule time, with its provenance.

    ``producer``: "analytic", "exact-timed", "exact-step" or a synthesizer name; ``source``: the
    bound's name and witness, or the producer again; ``details``: solver, version, parameters,
    wall time, quantum — whatever reproduces it; ``date`` and ``optcoll_version``: when and by what.
    """

    value: float
    producer: str
    source: str
    details: dict[str, Any] = field(default_factory=dict)
    date: str = field(default_factory=lambda: date.today().isoformat())
    optcoll_version: str = optcoll.__version__

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "producer": self.producer, "source": self.source,
                "date": self.date, "optcoll_version": self.optcoll_version, **self.details}

    @staticmethod
    def from_dict(data: Any, where: str = "results") -> "Claim":
        """A claim from its table; ``InputError`` naming ``where`` when the table was mangled."""
        data = _table(data, where)
        core = ("value", "producer", "source", "date", "optcoll_version")
        value = data.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise InputError(f"must be a number of seconds ≥ 0, got {value!r}", field=f"{where}.value")
        missing = [k for k in ("producer", "source") if k not in data]
        if missing:
            raise InputError(f"missing {', '.join(missing)}", field=where)
        return Claim(float(value), str(data["producer"]), str(data["source"]),
                     {k: v for k, v in data.items() if k not in core}, str(data.get("date", "")),
                     str(data.get("optcoll_version", "")))

    def describe(self) -> str:
        return f"{self.value!r} s from {self.producer} ({self.source}, {self.date})"


@dataclass(frozen=True)
class Truth:
    instance_hash: str
    model: str
    lower_bound: Claim | None
    best: Claim | None
    schedule: str | None = None  # path of the compressed schedule, relative to the instance file
    family: dict[str, Any] | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    updated: str = field(default_factory=lambda: date.today().isoformat())
    #: Instance-wide bounds an older record kept only in its family table (module docstring).
    promoted: tuple[Claim, ...] = ()

    @property
    def status(self) -> str:
        if self.best is None:
            return UNSOLVED
        if self.lower_bound is not None and meets(self.best.value, self.lower_bound.value):
            return OPTIMAL
        return BOUNDED

    @property
    def gap(self) -> float | None:
        if self.best is None or self.lower_bound is None or not self.lower_bound.value:
            return None
        return 0.0 if self.status == OPTIMAL else self.best.value / self.lower_bound.value - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "time": self.best.value if self.best else None,
                "lower_bound": self.lower_bound.value if self.lower_bound else None,
                "gap": self.gap, "model": self.model, "schedule": self.schedule,
                "instance_hash": self.instance_hash, "updated": self.updated,
                "optcoll_version": optcoll.__version__,
                "bound": self.lower_bound.to_dict() if self.lower_bound else None,
                "best": self.best.to_dict() if self.best else None,
                "family": self.family, "environment": self.environment}

    @staticmethod
    def from_dict(data: Any) -> "Truth":
        """The ``[results]`` table; ``InputError`` naming the field when it was edited into nonsense."""
        data = _table(data, "results")
        schedule = data.get("schedule")
        if schedule is not None and not isinstance(schedule, str):
            raise InputError(f"must be a path, got {schedule!r}", field="results.schedule")
        model = str(data.get("model", "timed"))
        updated = str(data.get("updated", ""))
        family, promoted = _read_family(data["family"], model, updated) if "family" in data else (None, ())
        return Truth(str(data.get("instance_hash", "")), model,
                     Claim.from_dict(data["bound"], "results.bound") if "bound" in data else None,
                     Claim.from_dict(data["best"], "results.best") if "best" in data else None,
                     schedule, family, _table(data.get("environment", {}), "results.environment"),
                     updated, promoted)


def unproven(details: dict[str, Any], family: dict[str, Any] | None) -> str:
    """What a bounded instance's record says stopped the proof (``details``: the best schedule's
    claim details; ``family``: the family table): models refused for size or build time, searches
    stopped by their time limit, a time grid whose rounded-up schedules and rounded-down relaxation
    do not meet, a least bound over C taken at another C than the schedule's, or a search confined
    to a family; "" when it says nothing."""
    found: list[str] = []

    def walk(table: dict[str, Any], part: str) -> None:
        grid = _grid_gap(table)
        if grid:
            found.append(f"{part} {grid}")
        for key, value in table.items():
            if isinstance(value, dict):
                walk(value, part if key == "params" else key)
            elif key == "refused" and value:
                found.append(f"{part} model not built: " + ("; ".join(map(str, value)) if isinstance(value, list)
                                                              else str(value)))
            elif key == "interrupted" and value is True:
                found.append(f"{part} search stopped by its time limit")

    walk(details, "exact")
    params = details.get("params", {})
    at, least = params.get("chunks_per_rank"), params.get("bound_chunks")
    if params.get("chunk_choices") and least is not None and at is not None and least != at:
        found.append(f"the least bound over C is the one at C={least}; the best schedule is at C={at}")
    walk(family or {}, "exact")
    if not found and family and "direct" not in family.get("params", {}):
        found.append(f"only the {family.get('family')} family was searched ({family.get('status')} within it)")
    return "; ".join(dict.fromkeys(found))


def _grid_gap(table: dict[str, Any]) -> str:
    """A time-expanded solve on a rounded-up grid whose relaxation proved fewer epochs: the
    schedule is the best its grid found, the bound the rounded-down grid's (docs/model.md §6:
    the two meet only when the grid is exact); "" when ``table`` records no such solve."""
    up, down = table.get("epochs"), table.get("relaxation_epochs")
    if table.get("rounding") != "up" or not isinstance(up, int) or not isinstance(down, int) or down >= up:
        return ""
    q = table.get("quantum")
    step = f" (quantum {format_time(q)})" if isinstance(q, (int, float)) else ""
    return (f"time grid{step}: its schedule takes {up} epochs with link times rounded up, its "
            f"relaxation with them rounded down proves only {down}; the grids meet only where link "
            f"times are multiples of the quantum")


def family_record(params: dict[str, Any], time: float | None, details: dict[str, Any]) -> dict[str, Any]:
    """The ``[results.family]`` table of an exact solve within a family (module docstring)."""
    return {"family": params["family"], "bound": params.get("family_lower_bound"), "source": FAMILY_SOURCE,
            "time": params.get("family_time", time), "status": "optimal" if params.get("family_optimal") else "feasible",
            **details}


def _read_family(data: Any, model: str, updated: str) -> tuple[dict[str, Any], tuple[Claim, ...]]:
    """A family table in today's meaning, and the instance-wide bound an older one held instead."""
    family = _table(data, "results.family")
    source = str(family.get("source", ""))
    params = family.get("params") if isinstance(family.get("params"), dict) else {}
    if source == FAMILY_SOURCE or source.startswith("family:") or "family_lower_bound" not in params:
        return family, ()  # the family's own bound (today's, or the old "family: ... + ..." sum)
    details = {k: v for k, v in family.items() if k not in ("family", "bound", "source", "time", "status")}
    promoted = Claim.from_dict({"date": updated, **details, "value": family.get("bound"), "source": source,
                                "producer": f"exact-{model}"}, "results.family")
    return family_record({"family": family.get("family"), **params}, family.get("time"), details), (promoted,)


def _table(data: Any, field: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InputError(f"must be a table, got {data!r}", field=field)
    return dict(data)


def above(bound: float, time: float) -> bool:
    """True when ``bound`` exceeds ``time`` by more than float noise."""
    return bound > time * (1 + MEET_TOLERANCE) + 1e-15


def check_consistent(instance: str, bounds: list[Claim], times: list[Claim]) -> None:
    """Every bound ≤ every verified time, or a loud ``TruthContradiction`` naming both."""
    if not bounds or not times:
        return
    bound = max(bounds, key=lambda c: c.value)
    time = min(times, key=lambda c: c.value)
    if above(bound.value, time.value):
        raise TruthContradiction(
            f"{instance}: the verified schedule time {time.describe()} is below the proven lower "
            f"bound {bound.describe()}. One of them is wrong: this is a bug in a bound, a solver "
            "or the verifier; nothing was recorded.")


def combine(instance: str, old: Truth | None, bounds: list[Claim], times: list[Claim]
            ) -> tuple[Claim | None, Claim | None]:
    """The best bound and the best time over the old record and the new claims.

    Old claims come first, so on a tie the recorded provenance is kept (no churn); a proven
    optimum is therefore never replaced by a worse value, only by an equal or better one, and a
    better one below it raises ``TruthContradiction``.
    """
    all_bounds = ([old.lower_bound] if old and old.lower_bound else []) + bounds
    all_times = ([old.best] if old and old.best else []) + times
    check_consistent(instance, all_bounds, all_times)
    best_bound = max(all_bounds, key=lambda c: c.value) if all_bounds else None
    best_time = min(all_times, key=lambda c: c.value) if all_times else None
    return best_bound, best_time
