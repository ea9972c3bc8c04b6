"""Commands that produce schedules: ``synth`` (greedy and classical baselines), ``solve`` and
``pareto`` (the exact solvers)."""
from __future__ import annotations

import statistics
import sys

import click

from optcoll.cli.limits import (TIME, as_flags, combining_option, command_start, max_memory_option, out_option,
                                progress_option, runs_option, seed_option, threads_option, time_limit_option,
                                with_combining, work_limit_option)
from optcoll.cli.output import echo, emit_json, json_option
from optcoll.text.table import percent, table
from optcoll.units import format_time

#: ``--formulation``'s choices: the formulations of ``producers.formulations`` that run alone (a
#: test keeps this list equal to the registry's; the registry itself loads only when solving).
FORMULATION_NAMES = ("timed", "time-expanded", "continuous", "step", "least-steps")



@click.command()
@click.argument("instance_path", metavar="INSTANCE", required=False, type=click.Path(dir_okay=False))
@click.option("--algo", default="tacos", show_default=True, help="Synthesizer name (see --list).")
@seed_option
@runs_option
@out_option("Write the best schedule (.json, .json.gz, or .npz: the compact form for large schedules).")
@click.option("--portfolio", is_flag=True,
              help="Also run every other synthesizer that implements the collective; keep the best.")
@click.option("--chunks", default=None, callback=lambda ctx, param, value: _chunks_flag(value),
              help="C chunks per rank instead of the instance's; 'free' (1,2,4,8) or a list '1,2,4' "
                   "runs at each C and keeps the fastest.")
@click.option("--list", "list_algos", is_flag=True, help="List the synthesizers and what they implement.")
@json_option
def synth(instance_path: str | None, algo: str, seed: int | None, runs: int, out: str | None,
          portfolio: bool, chunks, list_algos: bool, as_json: bool) -> None:
    """Run a greedy or classical synthesizer; the schedule is verified before its time is shown."""
    from optcoll.producers.registry import IMPLEMENTS, RANDOMIZED, SYNTHESIZERS

    if list_algos:
        rows = [{"name": s.name, "seeded": s.name in RANDOMIZED,
                 "collectives": sorted(IMPLEMENTS[s.name]), "description": s.description}
                for s in SYNTHESIZERS.values()]
        if as_json:
            emit_json(rows)
        else:
            echo(table(["name", "seeded", "description"],
                             [[r["name"], "yes" if r["seeded"] else "", r["description"]] for r in rows]))
        return
    if instance_path is None:
        raise click.UsageError("INSTANCE is required unless --list is given")
    from optcoll.instances.instancefile import load_instance
    from optcoll.producers import run
    from optcoll.schedules.files import save_schedule

    inst = load_instance(instance_path)
    if chunks is not None:
        inst = _rechunked(inst, chunks)
    with as_flags(algo="--algo"):
        produced = run.synthesized(inst, algo, runs or 1, seed, portfolio=portfolio)
    result, schedule, times, wall = produced.result, produced.schedule, produced.times, produced.result.wall_time
    algo = result.producer
    if out:
        save_schedule(out, schedule, inst.machine)
    if as_json:
        emit_json({**result.to_dict(), "run_times": list(times), "out": out})
        return
    echo(inst.describe())
    if inst.chunk_choices:
        echo(f"chose C = {result.params['chunks_per_rank']} of {list(inst.chunk_choices)} "
             f"(fastest verified schedule; {'; '.join(result.notes)})")
    spread = (f" (best of {len(times)}: median {format_time(statistics.median(times))}, "
              f"worst {format_time(max(times))})" if len(times) > 1 else "")
    echo(f"{algo}: {format_time(result.time)}{spread}, {len(schedule)} transfers, "
               f"synthesised and verified in {wall:.2f} s")
    echo(f"lower bound {format_time(result.lower_bound)} ({result.lower_bound_source}); "
               f"gap {percent(result.gap)}; status {result.status}")
    if out:
        echo(f"wrote {out}")


def _mode(progress: bool | None, as_json: bool) -> str | None:
    from optcoll.sweeps.progress import progress_mode

    return None if as_json else progress_mode(progress)


def _progress_printer(mode: str | None):
    """Prints incumbent, bound and gap to stderr as a solve improves: one line per change on a
    terminal, at most one per ``progress.LINE_INTERVAL`` seconds elsewhere (``progress_mode``)."""
    from optcoll.sweeps.progress import LINES, Every

    if mode is None:
        return None
    last: list[tuple[float | None, float | None]] = []
    due = Every() if mode == LINES else (lambda: True)

    def show(wall: float, incumbent: float | None, bound: float | None) -> None:
        if last and last[-1] == (incumbent, bound) or not due():
            return
        last.append((incumbent, bound))
        gap = incumbent / bound - 1 if incumbent and bound else None
        echo(f"  {wall:7.1f} s  incumbent {format_time(incumbent) if incumbent else '-':>12}  "
                   f"bound {format_time(bound) if bound else '-':>12}  gap {percent(gap)}", err=True)
    return show


def _front_printer(mode: str | None):
    """Prints the best R/C so far and the rounds bound to stderr as the front grows (as often as
    ``_progress_printer``)."""
    from optcoll.sweeps.progress import LINES, Every

    if mode is None:
        return None
    last: list[tuple[float | None, float | None]] = []
    due = Every() if mode == LINES else (lambda: True)

    def show(wall: float, best: float | None, bound: float | None) -> None:
        if (not last or last[-1] != (best, bound)) and due():
            last.append((best, bound))
            echo(f"  {wall:7.1f} s  best R/C {'-' if best is None else f'{best:g}':>8}  "
                 f"bound R/C {'-' if bound is None else f'{bound:g}':>8}", err=True)
    return show


def _with_model(inst, kind: str | None):
    from dataclasses import replace

    return inst if kind is None or kind == inst.model.kind else replace(inst, model=replace(inst.model, kind=kind))


@click.command()
@click.argument("instance_path", metavar="INSTANCE", type=click.Path(dir_okay=False))
@click.option("--solver", type=click.Choice(["cpsat", "highs", "scip", "z3"]), default="cpsat", show_default=True,
              help="z3 solves the step model only.")
@click.option("--model", "model_kind", type=click.Choice(["timed", "step"]), default=None,
              help="Time model (default: the instance's).")
@time_limit_option(default_text="Wall-clock limit of the whole solve (default: the instance's [budget])")
@work_limit_option
@threads_option
@seed_option
@click.option("--quantum", type=TIME, default=None, help="Timed model: time quantum, e.g. '10 us' (default: exact unit).")
@out_option("Write the verified schedule (.json, .json.gz, or the compact .npz).")
@click.option("--export-model", type=click.Path(dir_okay=False),
              help="Also write the encoding: .mps/.lp (MIP), .smt2 (z3, step model), .pbtxt (CP-SAT, step).")
@progress_option
@max_memory_option
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Step model: exactly S steps (SCCL's --steps).")
@click.option("--rounds", type=click.IntRange(min=1), default=None,
              help="Step model: at most R rounds in all; with --steps, SCCL's feasibility question.")
@click.option("--chunks", default=None, callback=lambda ctx, param, value: _chunks_flag(value),
              help="Step model: C chunks per rank (default: the instance's chunks_per_rank); any model: "
                   "'free' (1,2,4,8) or a list '1,2,4' solves at each C and keeps the fastest.")
@click.option("--least-steps", is_flag=True, help="Step model: SCCL's least steps (one round per step).")
@click.option("--least-rounds", is_flag=True, help="Step model: the least rounds R, then the least steps with it.")
@click.option("--formulation", type=click.Choice(FORMULATION_NAMES), default=None,
              help="The exact formulation (default: the time model's: timed or step); what each applies to and "
                   "proves: optcoll/producers/formulations.py.")
@combining_option
@click.option("--verbose", "-v", is_flag=True,
              help="Print each phase's time on stderr as it ends (start-up, bounds, start schedules, models, "
                   "verification), with the time left to the limit.")
@json_option
def solve(instance_path, solver, model_kind, time_limit, work_limit, threads, seed, quantum, out, export_model,
          progress, max_memory, steps, rounds, chunks, least_steps, least_rounds, formulation, combining,
          verbose, as_json) -> None:
    """Optimal schedule (or best found plus a proven bound) from an exact solver, verified.

    The step model answers SCCL's questions: the least cost S·α + R·b/B_min (default), the
    least steps or the least rounds, within --steps/--rounds at --chunks.
    """
    from optcoll.instances.clock import Clock

    started = command_start()  # the time limit counts the whole command: imports, loading and bounds too
    from optcoll.producers.chunks import chosen
    from optcoll.instances.instancefile import load_instance
    from optcoll.producers import run
    from optcoll.results.advice import tightening_hints
    from optcoll.schedules.files import save_schedule

    inst = with_combining(_with_model(load_instance(instance_path), model_kind), combining)
    if solver == "z3" and inst.model.kind != "step":
        raise click.UsageError("z3 solves the step model only (use --model step)")
    objective = _step_question(inst.model.kind, steps, rounds, chunks if isinstance(chunks, int) else None,
                               least_steps, least_rounds)
    if chunks is not None:
        inst = _rechunked(inst, chunks)
    limits = inst.budget.overridden(time_limit=time_limit, threads=threads, seed=seed, max_memory=max_memory,
                                    work_limit=work_limit)
    clock = Clock(limits, started)
    if verbose:
        clock.on_phase = _print_phase
        clock.record("start-up and reading the instance", started)
    with as_flags(work_limit="--work-limit"):
        produced = run.exact(inst, solver=solver, clock=clock,
                             progress=_progress_printer(_mode(progress, as_json)),
                             quantum=quantum, steps=steps, rounds=rounds, objective=objective, formulation=formulation)
    result, outcome = produced.result, produced.outcome
    free = inst
    inst = chosen(inst, result.params)  # C free: the instance at the C the best schedule chose
    with clock.phase("write the outputs"):
        if out and produced.schedule is not None:
            save_schedule(out, produced.schedule, inst.machine)
        if export_model:
            from optcoll.producers.exact.step import export_step_model
            from optcoll.producers.exact.timed.solve import export_timed_model

            if inst.model.kind == "step":
                if outcome.schedule is None:
                    raise click.UsageError("no step-model solution to export the encoding of")
                export_step_model(inst, outcome.schedule.num_steps, sum(outcome.schedule.rounds), export_model)
            else:
                export_timed_model(inst, export_model, quantum=quantum)
    if as_json:
        emit_json({**result.to_dict(), "out": out})
        return
    echo(free.describe())
    if free.chunk_choices:
        echo(f"chose C = {inst.collective.chunks_per_rank} of {list(free.chunk_choices)} (fastest verified schedule)")
    if result.status == "infeasible":
        echo(f"infeasible: proven that no schedule answers this question ({result.lower_bound_source})")
    elif result.time is None:
        echo(f"{result.status}: no schedule within the budget; lower bound "
                   f"{format_time(result.lower_bound) if result.lower_bound else '-'} ({result.lower_bound_source})")
    else:
        echo(f"{result.status}: {format_time(result.time)} (verified); lower bound "
                   f"{format_time(result.lower_bound)} ({result.lower_bound_source}); gap {percent(result.gap)}")
    if result.steps:
        echo(_sccl_terms(inst, result.steps, result.rounds))
    echo(f"{outcome.solver_version}, {result.wall_time:.2f} s"
               + (f", quantum {format_time(outcome.quantum)}" if outcome.quantum else ""))
    for note in result.notes:
        echo(f"  note: {note}")
    for hint in tightening_hints(result):
        echo(f"  to tighten: {hint}")
    for path in (out, export_model):
        if path:
            echo(f"wrote {path}")
    sys.exit(0 if result.status in ("optimal", "bounded") else 1)


def _print_phase(phase) -> None:
    """``solve --verbose``: one line per phase as it ends, nested phases indented."""
    echo(f"  phase {phase.seconds:8.2f} s  (ended at {phase.ended:7.1f} s, {phase.left:7.1f} s left)  "
         f"{'  ' * phase.depth}{phase.name}", err=True)


def _step_question(kind: str, steps, rounds, chunks, least_steps: bool, least_rounds: bool) -> str:
    """The step-model objective the flags ask for; a flag that does not fit is a usage error."""
    given = [flag for flag, value in (("--steps", steps), ("--rounds", rounds), ("--chunks", chunks),
                                      ("--least-steps", least_steps), ("--least-rounds", least_rounds)) if value]
    if given and kind != "step":
        raise click.UsageError(f"{given[0]} applies to the step model only (use --model step)")
    if least_steps and least_rounds:
        raise click.UsageError("--least-steps and --least-rounds ask different questions; give one")
    if (least_steps or least_rounds) and rounds is not None:
        raise click.UsageError(f"{'--least-steps' if least_steps else '--least-rounds'} chooses the rounds; "
                               "leave --rounds out")
    if steps is not None and rounds is not None and rounds < steps:
        raise click.UsageError(f"--rounds {rounds} < --steps {steps}: every step takes at least one round")
    return "steps" if least_steps else "rounds" if least_rounds else "cost"


def _chunks_flag(text: str | None):
    """``--chunks N``, ``free`` or ``1,2,4`` (``parse_chunks_flag``); a bad value is a usage error."""
    from optcoll.errors import InputError
    from optcoll.instances.chunks import parse_chunks_flag

    if text is None:
        return None
    try:
        return parse_chunks_flag(text)
    except InputError as exc:
        raise click.UsageError(f"--chunks {text}: {exc.detail}") from None


def _rechunked(inst, chunks: int | tuple[int, ...]):
    """The instance with its buffer cut into ``chunks`` pieces per rank (SCCL's C), or with C
    free over the set ``chunks``."""
    from optcoll.errors import InputError
    from optcoll.producers.chunks import with_choices
    from optcoll.instances.instance import check_chunk_copies

    if inst.collective.kind in ("custom", "alltoallv") and not isinstance(chunks, int):
        raise click.UsageError(f"--chunks: {inst.collective.kind} fixes its chunks; give one number")
    try:
        check_chunk_copies(inst.collective.num_ranks, chunks if isinstance(chunks, int) else max(chunks))
    except InputError as exc:
        raise click.UsageError(f"--chunks {chunks}: {exc.detail}") from None
    return with_choices(inst, chunks)


def _sccl_terms(inst, steps: int, rounds: int) -> str:
    """A step-model answer in SCCL's terms: S, R, C, R/C and the α-β cost."""
    from fractions import Fraction

    timing = inst.model.step_timing(inst.machine, inst.collective.chunk_bytes)
    C = inst.collective.chunks_per_rank
    return (f"step model: S = {steps} steps, R = {rounds} rounds, C = {C} chunks per rank, "
            f"R/C = {Fraction(rounds, C)}; cost {steps}·α + {rounds}·b/B_min with α = "
            f"{format_time(timing.alpha)}, b/B_min = {format_time(timing.per_round)} "
            f"= {format_time(timing.cost(steps, rounds))}")


@click.command()
@click.argument("instance_path", metavar="INSTANCE", type=click.Path(dir_okay=False))
@click.option("--max-chunks", default=6, show_default=True, type=click.IntRange(min=1),
              help="Chunks per rank C from 1 up to this.")
@click.option("--solver", type=click.Choice(["cpsat", "highs", "scip", "z3"]), default="cpsat", show_default=True,
              help="Solver of each point's step model.")
@time_limit_option(default_text="Wall-clock limit of the whole front (default: the instance's [budget])")
@time_limit_option("--question-limit", default_text="Wall-clock limit of each (S, C) question; one that "
                   "reaches it leaves its point unproven and the front goes on (default: none)")
@threads_option
@max_memory_option
@progress_option
@combining_option
@json_option
def pareto(instance_path, max_chunks, solver, time_limit, question_limit, threads, max_memory, progress,
           combining, as_json) -> None:
    """The step model's Pareto front over (steps S, rounds per chunk R/C), every point verified."""
    from optcoll.instances.instancefile import load_instance
    from optcoll.producers.exact.step import pareto_front
    from optcoll.producers.exact.step.bounds import FAMILY
    from optcoll.producers.exact.step.chunking import rechunk
    from optcoll.verify import require_valid

    inst = with_combining(_with_model(load_instance(instance_path), "step"), combining)
    with as_flags(max_chunks="--max-chunks"):
        front = pareto_front(inst, max_chunks, solver=solver, time_limit=time_limit, threads=threads,
                             max_memory=max_memory, question_limit=question_limit,
                             progress=_front_printer(_mode(progress, as_json)))
    bound = front.bound
    for point in front.points:  # each point's schedule cuts the buffer into its own C pieces
        require_valid(inst.machine, rechunk(inst.collective, point.chunks), point.schedule, inst.model)
    rows = [{"steps": p.steps, "rounds": p.rounds, "chunks": p.chunks, "rounds_per_chunk": str(p.rounds_per_chunk),
             "cost": p.cost, "formula": p.formula, "proven": p.proven,
             "bandwidth_optimal": p.bandwidth_optimal} for p in front.points]
    if as_json:
        emit_json({"rounds_lower_bound": str(bound.value), "points": rows, "complete": front.complete,
                   "scope": front.scope, "stopped": front.stopped})
        return
    echo(inst.describe())
    echo(f"rounds lower bound: R/C >= {bound.value} ({bound.source})")
    family = bound.detail.get(FAMILY)
    if family is not None:  # what the AllReduce front's "bandwidth-optimal" compares with
        echo(f"within ReduceScatter then AllGather (the front below): R/C >= {family}")
    echo(f"searched: {front.scope} (\"proven\" and \"complete\" speak of these schedules only)")
    echo(table(["S", "R", "C", "R/C", "cost", "formula", "proven", "bandwidth-optimal"],
                     [[r["steps"], r["rounds"], r["chunks"], r["rounds_per_chunk"], format_time(r["cost"]),
                       r["formula"], "yes" if r["proven"] else "no", "yes" if r["bandwidth_optimal"] else ""]
                      for r in rows]))
    echo(f"front complete for {front.scope}: {front.stopped}" if front.complete
               else f"front incomplete (later points may exist): stopped by {front.stopped}")


COMMANDS = [synth, solve, pareto]
