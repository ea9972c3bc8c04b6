"""Writing a ``LinearModel`` for other solvers: .mps and .lp (a MIP with named variables, for
Gurobi, CPLEX, HiGHS, ...), .pbtxt and .pb (the CP-SAT model, text or binary)."""
from __future__ import annotations

from pathlib import Path

from optcoll.errors import InputError
from optcoll.fileio import write_file_atomic, write_text_atomic
from optcoll.producers.exact.toolkit.backends import cpsat_model
from optcoll.producers.exact.toolkit.model import LinearModel

FORMATS = (".mps", ".lp", ".pbtxt", ".pb")


def export(model: LinearModel, path: str | Path, *, name: str = "optcoll") -> None:
    """Writes ``model`` in the format its file name ends with (one of ``FORMATS``)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"cannot export a linear model to {path.name!r}: use one of {', '.join(FORMATS)}",
                         field="export-model")
    if suffix in (".pbtxt", ".pb"):
        from ortools.sat.python.cp_model_helper import CpSatHelper

        proto = cpsat_model(model, named=True)
        proto.name = name
        if suffix == ".pbtxt":
            write_text_atomic(path, str(proto))
        else:  # CP-SAT writes binary to a name that does not end in "txt", as the temporary one
            write_file_atomic(path, lambda tmp: _checked(CpSatHelper.write_model_to_file(proto, str(tmp)), tmp))
        return
    import ortools.linear_solver.python.model_builder_helper as mbh

    helper = mbh.ModelBuilderHelper()
    lb, ub = model.bounds()
    a, rlo, rhi = model.matrix()
    helper.fill_model_from_sparse_data(lb, ub, model.objective_vector(), rlo, rhi, a.astype(float))
    for i, var_name in enumerate(model.names()):
        helper.set_var_integrality(i, True)
        helper.set_var_name(i, var_name)
    helper.set_name(name)
    write_text_atomic(path, helper.export_to_mps_string() if suffix == ".mps" else helper.export_to_lp_string())


def _checked(written: bool, path: Path) -> None:
    if not written:
        raise OSError(f"CP-SAT could not write {path}")
