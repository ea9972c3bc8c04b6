"""MSCCL++ execution plans (JSON): validate them as its executor loads them, import them as schedules."""
from __future__ import annotations

import sys

import click

from optcoll.cli.limits import BYTES
from optcoll.cli.output import WholeHelpGroup, echo, emit_json, json_option
from optcoll.units import format_time


@click.group(cls=WholeHelpGroup)
def mscclpp() -> None:
    """MSCCL++ execution plans: export verified schedules, validate and import plans."""


@mscclpp.command("export")
@click.argument("instance_path", metavar="INSTANCE", type=click.Path(dir_okay=False))
@click.argument("schedule_path", metavar="SCHEDULE", type=click.Path(dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Plan file (.json) to write.")
@click.option("--name", default=None, help="Plan name (default: the instance name).")
@click.option("--min-size", default=None, type=BYTES,
              help="Smallest message the executor may run the plan for (default: the instance's size M).")
@click.option("--max-size", default=None, type=BYTES,
              help="Largest message the executor may run the plan for (default: the instance's size M).")
@click.option("--protocol", type=click.Choice(["Simple", "LL"]), default=None,
              help="Simple (puts, signals) or LL (packets: 8 bytes of data in 16); default LL up to 512 KiB, "
                   "Simple above and with NVLS.")
@click.option("--handshake/--no-handshake", default=True, show_default=True,
              help="Begin every thread block of a Simple plan with a relaxed signal/wait on its channels, as the "
                   "DSL's plans do.")
@json_option
def mscclpp_export(instance_path, schedule_path, out, name, min_size, max_size, protocol, handshake, as_json) -> None:
    """Write a verified schedule as an MSCCL++ execution plan (checked by importing it back)."""
    from optcoll.cli.commands_core import load_instance_and_schedule
    from optcoll.interop.mscclpp.export import save_mscclpp_plan

    _, inst, schedule = load_instance_and_schedule(instance_path, schedule_path)
    exported = save_mscclpp_plan(out, inst.machine, inst.collective, schedule, model=inst.model,
                                 name=name or inst.name, min_bytes=None if min_size is None else int(min_size),
                                 max_bytes=None if max_size is None else int(max_size), handshake=handshake,
                                 protocol=protocol)
    if as_json:
        emit_json({"out": out, "time": exported.time, "reimported": exported.reimported,
                   "handshake": exported.handshake, "protocol": exported.data["protocol"],
                   "notes": list(exported.notes)})
    else:
        echo(f"wrote {out}: {exported.summary()}")
        for line in exported.notes:
            echo(f"  note: {line}")


@mscclpp.command("validate")
@click.argument("plan_path", metavar="PLAN", type=click.Path(dir_okay=False))
@click.option("--size", default=None, type=BYTES,
              help="Also check this collective size M (alignment, chunk divisibility, the plan's message range).")
@json_option
def mscclpp_validate(plan_path, size, as_json) -> None:
    """Check a plan against the MSCCL++ executor's load-time rules (exit 2 naming the element if not)."""
    from optcoll.interop.mscclpp.geometry import sizes_for
    from optcoll.interop.mscclpp.schema import read_plan
    from optcoll.interop.mscclpp.validate import check_plan

    plan = read_plan(plan_path)
    notes = check_plan(plan)
    if size is not None:
        sizes_for(plan, int(size))
    if as_json:
        emit_json({"valid": True, "collective": plan.collective, "gpus": len(plan.gpus), "notes": notes})
    else:
        echo(f"{plan_path}: valid MSCCL++ plan ({plan.collective}, {len(plan.gpus)} GPUs, {plan.protocol})")


@mscclpp.command("import")
@click.argument("plan_path", metavar="PLAN", type=click.Path(dir_okay=False))
@click.option("--machine", "machine_ref", required=True, help="Machine model (name or .toml).")
@click.option("--size", required=True, type=BYTES,
              help="The collective's size M as nccl-tests counts it (AllGather: the output), e.g. '32 MiB'.")
@click.option("-o", "--out", type=click.Path(dir_okay=False), help="Write the schedule (.json/.json.gz).")
@json_option
def mscclpp_import(plan_path, machine_ref, size, out, as_json) -> None:
    """Run a plan on a machine as the executor would, verify its schedule and report its time."""
    from optcoll.interop.mscclpp.importer import import_mscclpp_plan
    from optcoll.machines.catalog import load_machine
    from optcoll.schedules.jsonfile import save_schedule
    from optcoll.verify import verify

    machine = load_machine(machine_ref)
    imported = import_mscclpp_plan(plan_path, machine, size=int(size))
    result = verify(imported.machine, imported.collective, imported.schedule, imported.model)
    ok = result.valid and imported.faithful
    if out:
        save_schedule(out, imported.schedule, imported.machine)
    if as_json:
        emit_json({"valid": ok, "time": result.time if result.valid else None,
                   "collective": imported.collective.kind, "transfers": len(imported.schedule),
                   "violation": result.violation.message if result.violation else None,
                   "problems": list(imported.problems), "notes": list(imported.notes)})
    else:
        echo(f"{plan_path}: {imported.collective.describe()}, {len(imported.schedule)} transfers")
        for line in imported.notes:
            echo(f"  note: {line}")
        for line in imported.problems:
            echo(f"  PROBLEM: {line}")
        echo(f"valid: time {format_time(result.time)}" if result.valid
             else f"INVALID [{result.violation.kind}]: {result.violation.message}")
    sys.exit(0 if ok else 1)


COMMANDS = [mscclpp]
