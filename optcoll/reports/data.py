"""The gap report as plain data, assembled from sweep records and recorded ground truth.

Yardstick: each instance's *bound* is the largest proven lower bound known (analytic, the exact
solver's proof, or the recorded truth); its *best* is the fastest verified schedule known. A
producer's gap is time / bound − 1: exact when the instance is optimal (bound = optimum), an upper
bound on the true gap otherwise. Every verified time is checked against every proven bound first
(``TruthContradiction`` when one beats the other: a bug, never a report).

NCCL's algorithms are judged at the chunking NCCL itself uses at the instance's size
(``analysis.nccl_chunking``; α pipelined, ``sweeps.plan.nccl_jobs``), not at the instance's C: a
C NCCL never runs would blame it for the wrong thing. Their yardstick is the row's ``nccl_bound``,
the least over the C values they ran at of the best analytic bound at that C (every one of
their schedules is at one of those C, so it holds for each); their results at the instance's C
stay in ``nccl_fixed`` for comparison. Where the chunking is not modelled they run at the
instance's C like every other producer.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.instances.instance import Instance
from optcoll.results.record import meets
from optcoll.sweeps.jobs import FAILED, NOT_APPLICABLE
from optcoll.instances.suite import InstanceSpec
from optcoll.truth.record import OPTIMAL, Claim, Truth, check_consistent, unproven

EXACT = "exact"


@dataclass(frozen=True)
class ProducerResult:
    label: str
    status: str  # optimal | bounded | heuristic | infeasible | unknown | failed | not-applicable | recorded
    time: float | None
    gap: float | None
    wall_time: float | None
    seeds: tuple[float, ...] = ()  # every seed's verified time (randomised synthesizers)
    reason: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    recorded: bool = False  # taken from the instance's recorded truth instead of a fresh run
    #: A recorded result only: this run's own exact time it beat (None: this run's exact solver
    #: gave no schedule: it did not run, failed, or found none).
    beat: float | None = None
    #: At NCCL's own chunking (how it was found; ``analysis.nccl_chunking.Chunking.describe``),
    #: the gap against the row's ``nccl_bound``; empty: at the instance's C, against ``bound``.
    own_chunking: str = ""

    @property
    def mark(self) -> str:
        """The report's mark for a recorded result (``content.legend``): what this run did."""
        if not self.recorded:
            return ""
        return "†" if self.beat is not None else "‡"

    @property
    def ran(self) -> bool:
        return self.time is not None


@dataclass(frozen=True)
class InstanceRow:
    suite: str
    name: str
    file: str
    network: str
    npus: int
    collective: str
    size_bytes: float
    chunks_per_rank: int
    chunk_bytes: float
    model: str
    bounds: tuple[dict[str, Any], ...]  # every analytic bound: name, value, detail, exact
    bound: float | None
    bound_source: str
    best: float | None
    best_source: str
    status: str  # optimal | bounded | unsolved
    producers: dict[str, ProducerResult]
    family: dict[str, Any] | None = None
    #: C left free: the allowed set (``chunks_per_rank`` and ``chunk_bytes`` are then the best
    #: schedule's, the C it chose). Empty when the instance fixes C.
    chunk_choices: tuple[int, ...] = ()
    #: Bounded instances: what the record says stopped the proof (``truth.record.unproven``).
    unproven: str = ""
    #: The yardstick of NCCL's algorithms at their own chunking (module docstring) and its source.
    nccl_bound: float | None = None
    nccl_bound_source: str = ""
    #: NCCL's algorithms at the instance's C, where ``producers`` holds them at their own chunking.
    nccl_fixed: dict[str, ProducerResult] = field(default_factory=dict)
    #: What the bytes alone force (``bandwidth_floor``), at the C of the best schedule.
    bandwidth_floor: float | None = None

    @property
    def latency_share(self) -> float | None:
        """The part of the best time the bytes alone do not explain: the latencies (α per hop
        and, with link occupancy, per transfer), and any slack of the bound. Near 1: latency-bound."""
        if self.bandwidth_floor is None or not self.best:
            return None
        return max(0.0, 1.0 - self.bandwidth_floor / self.best)

    @property
    def chunks_label(self) -> str:
        """"2" for a fixed C; "free → 4" (or "1,2,4 → 4") for the C a C-free instance chose."""
        if not self.chunk_choices:
            return str(self.chunks_per_rank)
        from optcoll.instances.chunks import FREE_CHUNKS

        allowed = "free" if self.chunk_choices == FREE_CHUNKS else ",".join(map(str, self.chunk_choices))
        return f"{allowed} → {self.chunks_per_rank if self.best is not None else '?'}"

    @property
    def gap(self) -> float | None:
        if self.best is None or not self.bound:
            return None
        return 0.0 if self.status == OPTIMAL else self.best / self.bound - 1.0


@dataclass(frozen=True)
class SynthSummary:
    label: str
    instances: int  # where it ran
    mean_gap: float | None
    median_gap: float | None
    max_gap: float | None
    optimal_known: int  # instances with a proven optimum where it ran
    misses: tuple[str, ...]  # those where it is above the optimum
    not_applicable: int
    failed: int


@dataclass(frozen=True)
class SizesCurve:
    label: str  # "optimal C=2", "tacos", ...
    sizes: tuple[float, ...]
    times: tuple[float | None, ...]


@dataclass(frozen=True)
class SizesData:
    suite: str
    instance: str
    network: str
    collective: str
    curves: tuple[SizesCurve, ...]
    bounds: tuple[float | None, ...]


@dataclass(frozen=True)
class ParetoData:
    suite: str
    instance: str
    points: tuple[dict[str, Any], ...]
    status: str
    reason: str | None = None
    scope: str | None = None  # the schedules the front searched ("C ≤ 6, every S")


@dataclass(frozen=True)
class Report:
    title: str
    suites: tuple[str, ...]
    settings: dict[str, Any]
    rows: tuple[InstanceRow, ...]
    labels: tuple[str, ...]  # producer columns in order: exact first, then synthesizers
    summary: tuple[SynthSummary, ...]
    sizes: tuple[SizesData, ...] = ()
    pareto: tuple[ParetoData, ...] = ()
    failures: tuple[dict[str, Any], ...] = ()
    environment: dict[str, Any] = field(default_factory=dict)
    generated: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for row, raw in zip(self.rows, data["rows"]):
            raw["gap"] = row.gap
        return data


def _result(record: dict[str, Any]) -> ProducerResult:
    status = record["status"]
    if status in (FAILED, NOT_APPLICABLE):
        return ProducerResult(record["label"], status, None, None, record.get("wall_time"),
                              reason=record.get("reason"), params=record.get("params", {}))
    result = record["result"]
    return ProducerResult(record["label"], status, result.get("time"), None, record.get("wall_time"),
                          tuple(record.get("times", ())), params=result.get("params", {}))


def _recorded_exact(truth: Truth, fresh: ProducerResult | None) -> ProducerResult:
    best = truth.best
    assert best is not None
    return ProducerResult(EXACT, truth.status, best.value, None, best.details.get("wall_time"),
                          params={"producer": best.producer, "date": best.date,
                                  **best.details.get("params", {})}, recorded=True,
                          beat=fresh.time if fresh is not None else None)


def build_row(suite: str, spec: InstanceSpec, records: list[dict[str, Any]], truth: Truth | None,
              nccl: list[dict[str, Any]] = ()) -> InstanceRow:
    """One instance: its records (bounds, exact, synthesizers) and its recorded truth, combined;
    ``nccl``: the records of NCCL's algorithms at their own chunking and of the bounds at their C
    (``sweeps.plan.nccl_jobs``), each with its ``key``."""
    inst = spec.instance
    bound, best, family = _best_claims(spec.name, records, truth)
    status = "unsolved" if best is None else (
        OPTIMAL if bound is not None and meets(best.value, bound.value) else "bounded")
    bound_value = bound.value if bound else None
    producers = {label: _with_gap(result, bound_value) for label, result in _producers(records, truth).items()}
    bounds_record = next((r for r in records if r["producer"] == "bounds" and r["status"] == "ok"), None)
    own, nccl_bound = _own_chunking(nccl)
    fixed = {label: producers.pop(label) for label in own if label in producers}
    producers.update(own)
    c = inst.collective
    if inst.chunk_choices and best is not None:
        from optcoll.producers.chunks import at_chunks

        c = at_chunks(inst, int(best.details.get("params", {}).get("chunks_per_rank", c.chunks_per_rank))).collective
    return InstanceRow(
        suite, spec.name, spec.path.name, inst.machine.name, inst.machine.num_npus, _collective_text(c, inst),
        float(c.size_bytes), c.chunks_per_rank, float(c.chunk_bytes), inst.model.kind,
        tuple(bounds_record["bounds"]) if bounds_record else (),
        bound_value, _source(bound), best.value if best else None, _source(best), status,
        producers, family, inst.chunk_choices,
        unproven(best.details, family) if status == "bounded" and best is not None else "",
        nccl_bound.value if nccl_bound else None, _source(nccl_bound), fixed, bandwidth_floor(inst, c))


def bandwidth_floor(inst: Instance, collective: Collective) -> float | None:
    """The best lower bound on the machine with every link latency α set to 0: the time the bytes
    alone force at this C (α only delays, so it bounds the real machine's schedules too); None
    in the step model (its cost counts steps)."""
    from optcoll.bounds import best_lower_bound

    if inst.model.kind != "timed":
        return None
    m = inst.machine
    return float(best_lower_bound(replace(m, link_latency=np.zeros_like(m.link_latency)), collective,
                                  inst.model).value)


def _own_chunking(records: list[dict[str, Any]]) -> tuple[dict[str, ProducerResult], Claim | None]:
    """NCCL's algorithms at their own chunking with their gaps, and the bound they are judged by:
    the least over the C values they ran at of the best analytic bound at that C."""
    from optcoll.analysis.nccl_chunking import Chunking
    from optcoll.truth.update import claims

    ran = {r["instance"]: r["params"]["chunking"]["chunks"] for r in records
           if r["producer"] == "synth" and (r.get("result") or {}).get("time") is not None}
    bounds = []
    for at in sorted(ran):
        at_c, times, _ = claims([r for r in records if r["instance"] == at])
        check_consistent(at, at_c, [claim for claim, _ in times])
        if at_c:
            best = max(at_c, key=lambda c: c.value)
            name, _, detail = best.source.partition(": ")
            bounds.append(replace(best, source=f"{name} at C={ran[at]}: {detail}"))
    bound = min(bounds, key=lambda c: c.value) if bounds else None
    out = {}
    for record in records:
        if record["producer"] == "synth":
            chunking = Chunking(record["label"], **record["params"]["chunking"])
            result = _with_gap(_result(record), bound.value if bound else None)
            out[record["label"]] = replace(result, own_chunking=chunking.describe())
    return out, bound


def _best_claims(name: str, records: list[dict[str, Any]], truth: Truth | None
                 ) -> tuple[Claim | None, Claim | None, dict[str, Any] | None]:
    """(best bound, best time, family) of the records and the recorded truth, checked consistent."""
    from optcoll.truth.update import claims

    keyed = [{**r, "key": r.get("key", "")} for r in records]
    bound_claims, time_claims, family = claims(keyed)
    times = [claim for claim, _ in time_claims]
    if truth is not None:
        bound_claims = ([truth.lower_bound] if truth.lower_bound else []) + bound_claims
        times = ([truth.best] if truth.best else []) + times
        family = family or truth.family
    check_consistent(name, bound_claims, times)
    best = min(times, key=lambda c: c.value) if times else None
    if truth is not None and best is not None and best is truth.best and truth.family:
        family = truth.family  # the family its record searched, which says what stopped the proof
    return (max(bound_claims, key=lambda c: c.value) if bound_claims else None, best, family)


def _producers(records: list[dict[str, Any]], truth: Truth | None) -> dict[str, ProducerResult]:
    """Per label, the exact solver's and the synthesizers' results; a recorded exact solve
    stands in for this run's time-limited one when it is faster."""
    producers = {record["label"]: _result(record) for record in records if record["producer"] in (EXACT, "synth")}
    fresh = producers.get(EXACT)
    recorded = truth.best if truth is not None and truth.best is not None else None
    if recorded is not None and recorded.producer.startswith("exact") and (
            fresh is None or fresh.time is None or recorded.value < fresh.time):
        producers[EXACT] = _recorded_exact(truth, fresh)
    return producers


def _collective_text(c: Collective, inst: Instance) -> str:
    return (c.kind + (f"(root {c.root})" if c.root is not None else "") +
            (f" on {c.num_ranks} ranks" if c.num_ranks != inst.machine.num_npus else ""))


def _source(claim: Claim | None) -> str:
    if claim is None:
        return ""
    if claim.producer == "analytic" or claim.source == claim.producer:
        return claim.source
    return f"{claim.producer}: {claim.source}"


def _with_gap(result: ProducerResult, bound: float | None) -> ProducerResult:
    if result.time is None or not bound:
        return result
    gap = result.time / bound - 1.0
    return replace(result, gap=0.0 if meets(result.time, bound) else gap)


def summarise(rows: list[InstanceRow], labels: list[str]) -> list[SynthSummary]:
    out = []
    for label in labels:
        ran = [(row, row.producers[label]) for row in rows
               if label in row.producers and row.producers[label].ran]
        gaps = [p.gap for _, p in ran if p.gap is not None]
        known = [(row, p) for row, p in ran if row.status == OPTIMAL and not p.own_chunking]
        misses = tuple(row.name for row, p in known if not meets(p.time, row.best))
        states = [row.producers[label].status for row in rows if label in row.producers]
        out.append(SynthSummary(label, len(ran), statistics.fmean(gaps) if gaps else None,
                                statistics.median(gaps) if gaps else None, max(gaps) if gaps else None,
                                len(known), misses, states.count(NOT_APPLICABLE), states.count(FAILED)))
    return out
