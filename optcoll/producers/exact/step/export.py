"""Writing the step encoding for other solvers: .smt2 (z3's SCCL-style encoding, for cvc5 and
friends), and the linear encoding through the toolkit's one exporter: .lp/.mps (a MIP, for
Gurobi, CPLEX, HiGHS...), .pbtxt/.pb (the same as a CP-SAT model)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from optcoll.errors import InputError
from optcoll.fileio import write_text_atomic
from optcoll.instances.instance import Instance
from optcoll.producers.exact.step.inversion import plan
from optcoll.producers.exact.step.linear import encode
from optcoll.producers.exact.toolkit import export
from optcoll.producers.exact.toolkit.export import FORMATS as LINEAR_FORMATS

FORMATS = (".smt2", *LINEAR_FORMATS)


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
    chosen = plan(instance.machine, instance.collective, instance.model)
    problem = chosen.problem
    if steps < problem.latency_bound:
        raise InputError(f"no schedule fits {steps} steps: some destination is "
                         f"{problem.latency_bound} hops from its chunk", field="steps")
    if suffix == ".smt2":
        from optcoll.producers.exact.step.smt import SmtEncoding

        enc = SmtEncoding(problem, steps, rounds)
        text = enc.smt2()
        write_text_atomic(path, text)
        return StepExportInfo(str(path), suffix[1:], steps, rounds, chosen.inverted, enc.variables(),
                              len(enc.constraints))
    enc = encode(problem, steps, steps, rounds)
    if enc is None:
        raise InputError(f"no schedule fits {steps} steps", field="steps")
    export(enc.model, path, name="optcoll_step")
    return StepExportInfo(str(path), suffix[1:], steps, rounds, chosen.inverted,
                          enc.model.num_vars, enc.model.matrix()[0].shape[0])
