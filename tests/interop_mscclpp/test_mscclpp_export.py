"""MSCCL++ export: plans pass the executor's load checks, import back through the existing importer
and verify at the schedule's time, or say exactly why not; bad input is one line, exit 2."""
import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli
from optcoll.errors import InputError
from optcoll.instances.instancefile import load_instance
from optcoll.interop.mscclpp.export import export_mscclpp
from optcoll.interop.mscclpp.schema import parse_plan
from optcoll.interop.mscclpp.validate import check_plan
from optcoll.machines.machine import Switch
from optcoll.producers.run import synthesized
from optcoll.schedules.jsonfile import load_schedule

MACHINES = Path(__file__).parents[2] / "instances" / "machines"
MiB = 2**20


def _instance(tmp_path, machine, collective, size, extra=""):
    path = tmp_path / f"{machine}-{collective}.toml"
    path.write_text(f'[instance]\nmachine = "{machine}"\ncollective = "{collective}"\nsize = "{size}"\n'
                    f"chunks_per_rank = 1\n{extra}")
    return load_instance(path)


def _export(inst, algo):
    schedule = synthesized(inst, algo).schedule
    return export_mscclpp(inst.machine, inst.collective, schedule, model=inst.model)


def _ops(data):
    return {op["name"] for g in data["gpus"] for tb in g["threadblocks"] for op in tb["ops"]}


@pytest.mark.parametrize("machine, collective, size, algo, ops", [
    ("dgxh100", "allreduce", "64 MiB", "nccl-nvls", {"glres", "signal", "wait"}),  # NVLS: one glres per chunk
    ("dgxh100-rail-2x8", "allgather", "16 MiB", "nccl-ring", {"pws", "put", "signal", "wait"}),  # NICs: port
    ("dgxh100-rail-2x8", "alltoall", "16 MiB", "direct", {"pws", "put"}),
    ("mi300x", "allreduce", "16 MiB", "nccl-ring", {"put", "re", "sem_acquire"}),
])
def test_export_round_trips_at_the_schedules_time(tmp_path, machine, collective, size, algo, ops):
    extra = '[model]\noccupancy = "serialization"\n' if machine == "mi300x" else ""
    exported = _export(_instance(tmp_path, machine, collective, size, extra), algo)
    assert exported.reimported == pytest.approx(exported.time, rel=1e-9)
    assert ops <= _ops(exported.data)
    plan = parse_plan(json.loads(exported.text), "plan.json")
    assert check_plan(plan) == []
    assert plan.min_message_size == plan.max_message_size == int(size.split()[0]) * MiB
    assert plan.protocol == "Simple" and not plan.inplace


def test_rail_plan_uses_port_channels_for_nic_routes_only(tmp_path):
    data = _export(_instance(tmp_path, "dgxh100-rail-2x8", "alltoall", "16 MiB"), "direct").data
    for g in data["gpus"]:
        for ch in g["channels"]:
            peer = ch["connected_to"][0]
            assert ch["channel_type"] == ("port" if peer // 8 != g["id"] // 8 else "memory")


def test_best_dgxh100_alltoall_round_trips(tmp_path):
    inst = load_instance(MACHINES / "dgxh100-alltoall-c1.toml")
    schedule = load_schedule(next((MACHINES / "schedules").glob("dgxh100-alltoall-c1.*.json.gz")), inst.machine)
    exported = export_mscclpp(inst.machine, inst.collective, schedule, model=inst.model)
    assert exported.reimported == pytest.approx(exported.time, rel=1e-9) and not exported.notes


def test_forwarding_on_direct_links_pays_the_signals_latency_and_says_so(tmp_path):
    # link occupancy: a put holds its link α + b/B, then its signal takes α more to the receiver,
    # which forwards α later than the schedule: the plan is later by whole multiples of α = 0.5 us
    exported = _export(_instance(tmp_path, "mi300x", "allreduce", "16 MiB"), "nccl-ring")
    assert exported.reimported > exported.time
    assert (exported.reimported - exported.time) / 0.5e-6 == pytest.approx(round((exported.reimported - exported.time)
                                                                                 / 0.5e-6))
    assert "signal" in exported.notes[0] and "serialization" in exported.notes[0]


def test_inswitch_sum_multicast_straight_back_is_exported_as_glres_and_the_difference_stated(tmp_path):
    # 8 chunks of 8 MiB: a hop is 0.5 us + 8 MiB / 450 GB/s = 19.1414 us. The schedule reduces each
    # chunk into the switch and multicasts the sum back: 9 hops pipelined (172.272 us). glres reads
    # every member's input when issued, sends the sum to its issuer and stores it back: the plan
    # takes 17 hops (325.403 us), 8 hop times more.
    exported = _export(_instance(tmp_path, "dgxh100", "allreduce", "64 MiB"), "inswitch")
    hop = 0.5e-6 + 8 * MiB / 450e9
    assert exported.time == pytest.approx(9 * hop)
    assert exported.reimported == pytest.approx(17 * hop)
    assert "straight back" in exported.notes[0] and "glres" in exported.notes[0]


def test_multicast_through_a_switch_becomes_one_put_per_branch(tmp_path):
    inst = load_instance(MACHINES / "dgxh100-allgather-c1.toml")
    schedule = load_schedule(next((MACHINES / "schedules").glob("dgxh100-allgather-c1.*.json.gz")), inst.machine)
    exported = export_mscclpp(inst.machine, inst.collective, schedule, model=inst.model)
    assert exported.reimported > exported.time
    assert any("multicasts 48 arrival(s)" in n for n in exported.notes)


def test_in_switch_reduction_on_a_plain_switch_is_refused(tmp_path):
    inst = _instance(tmp_path, "dgxh100", "allreduce", "64 MiB")
    schedule = synthesized(inst, "inswitch").schedule
    machine = replace(inst.machine, switches=tuple(Switch(s.label) for s in inst.machine.switches))
    with pytest.raises(InputError, match="refusing to export an invalid schedule"):
        export_mscclpp(machine, inst.collective, schedule, model=inst.model)


def test_cli_exports_and_bad_input_is_one_line_exit_2(tmp_path):
    runner = CliRunner()
    inst_path = MACHINES / "dgxh100-alltoall-c1.toml"
    sched = str(next((MACHINES / "schedules").glob("dgxh100-alltoall-c1.*.json.gz")))
    out = tmp_path / "plan.json"
    ok = runner.invoke(cli, ["mscclpp", "export", str(inst_path), sched, "-o", str(out)])
    assert ok.exit_code == 0 and "re-imported at the same time" in ok.output
    assert runner.invoke(cli, ["mscclpp", "validate", str(out), "--size", "1 GiB"]).exit_code == 0
    other = str(next((MACHINES / "schedules").glob("mi300x-alltoall-c1.*.json.gz")))  # a schedule of another machine
    bad = runner.invoke(cli, ["mscclpp", "export", str(inst_path), other, "-o", str(tmp_path / "x.json")])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1
