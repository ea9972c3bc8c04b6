"""Commands that produce schedules: ``synth`` (greedy and classical baselines)."""
from __future__ import annotations

import statistics
import sys
import time

import click

from optcoll.cli.output import emit_json, percent, table
from optcoll.units import format_time

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@click.command()
@click.argument("instance_path", metavar="INSTANCE", required=False, type=click.Path(dir_okay=False))
@click.option("--algo", default="tacos", show_default=True, help="Synthesizer name (see --list).")
@click.option("--seed", default=None, type=int, help="First seed (default: the instance's budget seed).")
@click.option("--runs", default=1, show_default=True, help="Keep the best of this many seeds.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the best schedule (.json or .json.gz).")
@click.option("--list", "list_algos", is_flag=True, help="List the synthesizers and what they implement.")
@json_option
def synth(instance_path: str | None, algo: str, seed: int | None, runs: int, out: str | None,
          list_algos: bool, as_json: bool) -> None:
    """Run a greedy or classical synthesizer; the schedule is verified before its time is shown."""
    from optcoll.producers.registry import IMPLEMENTS, RANDOMIZED, SYNTHESIZERS, best_of, get_synthesizer

    if list_algos:
        rows = [{"name": s.name, "seeded": s.name in RANDOMIZED,
                 "collectives": sorted(IMPLEMENTS[s.name]), "description": s.description}
                for s in SYNTHESIZERS.values()]
        if as_json:
            emit_json(rows)
        else:
            click.echo(table(["name", "seeded", "description"],
                             [[r["name"], "yes" if r["seeded"] else "", r["description"]] for r in rows]))
        return
    if instance_path is None:
        raise click.UsageError("INSTANCE is required unless --list is given")
    from optcoll.instances.instancefile import load_instance
    from optcoll.results.record import evaluate_schedule
    from optcoll.schedules.jsonfile import save_schedule

    inst = load_instance(instance_path)
    first_seed = inst.budget.seed if seed is None else seed
    t0 = time.perf_counter()
    schedule, times = best_of(inst, get_synthesizer(algo), runs, first_seed)
    wall = time.perf_counter() - t0
    result = evaluate_schedule(inst, algo, schedule, wall, {"runs": len(times), "seed": first_seed})
    if out:
        save_schedule(out, schedule, inst.machine)
    if as_json:
        emit_json({**result.to_dict(), "run_times": times, "out": out})
        return
    click.echo(inst.describe())
    spread = (f" (best of {len(times)}: median {format_time(statistics.median(times))}, "
              f"worst {format_time(max(times))})" if len(times) > 1 else "")
    click.echo(f"{algo}: {format_time(result.time)}{spread}, {len(schedule)} transfers, "
               f"synthesised and verified in {wall:.2f} s")
    click.echo(f"lower bound {format_time(result.lower_bound)} ({result.lower_bound_source}); "
               f"gap {percent(result.gap)}; status {result.status}")
    if out:
        click.echo(f"wrote {out}")


COMMANDS = [synth]
