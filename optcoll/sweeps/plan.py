"""Which jobs a report or a truth update runs, from the suite and the user's settings.

Per instance: the analytic bounds, the exact solver of its model, and every synthesizer of the
registry (those that do not apply come back ``not-applicable``). Randomised synthesizers run
``runs`` seeds from ``seed``; deterministic ones run once, so their keys do not depend on runs.
"""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.errors import InputError
from optcoll.instances.budget import Budget, checked_count, checked_seconds
from optcoll.sweeps.jobs import Job
from optcoll.instances.suite import InstanceSpec, Suite, size_label

DEFAULT_RUNS = 20
#: The step model's Pareto front is searched with CP-SAT (z3 is the slower cross-check).
PARETO_SOLVER = "cpsat"


@dataclass(frozen=True)
class Settings:
    runs: int | None = None  # None: the suite's runs, else DEFAULT_RUNS
    seed: int | None = None  # None: each instance's [budget] seed
    solver: str = "cpsat"
    time_limit: float | None = None  # None: each instance's [budget] time_limit
    threads: int | None = None  # None: each instance's [budget] threads
    exact: bool = True
    max_memory: int | None = None  # bytes per solver model; None: the solvers' default share

    def __post_init__(self) -> None:
        if self.runs is not None and self.runs < 1:
            raise InputError(f"must be at least 1, got {self.runs}", field="runs")
        if self.time_limit is not None:
            checked_seconds(self.time_limit, "time_limit")
        for name in ("threads", "max_memory"):
            if getattr(self, name) is not None:
                checked_count(getattr(self, name), name)

    def budget(self, spec: InstanceSpec) -> Budget:
        """The instance's [budget] with the limits given here in its place."""
        return spec.instance.budget.overridden(time_limit=self.time_limit, threads=self.threads,
                                               seed=self.seed, max_memory=self.max_memory)


def synthesizer_names() -> list[str]:
    from optcoll.producers.registry import SYNTHESIZERS

    return list(SYNTHESIZERS)


def synth_job(spec: InstanceSpec, algo: str, runs: int, seed: int) -> Job:
    from optcoll.producers.registry import RANDOMIZED

    randomized = algo in RANDOMIZED
    return Job(spec, "synth", {"algo": algo, "runs": runs if randomized else 1,
                               "seed0": seed if randomized else 0})


def exact_job(spec: InstanceSpec, settings: Settings) -> Job:
    """The exact solve with the limits packed once (``Budget.to_params``): the memory limit only
    when one was given, so a larger one is a different job (key) that runs again, while the
    default leaves the keys of earlier runs as they were."""
    return Job(spec, "exact", {"solver": settings.solver, **settings.budget(spec).to_params()})


def seed_for(spec: InstanceSpec, settings: Settings) -> int:
    return settings.seed if settings.seed is not None else spec.instance.budget.seed


def runs_for(suite: Suite | None, settings: Settings) -> int:
    if settings.runs is not None:
        return settings.runs
    return suite.runs if suite is not None and suite.runs else DEFAULT_RUNS


def instance_jobs(spec: InstanceSpec, settings: Settings, runs: int) -> list[Job]:
    jobs = [Job(spec, "bounds")]
    if settings.exact:
        jobs.append(exact_job(spec, settings))
    jobs += [synth_job(spec, algo, runs, seed_for(spec, settings)) for algo in synthesizer_names()]
    return jobs


#: The timed model NCCL's algorithms run in at their own chunking: α is propagation, a link is busy
#: only while it moves bytes, as NCCL keeps NCCL_STEPS = 8 slices in flight per channel
#: (src/include/device.h), so a slice's latency overlaps the next one's transfer.
PIPELINED = "serialization"


def nccl_jobs(spec: InstanceSpec) -> list[Job]:
    """NCCL's algorithms at the chunking NCCL itself would use at this instance's size
    (``analysis.nccl_chunking``), α pipelined, each with the analytic bounds at its C; none where
    that chunking is not modelled (the report then shows them at the instance's C)."""
    from optcoll.analysis.nccl_chunking import modelled, nccl_chunking
    from optcoll.producers.registry import IMPLEMENTS, NCCL

    inst = spec.instance
    if not modelled(inst):
        return []
    jobs: list[Job] = []
    for algo in NCCL:
        if inst.collective.kind not in IMPLEMENTS[algo]:
            continue
        chunking = nccl_chunking(inst, algo)
        assert chunking is not None
        own = spec.derive(chunks_per_rank=chunking.chunks, occupancy=PIPELINED)
        jobs += [Job(own, "synth", {"algo": algo, "runs": 1, "seed0": 0, "chunking": chunking.to_params()}),
                 Job(own, "bounds")]
    return jobs


def sizes_jobs(suite: Suite, settings: Settings, runs: int) -> list[Job]:
    """Time versus message size: the exact optimum per chunk count, every synthesizer at the
    instance's own C, at each size of the plot."""
    plot = suite.sizes
    if plot is None:
        return []
    base = suite.spec(plot.instance)
    jobs = []
    for size in plot.sizes:
        at_size = base.derive(size=size_label(size))
        jobs += [Job(at_size, "bounds")]
        if settings.exact:
            jobs += [exact_job(at_size.derive(chunks_per_rank=c), settings) for c in plot.chunks]
        jobs += [synth_job(at_size, algo, runs, seed_for(base, settings)) for algo in synthesizer_names()]
    return jobs


def pareto_jobs(suite: Suite, settings: Settings) -> list[Job]:
    plot = suite.pareto
    if plot is None or not settings.exact:
        return []
    spec = suite.spec(plot.instance)
    return [Job(spec, "pareto", {"max_chunks": plot.max_chunks, "solver": PARETO_SOLVER,
                                 **settings.budget(spec).to_params()})]
