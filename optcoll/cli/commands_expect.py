"""``optcoll expect``: what a machine should measure, per message size (docs/model.md §8)."""
from __future__ import annotations

import json
from pathlib import Path

import click

from optcoll.cli.limits import SIZES
from optcoll.cli.output import echo, emit_json, json_option
from optcoll.errors import InputError
from optcoll.units import format_size, format_time

KINDS = ("allreduce", "allgather", "reducescatter", "alltoall")
ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "pat")
#: ``--all`` covers machines up to this size: one verification of a 512-GPU collective tracks
#: ~260,000 chunk copies, minutes per size.
MAX_ALL_RANKS = 128


def _measured(ref: str | None, kind: str) -> tuple[dict[int, float] | None, int]:
    """The measured times by size and the GPUs one nccl-tests thread drove (its ``nGpus``)."""
    if ref is None:
        return None, 1
    from optcoll.interop.measurements import find
    from optcoll.interop.nccltests import read_sweep

    if Path(ref).suffix == ".toml" or "/" not in ref and not Path(ref).exists():
        entry = find(ref)
        if entry.collective != kind:
            raise InputError(f"measurement {entry.name} is of {entry.collective}, not {kind}", field="--measured")
        return dict(entry.points), entry.gpus_per_thread
    sweep = read_sweep(ref, kind)
    return {row.size: row.best_time for row in sweep.rows}, sweep.gpus_per_thread


def expect_context(machine: str, gpu: str | None):
    from optcoll.analysis.expect.predict import context
    from optcoll.machines.calibration import generation_of
    from optcoll.machines.catalog import load_machine

    return context(load_machine(machine), generation_of(Path(machine).stem, gpu))


def expect_rows(machine: str, kind: str, sizes: list[int], algorithm: str | None, gpu: str | None,
                measured: dict[int, float] | None, tuned: bool = False, ctx=None, gpus_per_thread: int = 1):
    """The rows in ascending size, on one ``Context`` (the search reuses smaller sizes' runs);
    a measurement taken with ``-g G`` (G > 1) puts nccl-tests' host floor under the prediction."""
    from optcoll.analysis.expect.predict import host_floor
    from optcoll.analysis.expect.rows import row

    ctx = ctx or expect_context(machine, gpu)
    floor = host_floor(ctx.generation, gpus_per_thread)
    return [row(ctx, kind, s, algorithm, (measured or {}).get(s), tuned, floor) for s in sorted(sizes)]


def _floor_note(rows, gpus_per_thread: int) -> str | None:
    """The line saying a host floor applies, and where it binds."""
    if not rows or not rows[0].host_floor:
        return None
    bound = [r for r in rows if r.host_floor > r.nccl.seconds]
    where = (f"; it binds up to {format_size(bound[-1].size)} (NCCL time marked 'host floor')" if bound
             else "; it binds at none of these sizes")
    return (f"host floor {format_time(rows[0].host_floor)}: the measurement ran with nGpus {gpus_per_thread} per "
            f"nccl-tests thread (-g {gpus_per_thread}), which issues every call to each GPU in turn{where}")


def _tuner_files(ctx, machine: str, kind: str, rows, conf: str | None, csv: str | None) -> None:
    """``nccl_tuner.conf`` from each size's ``nccl_best``; the optimizer's CSV from every NCCL
    candidate (NVIDIA/nccl plugins/tuner/example; ``interop.nccl_tuner``)."""
    from optcoll.analysis.expect.predict import nccl_candidates
    from optcoll.fileio import write_text_atomic
    from optcoll.interop.nccl_tuner import Candidate, SizeChoice, optimizer_csv, tuner_conf, tuner_rules

    nodes, ranks = ctx.nccl.nodes, ctx.nccl.ranks
    if conf:
        choices = [SizeChoice(r.size, r.tuned.algorithm, r.tuned.protocol, r.tuned.channels, r.tuned.seconds)
                   for r in rows]
        write_text_atomic(conf, tuner_conf(tuner_rules(kind, choices, nodes=nodes, ranks=ranks), [
            f"optcoll expect {machine} --collective {kind}: per size, the fastest of NCCL's own algorithms "
            f"and protocols in optcoll's calibrated model ({ctx.generation.name}; {nodes} node(s), {ranks} ranks)"]))
    if csv:
        write_text_atomic(csv, optimizer_csv(
            Candidate(kind, r.size, c.algorithm, c.protocol, c.channels, c.seconds, nodes, ranks)
            for r in rows for c in nccl_candidates(ctx, kind, r.size)))


def _ranks(machine: str) -> int:
    from optcoll.machines.catalog import load_machine

    return load_machine(machine).num_npus


def _table(rows) -> str:
    from optcoll.text.table import table

    body = []
    for r in rows:
        meas = (f"{format_time(r.measured)} ({r.best.seconds / r.measured:.2f} best, "
                f"{r.bound / r.measured:.2f} bound)") if r.measured else "-"
        body.append([format_size(r.size), format_time(r.bound),
                     f"{format_time(r.best.seconds)} {r.best.producer}/{r.best.protocol} C={r.best.chunks}"
                     + (" (C capped)" if r.best.capped else ""),
                     f"{r.nccl.algorithm}/{r.nccl.protocol} x{r.nccl.channels} C={r.nccl.chunks}",
                     format_time(r.predicted) + (" (host floor)" if r.host_floor > r.nccl.seconds else ""),
                     f"{r.headroom:.2f}", meas])
    return table(["size", "bound (physical)", "best verified (calibrated)", "NCCL choice", "NCCL time",
                  "headroom", "measured"], body)


def _write(out: Path, machine: str, kind: str, rows, measured_label: str | None, gpus_per_thread: int = 1) -> None:
    ranks = _ranks(machine)
    from optcoll.fileio import write_text_atomic as write_text
    from optcoll.reports.plots import expect_plot

    stem = out / f"{Path(machine).stem}-{kind}"
    write_text(f"{stem}.json", json.dumps([r.to_dict() for r in rows], indent=1) + "\n")
    note = _floor_note(rows, gpus_per_thread)
    write_text(f"{stem}.md", f"# {Path(machine).stem} {kind}\n\n```\n{_table(rows)}\n```\n"
               + (f"\n{note}\n" if note else ""))
    write_text(f"{stem}.svg", expect_plot(rows, kind, f"{Path(machine).stem} {kind}", ranks, measured_label))


@click.command("expect")
@click.argument("machine", required=False)
@click.option("--collective", "kind", default="allreduce", show_default=True,
              help=f"The collective: {', '.join(KINDS)}.")
@click.option("--sizes", type=SIZES, default="1KiB:8GiB", show_default=True,
              help="A:B (powers of two), or a comma list such as 4KiB,1MiB,1073741824 (bare = bytes).")
@click.option("--algorithm", default=None,
              help=f"Predict NCCL with this algorithm forced (NCCL_ALGO): {', '.join(ALGORITHMS)}.")
@click.option("--measured", default=None, help="An nccl-tests output file or a collection entry name.")
@click.option("--gpu", default=None, help="GPU generation of a machine outside the catalog.")
@click.option("--plot", default=None, type=click.Path(dir_okay=False), help="Write the busbw-vs-size SVG here.")
@click.option("--all", "every", is_flag=True,
              help="Every calibrated catalog machine (or the comma list MACHINE) and collective, into --out, "
                   "with accuracy.md over the measurements collection.")
@click.option("-o", "--out", default=None, type=click.Path(file_okay=False), help="Folder for --all.")
@click.option("--nccl-tuner-conf", "tuner_conf", default=None, type=click.Path(dir_okay=False),
              help="Write NCCL's example tuner plugin table (nccl_tuner.conf): per size, the fastest of "
                   "NCCL's algorithms and protocols in the calibrated model.")
@click.option("--nccl-tuner-csv", "tuner_csv", default=None, type=click.Path(dir_okay=False),
              help="Write the input CSV of NCCL's optimize_config.py: every NCCL candidate at every size.")
@json_option
def expect(machine, kind, sizes, algorithm, measured, gpu, plot, every, out, tuner_conf, tuner_csv,
           as_json) -> None:
    """Per size: physical bound, best verified schedule and NCCL's choice in the calibrated model."""
    size_list = list(sizes)
    if kind not in KINDS:
        raise InputError(f"{kind!r} is not one of {', '.join(KINDS)}", field="--collective")
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise InputError(f"{algorithm!r} is not one of {', '.join(ALGORITHMS)}", field="--algorithm")
    if every:
        _expect_all(Path(out or "reports/expect"), size_list, machine)
        return
    if machine is None:
        raise InputError("name a MACHINE (or --all)", field="MACHINE")
    if tuner_conf or tuner_csv:
        from optcoll.interop.nccl_tuner import collective_name

        try:
            collective_name(kind)
        except InputError as exc:
            raise InputError(exc.detail, field="--nccl-tuner-conf" if tuner_conf else "--nccl-tuner-csv") from None
    points, gpus_per_thread = _measured(measured, kind)
    ctx = expect_context(machine, gpu)
    rows = expect_rows(machine, kind, size_list, algorithm, gpu, points, tuned=bool(tuner_conf), ctx=ctx,
                       gpus_per_thread=gpus_per_thread)
    if tuner_conf or tuner_csv:
        _tuner_files(ctx, Path(machine).stem, kind, rows, tuner_conf, tuner_csv)
    if plot:
        from optcoll.fileio import write_text_atomic as write_text
        from optcoll.reports.plots import expect_plot

        write_text(plot, expect_plot(rows, kind, f"{Path(machine).stem} {kind}", _ranks(machine), measured))
    note = _floor_note(rows, gpus_per_thread)
    if as_json:
        emit_json([r.to_dict() for r in rows])
    else:
        echo(_table(rows) + (f"\n{note}" if note else ""))


def _expect_all(out: Path, sizes: list[int], only: str | None = None) -> None:
    """Every calibrated catalog machine (or the comma list ``only``): md, json and svg per
    collective, the measured sweep with the most sizes overlaid; then accuracy.md over the whole
    collection."""
    from optcoll.interop.measurements import collection
    from optcoll.machines.calibration import catalog_machines

    machines = catalog_machines()
    if only is not None:
        unknown = [m for m in only.split(",") if m not in machines]
        if unknown:
            raise InputError(f"{', '.join(unknown)}: not a calibrated catalog machine; one of "
                             f"{', '.join(machines)}", field="MACHINE")
        machines = only.split(",")
    out.mkdir(parents=True, exist_ok=True)
    entries = sorted(collection(), key=lambda e: (-len(e.points), e.name))
    for machine in sorted(machines, key=lambda name: (_ranks(name), name)):  # small ones first
        if _ranks(machine) > MAX_ALL_RANKS:
            echo(f"{machine}: skipped: {_ranks(machine)} ranks (--all covers up to {MAX_ALL_RANKS}; "
                 f"run optcoll expect {machine} for it)", err=True)
            continue
        for kind in KINDS:
            entry = next((e for e in entries if e.machine == machine and e.collective == kind), None)
            forced = entry.algorithm if entry and entry.algorithm != "default" else None
            try:
                rows = expect_rows(machine, kind, sizes, forced, None, dict(entry.points) if entry else None,
                                   gpus_per_thread=entry.gpus_per_thread if entry else 1)
            except InputError as exc:
                echo(f"{machine} {kind}: skipped: {exc}", err=True)
                continue
            _write(out, machine, kind, rows, entry.name if entry else None, entry.gpus_per_thread if entry else 1)
            echo(f"{machine} {kind}: {len(rows)} sizes", err=True)
    from optcoll.analysis.expect.accuracy import report
    from optcoll.fileio import write_text_atomic

    write_text_atomic(out / "accuracy.md", report(entries))


COMMANDS = [expect]
