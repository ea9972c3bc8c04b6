"""Checks shared by the exact-solver tests (step and timed models)."""
from __future__ import annotations

from optcoll.instances.instance import Instance
from optcoll.results.outcome import SolverOutcome
from optcoll.verify import verify


def verified(inst: Instance, out: SolverOutcome) -> float:
    """The verifier's time (step cost for step schedules) of the outcome's schedule; fails the
    test when it is invalid."""
    assert out.schedule is not None, out.notes
    result = verify(inst.machine, inst.collective, out.schedule, inst.model)
    assert result.valid, result.violation
    return result.time


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)
