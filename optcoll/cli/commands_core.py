"""Core commands: look at models and instances, verify and simulate schedules, list bounds."""
from __future__ import annotations

import sys

import click


from optcoll.cli.limits import combining_option, progress_option, with_combining
from optcoll.cli.output import WholeHelpGroup, done, echo, emit_json, json_option, progress_shown
from optcoll.text.table import percent, table
from optcoll.units import format_size, format_time



def narrowed_to_show(command: str):
    """The machine sizes ``command`` builds: what it can describe or draw in seconds."""
    from optcoll import limits

    return limits.narrowed(command, nodes="show_nodes", links="show_links")


@click.group(cls=WholeHelpGroup)
def model() -> None:
    """Machine models: list, show, draw."""


@model.command("list")
@json_option
def model_list(as_json: bool) -> None:
    """The built-in machine models, each with the documents its numbers come from."""
    from optcoll.machines.catalog import load_model
    from optcoll.machines.modelpaths import builtin_model_names

    rows = []
    for name in builtin_model_names():
        model = load_model(name)
        machine = model.machine
        rows.append({"name": name, "npus": machine.num_npus, "switches": len(machine.switches),
                     "links": machine.num_links, "sources": model.provenance.summary(),
                     "description": machine.description})
    if as_json:
        emit_json(rows)
    else:
        echo(table(["name", "NPUs", "switches", "links", "sources", "description"],
                   [[r["name"], r["npus"], r["switches"], r["links"], r["sources"], r["description"]]
                    for r in rows]))


#: Machines with more links than this take seconds to describe: say so first.
SLOW_SHOW_LINKS = 2048


@model.command("show")
@click.argument("ref")
@progress_option
@json_option
def model_show(ref: str, progress: bool | None, as_json: bool) -> None:
    """Figures of a model (built-in NAME or FILE.toml): sizes, degrees, diameter, cuts, and the
    sources of its numbers (which ones have none)."""
    from optcoll.bounds.cuts import worst_cut
    from optcoll.machines.catalog import load_model
    from optcoll.machines.describe import describe_machine, render_description
    from optcoll.machines.figures import render_figures

    with narrowed_to_show("model show"):
        model = load_model(ref)
    machine = model.machine
    if machine.num_links > SLOW_SHOW_LINKS and progress_shown(progress):
        echo(f"optcoll: {machine.num_npus} NPUs, {machine.num_links} links: computing the diameter and the "
             "worst cut takes seconds", err=True)
    info = describe_machine(model.machine, cut_finder=worst_cut)
    if as_json:
        figures = model.figures
        emit_json({**info, "provenance": model.provenance.to_dict(),
                   "figures": None if figures is None else {"scale_up": figures.scale_up.tolist(),
                                                            "scale_out": figures.scale_out.tolist()}})
    else:
        echo(render_description(info))
        echo(render_figures(model.machine, model.figures))
        echo(model.provenance.render())


@model.command("draw")
@click.argument("ref")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="SVG file to write.")
@json_option
def model_draw(ref: str, out: str, as_json: bool) -> None:
    """Draw a model as an SVG picture."""
    from optcoll.machines.catalog import load_machine
    from optcoll.reports.drawing import draw_machine

    with narrowed_to_show("model draw"):
        machine = load_machine(ref)
    draw_machine(machine, out)
    done(as_json, f"wrote {out}", out=out)


@click.group(cls=WholeHelpGroup)
def instance() -> None:
    """Problem instances: show."""


@instance.command("show")
@click.argument("path", type=click.Path(dir_okay=False))
@json_option
def instance_show(path: str, as_json: bool) -> None:
    """What an instance asks for, and what is recorded for it."""
    from optcoll.instances.instancefile import load_instance

    inst = load_instance(path)
    c = inst.collective
    info = {"name": inst.name, "machine": inst.machine_ref, "npus": inst.machine.num_npus,
            "collective": c.kind, "root": c.root, "ranks": len(c.ranks),
            "size_bytes": c.size_bytes, "chunks_per_rank": c.chunks_per_rank,
            "chunk_choices": list(inst.chunk_choices),
            "chunks": c.num_chunks, "chunk_bytes": c.chunk_bytes, "model": inst.model.to_dict(),
            "budget": vars(inst.budget), "results": inst.results,
            "machine_sources": list(inst.machine.sources)}
    if as_json:
        emit_json(info)
        return
    echo(inst.describe())
    chunk = format_size(c.chunk_bytes) if c.equal_chunks else (
        f"{format_size(c.chunk_bytes)} to {format_size(float(c.sizes().max()))}")
    free = f"free in {list(inst.chunk_choices)}, at the smallest " if inst.chunk_choices else ""
    echo(f"  M = {format_size(c.size_bytes)}, N = {len(c.ranks)}, C = {free}{c.chunks_per_rank}, "
         f"chunk = {chunk} ({c.num_chunks} chunks)")
    echo(f"  model: {inst.model.to_dict()}")
    for source in inst.machine.sources:
        echo(f"  machine {source}")
    echo(f"  budget: time limit {format_time(inst.budget.time_limit)}, "
               f"{inst.budget.threads} threads, seed {inst.budget.seed}")
    if inst.results:
        echo(f"  recorded results: {', '.join(sorted(inst.results))}")


def load_instance_and_schedule(instance_path: str, schedule_path: str):
    """(the instance as written, the instance at the schedule's C, the schedule)."""
    from optcoll.instances.instancefile import load_instance
    from optcoll.schedules.files import load_schedule

    inst = load_instance(instance_path)
    schedule = load_schedule(schedule_path, inst.machine)
    return inst, (schedule_chunks(inst, schedule) if inst.chunk_choices else inst), schedule


def schedule_chunks(inst, schedule):
    """The fixed instance at the C a schedule of a C-free instance uses: its ``meta``'s
    ``chunks_per_rank`` (optcoll writes it), else the C its chunk ids need."""
    from optcoll.producers.chunks import chosen

    c = schedule.meta.get("chunks_per_rank")
    if c is None:
        base = inst.collective.num_chunks // inst.collective.chunks_per_rank
        needed = (int(schedule.chunk.max(initial=-1)) + 1 + base - 1) // base
        c = next((a for a in inst.chunk_choices if a >= needed), inst.chunk_choices[-1])
    return chosen(inst, {"chunks_per_rank": c})


@click.command()
@click.argument("instance_path", metavar="INSTANCE", type=click.Path(dir_okay=False))
@click.argument("schedule_path", metavar="SCHEDULE", type=click.Path(dir_okay=False))
@combining_option
@json_option
def verify(instance_path: str, schedule_path: str, combining: str | None, as_json: bool) -> None:
    """Check a schedule (.json, .json.gz or the compact .npz): exit 0 and its time when valid, exit 1
    and the reason when not."""
    from optcoll.bounds import best_lower_bound
    from optcoll.verify import verify as run_verify

    from optcoll.producers.chunks import least_bound

    free, inst, schedule = load_instance_and_schedule(instance_path, schedule_path)
    inst = with_combining(inst, combining)
    result = run_verify(inst.machine, inst.collective, schedule, inst.model)
    if not result.valid:
        v = result.violation
        if as_json:
            emit_json({"valid": False, "kind": v.kind, "message": v.message, "time": v.time,
                       "chunk": v.chunk, "link": v.link, "transfer": v.transfer})
        else:
            echo(f"INVALID [{v.kind}]: {v.message}")
        sys.exit(1)
    bound = (least_bound(free) if free.chunk_choices else best_lower_bound(inst.machine, inst.collective, inst.model)) \
        if schedule.model == "timed" else None
    gap = result.time / bound.value - 1 if bound and bound.value > 0 else None
    if as_json:
        emit_json({"valid": True, "time": result.time, "transfers": len(schedule),
                   "lower_bound": bound.value if bound else None,
                   "lower_bound_source": bound.name if bound else None, "gap": gap})
        return
    echo(f"valid: time {format_time(result.time)} ({len(schedule)} transfers)")
    if bound:
        echo(f"lower bound {format_time(bound.value)} ({bound.name}); gap {percent(gap)}")


@click.command()
@click.argument("instance_path", metavar="INSTANCE", type=click.Path(dir_okay=False))
@click.argument("schedule_path", metavar="SCHEDULE", type=click.Path(dir_okay=False))
@click.option("--gantt", type=click.Path(dir_okay=False), help="Write a Gantt chart (SVG).")
@click.option("--limit", default=40, show_default=True, help="Timeline rows to print (0 = all).")
@json_option
def simulate(instance_path: str, schedule_path: str, gantt: str | None, limit: int,
             as_json: bool) -> None:
    """Replay a schedule: timeline, link utilisation, optionally a Gantt chart."""
    from optcoll.verify import draw_gantt, timeline, verify as run_verify

    _, inst, schedule = load_instance_and_schedule(instance_path, schedule_path)
    result = run_verify(inst.machine, inst.collective, schedule, inst.model)
    if not result.valid:
        echo(f"INVALID [{result.violation.kind}]: {result.violation.message}", err=True)
        sys.exit(1)
    rows = timeline(inst.machine, inst.collective, schedule, result)
    links = sorted(result.link_stats, key=lambda s: -s.utilisation)
    if gantt:
        draw_gantt(inst.machine, schedule, result, gantt)
    if as_json:
        emit_json({"time": result.time, "timeline": [vars(r) for r in rows],
                   "links": [vars(s) for s in links]})
        return
    echo(f"time {format_time(result.time)}, {len(schedule)} transfers")
    shown = rows if limit == 0 else rows[:limit]
    echo(table(["#", "chunk", "src", "dst", "link", "start", "end", "op"],
                     [[r.transfer, r.chunk, inst.machine.label(r.src), inst.machine.label(r.dst),
                       r.link, format_time(r.start), format_time(r.end), r.op] for r in shown]))
    if len(shown) < len(rows):
        echo(f"... {len(rows) - len(shown)} more (use --limit 0)")
    busy = [s for s in links if s.transfers]
    echo(f"\nlink utilisation ({len(busy)} of {inst.machine.num_links} links used), busiest:")
    echo(table(["link", "transfers", "busy", "utilisation"],
                     [[f"{s.link} ({inst.machine.label(s.src)}->{inst.machine.label(s.dst)})",
                       s.transfers, format_time(s.busy_time), f"{100 * s.utilisation:.1f} %"]
                      for s in busy[:10]]))
    if gantt:
        echo(f"wrote {gantt}")


@click.command()
@click.argument("instance_path", metavar="INSTANCE", type=click.Path(dir_okay=False))
@json_option
def bound(instance_path: str, as_json: bool) -> None:
    """Every lower bound for an instance, with its name, value, witness and what it assumes."""
    from optcoll.bounds import lower_bounds, not_applied
    from optcoll.instances.instancefile import load_instance

    inst = load_instance(instance_path)
    if inst.chunk_choices:  # the instance's bound, then each C's best (for schedules at that C only)
        from dataclasses import replace

        from optcoll.producers.chunks import at_chunks, least_bound

        per_c = [(c, max(lower_bounds(f.machine, f.collective, f.model), key=lambda b: b.value))
                 for c, f in ((c, at_chunks(inst, c)) for c in inst.chunk_choices)]
        bounds = [least_bound(inst)] + [replace(b, name=f"{b.name} [schedules at C={c} only]") for c, b in per_c]
    else:
        bounds = sorted(lower_bounds(inst.machine, inst.collective, inst.model), key=lambda b: -b.value)
    if as_json:
        emit_json([{"name": b.name, "value": b.value, "unit": "s", "detail": b.detail,
                    "assumptions": list(b.assumptions)} for b in bounds])
        return
    echo(inst.describe())
    echo(table(["bound", "value", "assumes", "witness"],
               [[b.name, format_time(b.value), "; ".join(b.assumptions) or "-", b.detail] for b in bounds]))
    skipped = not_applied(inst.machine, inst.collective)
    if skipped:
        echo(f"not applied: {skipped}")


@click.command()
@json_option
def warm(as_json: bool) -> None:
    """Compile optcoll's numba kernels into numba's on-disk cache (once after installing or
    upgrading), so that no time-limited run pays their first compile (20-40 s of CPU)."""
    from optcoll.producers.kernels import warm as compile_kernels

    spent = compile_kernels(echo=(lambda line: None) if as_json else echo)
    if as_json:
        emit_json({"kernels": [{"what": what, "seconds": seconds} for what, seconds in spent]})
        return
    echo(f"kernels ready in numba's cache: {sum(seconds for _, seconds in spent):.1f} s")


COMMANDS = [model, instance, verify, simulate, bound, warm]
