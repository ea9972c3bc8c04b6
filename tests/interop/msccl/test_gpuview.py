"""The GPU-only view shared by the MSCCL and MSCCL++ exporters (optcoll/interop/gpuview.py): sends
matched to the arrivals they forward as the verifier matches them, and both exporters' outputs
byte for byte what they were before the two views became one."""
import hashlib
from pathlib import Path

import pytest

from msccl_helpers import BW, LAT, TAU, collective
from optcoll.instances.suite import find_suite
from optcoll.interop.gpuview import extra_sends, follow
from optcoll.interop.msccl import export_msccl
from optcoll.interop.mscclpp.export import export_mscclpp
from optcoll.machines.generators import nvswitch
from optcoll.producers.chunks import chosen
from optcoll.schedules.jsonfile import load_schedule
from optcoll.schedules.schedule import ScheduleBuilder
from optcoll.truth.stored import load_truth
from optcoll.verify import verify
from optcoll.verify.problem import ABSOLUTE_TOLERANCE


def _view(machine, coll, schedule):
    result = verify(machine, coll, schedule)
    assert result.valid
    return follow(machine, coll, schedule, result.arrivals, ABSOLUTE_TOLERANCE, "a test")


def test_a_plain_switch_forwards_its_arrivals_of_a_chunk_first_in_first_out():
    # GPU 0 sends chunk 0 up at 0, TAU, 2 TAU; the switch sends the k-th copy to GPU k+1 in the
    # reverse GPU order: the send to GPU 3 (at TAU) still carries the first arrival
    machine = nvswitch(4, BW, LAT)
    sw = machine.num_npus
    b = ScheduleBuilder(machine)
    for k in range(3):
        b.send(0, 0, sw, start=k * TAU)
    for k in range(3):
        b.send(0, sw, 3 - k, start=(k + 1) * TAU)
    ups, downs = [0, 1, 2], [3, 4, 5]  # transfer ids: the builder keeps the order of its sends
    coll = collective("broadcast", 4, root=0)
    view = _view(machine, coll, b.build())
    assert [view.sources[d] for d in downs] == ups
    assert {(s.src, s.dst, s.hops) for s in view.sends} == {(0, 3 - k, (ups[k], downs[k])) for k in range(3)}
    assert extra_sends([s.first for s in view.sends]) == 0


def test_a_multicast_switch_sends_its_latest_arrival_and_each_branch_is_an_extra_send():
    machine = nvswitch(4, BW, LAT, multicast=True)
    sw = machine.num_npus
    b = ScheduleBuilder(machine)
    b.send(0, 0, sw, start=0.0)
    for v in (1, 2, 3):
        b.send(0, sw, v, start=TAU)
    view = _view(machine, collective("broadcast", 4, root=0), b.build())
    assert {s.hops for s in view.sends} == {(0, 1), (0, 2), (0, 3)} and all(not s.from_sum for s in view.sends)
    assert extra_sends([s.first for s in view.sends]) == 2


def test_a_send_out_of_a_reducing_switch_carries_its_sum():
    machine = nvswitch(4, BW, LAT, multicast=True, reduce=True)
    sw = machine.num_npus
    b = ScheduleBuilder(machine)
    for g in range(4):
        b.send(0, g, sw, start=0.0, op="reduce")
    b.send(0, sw, 0, start=TAU)
    view = _view(machine, collective("reduce", 4, root=0), b.build())
    (send,) = view.sends
    assert send.from_sum and send.src == sw and len(send.hops) == 1


#: SHA-256 (first 16 hex digits) of exports written by main 0bedb35, before the exporters shared
#: this view: the MSCCL XML and the MSCCL++ plan (without the start handshake added since).
BEFORE = {
    ("msccl", "dgxh100-allgather-c1"): "bc3fa45a335e6d10",  # 48 multicast arrivals: one send per branch
    ("msccl", "dgxh100-rail-2x8-alltoall-c1"): "4222bc12e3d0ec39",  # routes through rail leaves
    ("mscclpp", "dgxh100-allgather-c1"): "46cd8e9b8e6f9faf",
    ("mscclpp", "dgxh100-rail-2x8-alltoall-c1"): "1d6847a8dd1fef02",  # port channels over NICs
}


@pytest.mark.parametrize("runtime, name", sorted(BEFORE))
def test_both_exporters_write_what_they_wrote_before_the_shared_view(runtime, name):
    spec = find_suite("machines").spec(name)
    truth, _ = load_truth(spec)
    inst = chosen(spec.instance, truth.best.details.get("params", {}))
    schedule = load_schedule(Path(spec.path).parent / truth.schedule, inst.machine)
    if runtime == "msccl":
        text = export_msccl(inst.machine, inst.collective, schedule, model=inst.model, check=False).text
    else:
        text = export_mscclpp(inst.machine, inst.collective, schedule, model=inst.model, check=False,
                              handshake=False).text
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == BEFORE[(runtime, name)]
