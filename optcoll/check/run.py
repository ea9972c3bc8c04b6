"""``run_check``: every instance of a suite through a synthesizer, in parallel, each with its time
limit, every schedule through the shared verifier, every time against the recorded truth.

Parallelism and isolation come from the sweep pool (``optcoll.sweeps.pool.run_local``): one job
per instance on worker processes, so a synthesizer that crashes, hangs or leaks state on one
instance does not stop the others. Python synthesizers are interrupted at their time limit; one
that does not respond (stuck in C code) is killed at the pool's ``USER_CODE_GRACE``.
Nothing is cached: a user's synthesizer changes without optcoll's version changing.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from optcoll.check.config import check_ratio, load_check_config
from optcoll.check.report import CheckReport
from optcoll.producers.external.spec import SynthSpec, parse_synth
from optcoll.check.verdict import AGAINST, judge
from optcoll.errors import InputError
from optcoll.instances.budget import parse_seconds
from optcoll.sweeps.jobs import Job
from optcoll.sweeps import pool
from optcoll.sweeps.pool import run_local
from optcoll.sweeps.progress import ProgressDisplay
from optcoll.instances.suite import Suite, find_suite

def run_check(synth: str | SynthSpec, suite: str | os.PathLike | Suite = "quick", *,
              max_gap: float | None = None, timeout: float | str | None = None, jobs: int | None = None,
              against: str = "best", progress: bool | None = False, runs: int = 1) -> CheckReport:
    """The verdict on every instance of ``suite``. Bad input (spec, suite, numbers) raises
    ``InputError``; everything a synthesizer does wrong is a failed ``Outcome`` instead.

    ``timeout``: seconds (or "2 min") per instance (default: each instance's [budget] time_limit);
    ``jobs``: worker processes (default: all cores); ``runs``: seeds per instance for a seeded
    synthesizer (a ``builtin:`` one that is randomised, any ``py:`` or ``cmd:`` one), from the
    instance's [budget] seed on, the fastest verified kept; ``max_gap``/``against``: see
    ``optcoll.check.config`` and ``optcoll.check.verdict``.
    """
    spec = synth if isinstance(synth, SynthSpec) else parse_synth(synth)
    suite = suite if isinstance(suite, Suite) else find_suite(os.fspath(suite))
    config = load_check_config(suite)
    if max_gap is not None:
        max_gap = check_ratio(max_gap, None, "--max-gap")
    if timeout is not None:
        timeout = parse_seconds(timeout, "--time-limit")
    if against not in AGAINST:
        raise InputError(f"must be one of {', '.join(AGAINST)}, got {against!r}", field="--against")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InputError(f"must be a positive integer, got {jobs!r}", field="--jobs")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise InputError(f"must be a positive integer, got {runs!r}", field="--runs")
    workers = jobs or os.cpu_count() or 1
    runs = runs if seeded(spec) else 1
    start = time.perf_counter()
    records = {}
    with tempfile.TemporaryDirectory(prefix="optcoll-check-") as work:
        pending = [Job(s, "check", {"synth": str(spec), "workdir": str(Path(work) / s.path.stem),
                                    "time_limit": timeout or s.instance.budget.time_limit,
                                    "seeds": list(range(s.instance.budget.seed, s.instance.budget.seed + runs))})
                   for s in suite.specs]
        bar = ProgressDisplay(len(pending), 0, "check", progress)
        try:
            for job, result in run_local(pending, workers, pool.USER_CODE_GRACE):
                records[job.spec.path] = result.record
                bar.advance(job.spec.name, result.record["status"] not in ("valid", "skipped"))
        finally:
            bar.close()
    outcomes = tuple(judge(s, records[s.path], config.threshold(s.path.stem, max_gap), against)
                     for s in suite.specs)
    firsts = sorted({s.instance.budget.seed for s in suite.specs})
    return CheckReport(str(spec), suite.name, str(suite.directory), against, outcomes,
                       time.perf_counter() - start, seeds_text(firsts, runs))


def seeded(spec: SynthSpec) -> bool:
    """Whether running again with another seed can give another schedule."""
    if spec.kind == "builtin":
        from optcoll.producers.registry import RANDOMIZED

        return spec.target in RANDOMIZED
    return spec.kind != "dir"


def seeds_text(firsts: list[int], runs: int) -> str:
    """The seeds a check ran, in words: what reproduces its verdict."""
    if len(firsts) == 1:
        first = firsts[0]
        return f"seed {first}" if runs == 1 else f"seeds {first}..{first + runs - 1}, the fastest kept"
    each = "each instance's [budget] seed" + (f" and the next {runs - 1}, the fastest kept" if runs > 1 else "")
    return f"{each} ({', '.join(map(str, firsts))})"
