"""Writing the step encoding for other solvers: .smt2 (z3's SCCL-style encoding, for cvc5 and
friends), .lp/.mps (the linear encoding as a MIP, for Gurobi, CPLEX, HiGHS...), .pbtxt/.pb (the
same as a CP-SAT model)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from optcoll.errors import InputError
from optcoll.fileio import write_file_atomic, write_text_atomic
from optcoll.instances.instance import Instance
from optcoll.producers.exact.step.backends import build_cpsat, build_mip
from optcoll.producers.exact.step.inversion import plan
from optcoll.producers.exact.step.linear import encode
from optcoll.producers.exact.step.smt import SmtEncoding

FORMATS = (".smt2", ".lp", ".mps", ".pbtxt", ".pb")


@dataclass(frozen=True)
class StepExportInfo:
    """What was written: the question (S steps, R ≤ rounds) and the problem it encodes."""

    path: str
    format: str
    steps: int
    rounds: int
    inverted: bool  # the dual on the reversed machine (combining collectives)
    variables: int
    constraints: int


def export_step_model(instance: Instance, steps: int, rounds: int, path: str | Path) -> StepExportInfo:
    """Writes "a schedule with ``steps`` steps and at most ``rounds`` rounds" (the linear forms
    minimise R) for the instance's collective; combining ones as their dual (inversion.py)."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"cannot export the step model to {Path(path).name!r}: use one of "
                         f"{', '.join(FORMATS)}", field="export-model")
    if instance.collective.kind == "allreduce":
        raise InputError("export the reducescatter and allgather parts of an allreduce separately",
                         field="collective")
    for name, value in (("steps", steps), ("rounds", rounds)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"must be a positive integer, got {value!r}", field=name)
    if rounds < steps:
        raise InputError(f"every step takes at least one round: rounds {rounds} < steps {steps}",
                         field="rounds")
    chosen = plan(instance.machine, instance.collective)
    problem = chosen.problem
    if steps < problem.latency_bound:
        raise InputError(f"no schedule fits {steps} steps: some destination is "
                         f"{problem.latency_bound} hops from its chunk", field="steps")
    if suffix == ".smt2":
        enc = SmtEncoding(problem, steps, rounds)
        text = enc.solver.to_smt2()
        variables = len(enc.sent) + len(enc.count) + len(enc.rounds) + sum(
            1 for t in enc.time.values() if not isinstance(t, int))
        write_text_atomic(path, text)
        return StepExportInfo(str(path), suffix[1:], steps, rounds, chosen.inverted, variables,
                              len(enc.solver.assertions()))
    enc = encode(problem, steps, steps, rounds)
    if enc is None:
        raise InputError(f"no schedule fits {steps} steps", field="steps")
    if suffix in (".lp", ".mps"):
        solver = build_mip(enc, "scip")
        text = solver.ExportModelAsLpFormat(False) if suffix == ".lp" else \
            solver.ExportModelAsMpsFormat(False, False)
        write_text_atomic(path, text)
    elif suffix == ".pbtxt":
        write_text_atomic(path, str(build_cpsat(enc)[0].proto))
    else:
        model, _ = build_cpsat(enc)
        write_file_atomic(path, lambda tmp: _write_proto(model, tmp))  # binary: the name ends in .tmp
    return StepExportInfo(str(path), suffix[1:], steps, rounds, chosen.inverted,
                          len(enc.model.lb), len(enc.model.rows))


def _write_proto(model, tmp: Path) -> None:
    if not model.ExportToFile(str(tmp)):
        raise OSError(f"CP-SAT could not write {tmp}")
