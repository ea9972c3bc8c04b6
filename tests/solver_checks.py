"""Checks shared by the exact-solver tests (step and timed models)."""
from __future__ import annotations

from optcoll.instances.budget import Budget
from optcoll.instances.instance import Instance
from optcoll.results.outcome import SolverOutcome
from optcoll.verify import verify

#: The wall-clock limit of a solve whose verdict a test asserts: a safety net against a hang only,
#: far above what any such solve takes; the solve ends by its proof or by its work limit.
SAFETY_NET = 600.0
#: CP-SAT deterministic seconds for one such solve: about six times what the hungriest default test
#: spends (3.4), so the verdict comes from the proof, and a solve that lost its way still stops.
WORK = 20.0


def proof_budget(solver: str = "cpsat", *, work: float = WORK, threads: int = 1, seed: int = 0) -> Budget:
    """The limits of a solve a test asserts a proven verdict of (optimal, infeasible, a bound).

    CP-SAT's deterministic time (``work``) on one thread stops the search at the same point on any
    machine under any load, so the verdict never depends on how busy the machine is. HiGHS, SCIP
    and z3 get no deterministic limit from optcoll (``work_limit`` is CP-SAT's only): their tests
    ask questions they settle in about a second at most, far below the safety net."""
    return Budget(time_limit=SAFETY_NET, threads=threads, seed=seed, work_limit=work if solver == "cpsat" else None)


def verified(inst: Instance, out: SolverOutcome) -> float:
    """The verifier's time (step cost for step schedules) of the outcome's schedule; fails the
    test when it is invalid."""
    assert out.schedule is not None, out.notes
    result = verify(inst.machine, inst.collective, out.schedule, inst.model)
    assert result.valid, result.violation
    return result.time


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)
