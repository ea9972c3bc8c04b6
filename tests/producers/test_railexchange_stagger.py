"""How far a staggered rail exchange can go on cluster2x8, C = 1 (issue 13): 3h + 15x, verified.

Units (``h`` one NIC hop of a chunk, ``x`` one NVLink hop; h ≈ 12x): today's rail-exchange takes
3h + 16x. When every chunk crosses once, a node's rail j sends its first partial when its reduction
ends (F_j NVLink hops after the start) and lands its second partial on the other node 3h later, so
both intra-node phases are the same slot problem on one NVSwitch (one uplink and one downlink per
GPU, a copy or reduce started in slot s arriving at s + 2): the first wave's reductions are the
time reversal of a broadcast whose chunk j starts at max F − F_j, and the last phase is a
broadcast whose chunk j starts at F_j, relative to 3h.

3h + 14x is out of reach in that case: a broadcast of 8 chunks by slot 14 makes 56 sends in slots
5..12, and a GPU can send only once it holds a chunk, so with n_t chunks landed by t the senders
in slots 5..8 number at most n5 + n6 + min(8, n7 + n5) + min(8, n8 + n5 + n6), which must reach
56 − 4·8 = 24: n5 + n6 ≥ 8. The reductions, time-reversed the same way, cannot end 5 chunks by
slot 6 (at most 34 < 35 senders in slots 0..4) nor 4 by slot 5 (24 < 28), and none ends before
slot 5 (Fibonacci). The slot plans below (CP-SAT, one worker, fixed seed) reach 3h + 15x with the
staircase F = 5, 5, 6, 8, 8, 8, 9, 10; listed in slot order they go through the flow scheduler
unchanged. This is the evidence for the figure, not a producer: no constructive rule for such
staircases is known here, and the gap to ``allreduce-cut-once`` stays 6.3 %.
"""
from __future__ import annotations

from collections import defaultdict

import pytest
from ortools.sat.python import cp_model

from optcoll.bounds import lower_bounds
from optcoll.bundled import bundled_dir
from optcoll.instances.instancefile import load_instance
from optcoll.producers.baselines.flows import Exchange, Flow, schedule_flows
from optcoll.producers.baselines.nccl.topology import nccl_topology
from optcoll.schedules.schedule import COPY, REDUCE
from optcoll.verify import verify

STAIRCASE = (5, 5, 6, 8, 8, 8, 9, 10)


def slot_broadcast(avail: list[int], deadline: int) -> list[tuple[int, int, int, int]]:
    """(slot, chunk, sender, receiver): chunk j from GPU j at slot avail[j] to every GPU by
    ``deadline``; a send in slot s takes the sender's uplink in s and the receiver's downlink in
    s + 1, and the receiver holds the chunk from s + 2."""
    gpus = len(avail)
    model = cp_model.CpModel()
    send = {(j, a, b, s): model.NewBoolVar("")
            for j in range(gpus) for a in range(gpus) for b in range(gpus) if b not in (a, j)
            for s in range(avail[j] + (0 if a == j else 2), deadline - 1)}
    uplink, downlink, into = defaultdict(list), defaultdict(list), defaultdict(list)
    for (j, a, b, s), var in send.items():
        uplink[a, s].append(var)
        downlink[b, s].append(var)
        into[j, b].append((s, var))
    for group in (*uplink.values(), *downlink.values()):
        model.AddAtMostOne(group)
    for received in into.values():
        model.AddExactlyOne([var for _, var in received])
    for (j, a, b, s), var in send.items():
        if a != j:  # a relays only what reached it by s
            model.AddBoolOr([held for t, held in into[j, a] if t <= s - 2] + [var.Not()])
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    assert solver.Solve(model) == cp_model.OPTIMAL
    return sorted((s, j, a, b) for (j, a, b, s), var in send.items() if solver.Value(var))


def test_staggered_rails_reach_3h_plus_15x_on_cluster2x8():
    """Reductions ending on the staircase, the swaps in that order (the second partial behind the
    first on each NIC), the last phase from the staircase + 3h: verified at 3h + 15x, one NVLink
    hop under today's rail-exchange and above the cut-once bound."""
    inst = load_instance(bundled_dir("instances") / "standard" / "cluster2x8-allreduce-c1.toml")
    b = inst.collective.chunk_bytes
    nic, nv = 2e-6 + b / 25e9, 0.5e-6 + b / 300e9
    topo = nccl_topology(inst.machine, inst.collective.ranks)
    orders = [list(topo.rails[n]) + [v for v in topo.intra_orders[n] if v not in topo.rails[n]]
              for n in range(len(topo.nodes))]
    rails, last = len(STAIRCASE), max(STAIRCASE)
    # first wave: the broadcast from slot last − F_j, reversed (a send in slot s becomes a reduce
    # from the receiver into the sender in slot last − s − 2)
    reversed_plan = slot_broadcast([last - f for f in STAIRCASE], last)
    first = [Flow(j, o[child], o[parent], REDUCE)
             for _, j, parent, child in sorted(reversed_plan, key=lambda p: -p[0]) for o in orders]
    by_start = sorted(range(rails), key=lambda j: STAIRCASE[j])
    swaps = [Exchange(k, tuple(o[k % rails] for o in orders)) for k in by_start]
    second = [Flow(rails + j, o[(j + s) % rails], o[j], REDUCE) for s in range(1, rails) for j in range(rails)
              for o in orders]
    last_phase = [Flow(rails + j, o[a], o[b], COPY) for _, j, a, b in slot_broadcast(list(STAIRCASE), 15)
                  for o in orders]
    first_spreads = [Flow(j, o[j], o[(j + s) % rails], COPY) for s in range(1, rails) for j in range(rails)
                     for o in orders]
    second_swaps = [Exchange(rails + x.chunk, x.members) for x in swaps]
    flows = first + swaps + second + second_swaps + last_phase + first_spreads
    result = verify(inst.machine, inst.collective, schedule_flows(inst, flows), inst.model)
    assert result.valid, result.violation.message
    assert result.time == pytest.approx(3 * nic + 15 * nv)
    bound = {x.name: x.value for x in lower_bounds(inst.machine, inst.collective, inst.model)}
    assert bound["allreduce-cut-once"] == pytest.approx(4 * nic)
    assert bound["allreduce-cut-once"] < result.time
