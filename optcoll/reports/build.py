"""From suites to a ``Report``: plan the jobs, run the sweep, assemble rows, summary and plots.

The exact solver is skipped where the instance file records a proven optimum that re-verifies
(the point of recorded ground truth: heuristics are judged against it cheaply); ``resolve``
solves anyway. NCCL's algorithms also run at NCCL's own chunking for the size
(``sweeps.plan.nccl_jobs``), judged apart from the instance's C. Plot jobs (time versus size,
Pareto front) run only when files are written.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from optcoll.reports.data import (EXACT, ParetoData, Report, SizesCurve, SizesData, build_row,
                                  summarise)
from optcoll.sweeps.cache import ResultCache
from optcoll.sweeps.jobs import FAILED, Job
from optcoll.sweeps.plan import (Settings, instance_jobs, nccl_jobs, pareto_jobs, runs_for, sizes_jobs,
                                 synthesizer_names)
from optcoll.sweeps.runner import SweepStats, run_sweep
from optcoll.instances.suite import InstanceSpec, Suite
from optcoll.truth.record import OPTIMAL, Truth
from optcoll.truth.stored import load_truth, verify_stored


@dataclass
class Plan:
    settings: Settings
    suites: list[Suite]
    #: Per instance: its suite, spec, recorded truth, its jobs, and NCCL's at its own chunking.
    per_spec: list[tuple[Suite, InstanceSpec, Truth | None, list[Job], list[Job]]] = field(default_factory=list)
    sizes: list[tuple[Suite, list[Job]]] = field(default_factory=list)
    pareto: list[tuple[Suite, list[Job]]] = field(default_factory=list)

    def jobs(self) -> list[Job]:
        out = [job for *_, jobs, nccl in self.per_spec for job in jobs + nccl]
        out += [job for _, jobs in self.sizes for job in jobs]
        return out + [job for _, jobs in self.pareto for job in jobs]


def _usable_truth(spec: InstanceSpec) -> Truth | None:
    truth, _ = load_truth(spec)
    if truth is not None and truth.best is not None:
        verify_stored(spec, truth)  # a recorded schedule that does not hold is a loud error
    return truth


def plan_report(suites: list[Suite], settings: Settings, *, plots: bool, resolve: bool = False) -> Plan:
    plan = Plan(settings, suites)
    for suite in suites:
        runs = runs_for(suite, settings)
        for spec in suite.specs:
            truth = _usable_truth(spec)
            jobs = instance_jobs(spec, settings, runs)
            if truth is not None and truth.status == OPTIMAL and not resolve:
                jobs = [job for job in jobs if job.producer != EXACT]
            plan.per_spec.append((suite, spec, truth, jobs, nccl_jobs(spec)))
        if plots:
            plan.sizes.append((suite, sizes_jobs(suite, settings, runs)))
            plan.pareto.append((suite, pareto_jobs(suite, settings)))
    return plan


def run_plan(plan: Plan, cache: ResultCache, *, workers: int = 1, cluster: Any = None,
             progress: bool | None = None, retry_failed: bool = False
             ) -> tuple[dict[str, dict[str, Any]], SweepStats]:
    names = "+".join(s.name for s in plan.suites)
    return run_sweep(plan.jobs(), cache, workers=workers, cluster=cluster, progress=progress,
                     retry_failed=retry_failed, desc=f"report {names}")


def _sizes(suite: Suite, jobs: list[Job], records: dict[str, dict[str, Any]]) -> SizesData | None:
    if not jobs or suite.sizes is None:
        return None
    plot = suite.sizes
    by_size: dict[float, list[tuple[Job, dict[str, Any]]]] = {}
    for job in jobs:
        by_size.setdefault(job.spec.instance.collective.size_bytes, []).append((job, records[job.key]))
    sizes = tuple(sorted(by_size))
    curves: dict[str, list[float | None]] = {}
    bounds = []
    labels = [f"optimal C={c}" for c in plot.chunks] + synthesizer_names()
    for label in labels:
        curves[label] = []
    for size in sizes:
        found: dict[str, float | None] = {}
        bound = None
        for job, record in by_size[size]:
            if job.producer == "bounds":
                if record["status"] == "ok":
                    bound = max(b["value"] for b in record["bounds"])
                continue
            label = f"optimal C={job.spec.instance.collective.chunks_per_rank}" \
                if job.producer == EXACT else job.label
            result = record.get("result") or {}
            found[label] = result.get("time") if record["status"] not in (FAILED,) else None
        bounds.append(bound)
        for label in labels:
            curves[label].append(found.get(label))
    base = suite.spec(plot.instance).instance
    kept = tuple(SizesCurve(label, sizes, tuple(times)) for label, times in curves.items()
                 if any(t is not None for t in times))
    return SizesData(suite.name, plot.instance, base.machine.name, base.collective.kind, kept,
                     tuple(bounds))


def _pareto(suite: Suite, jobs: list[Job], records: dict[str, dict[str, Any]]) -> ParetoData | None:
    if not jobs:
        return None
    record = records[jobs[0].key]
    return ParetoData(suite.name, jobs[0].spec.name, tuple(record.get("points", ())),
                      record["status"], record.get("reason"), record.get("scope"))


def assemble(plan: Plan, records: dict[str, dict[str, Any]], title: str) -> Report:
    from optcoll.provenance import environment

    rows = []
    for suite, spec, truth, jobs, nccl in plan.per_spec:
        mine = [{**records[job.key], "key": job.key} for job in jobs]
        own = [{**records[job.key], "key": job.key} for job in nccl]
        rows.append(build_row(suite.name, spec, mine, truth, own))
    labels = [EXACT] + synthesizer_names()
    unique = {job.key: records[job.key] for job in plan.jobs()}
    failures = tuple({"instance": r["instance"], "producer": r["label"], "reason": r["reason"]}
                     for r in unique.values() if r["status"] == FAILED)
    settings = {"runs": [runs_for(s, plan.settings) for s in plan.suites],
                "seed": plan.settings.seed, "solver": plan.settings.solver,
                "time_limit": plan.settings.time_limit, "threads": plan.settings.threads}
    sizes = tuple(d for suite, jobs in plan.sizes if (d := _sizes(suite, jobs, records)) is not None)
    pareto = tuple(d for suite, jobs in plan.pareto if (d := _pareto(suite, jobs, records)) is not None)
    env = {**environment(), "cpus": platform.processor() or platform.machine()}
    return Report(title, tuple(s.name for s in plan.suites), settings, tuple(rows), tuple(labels),
                  tuple(summarise(rows, labels)), sizes, pareto, failures, env,
                  datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
