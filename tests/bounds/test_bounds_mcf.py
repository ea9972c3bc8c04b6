"""The multi-commodity-flow bound: above the cut and capacity bounds, below every verified
schedule, equal to a max-flow computed independently on single-source patterns, the same with
and without symmetry reduction and from every LP solver, and exact on closed forms."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounds_reference import random_machine, reference_schedule
from optcoll.bounds.commodities import link_windows, unicast_commodities
from optcoll.bounds.cutbounds import cut_bound
from optcoll.bounds.mcf import certify, mcf_bound, solve_flow
from optcoll.bounds.volume import capacity_bound
from optcoll.collectives.builtins import make_alltoallv, make_collective, make_custom
from optcoll.collectives.traffic import moe_traffic
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines import generators as gen
from optcoll.producers.registry import SYNTHESIZERS
from optcoll.verify import verify

MODELS = (TimeModel(), TimeModel(occupancy="serialization"))
PRODUCERS = ("direct", "tacos", "mcf")


def _random_case(seed: int, npus: int, switches: int, kind: str, chunks: int):
    rng = np.random.default_rng(seed)
    machine = random_machine(rng, npus, switches, extra=int(rng.integers(0, 5)),
                             bidirectional=bool(rng.integers(2)))
    if kind == "alltoallv":
        sizes = rng.integers(0, 4, size=(npus, npus)) * 2.0**18
        np.fill_diagonal(sizes, 0)
        sizes[0, 1] = 2.0**18
        return machine, make_alltoallv(range(npus), sizes, chunks)
    root = int(rng.integers(npus)) if kind in ("scatter", "gather") else None
    return machine, make_collective(kind, range(npus), 2.0**20, chunks, root=root)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), npus=st.integers(2, 6), switches=st.integers(0, 2),
       kind=st.sampled_from(("alltoall", "alltoall", "scatter", "gather", "alltoallv")),
       chunks=st.integers(1, 2), model=st.sampled_from(MODELS))
def test_mcf_between_cut_bounds_and_verified_schedules(seed, npus, switches, kind, chunks, model):
    machine, collective = _random_case(seed, npus, switches, kind, chunks)
    bound = mcf_bound(machine, collective, model)
    assert bound is not None and bound.value > 0
    if collective.equal_chunks:
        for other in (cut_bound(machine, collective), capacity_bound(machine, collective, model)):
            if other is not None:
                assert bound.value >= other.value * (1 - 1e-9), (other, bound)
        schedules = [reference_schedule(machine, collective, model)]
    else:
        schedules = []
    instance = Instance("random", machine, collective, model)
    for name in PRODUCERS:
        if kind in SYNTHESIZERS[name].run.__globals__.get("KINDS", {kind}) or name == "direct":
            try:
                schedules.append(SYNTHESIZERS[name](instance, seed=1))
            except Exception as why:  # noqa: BLE001 - a producer may decline; the rest must hold
                assert type(why).__name__ == "NotApplicable", why
    assert schedules
    for schedule in schedules:
        result = verify(machine, collective, schedule, model)
        assert result.valid, result.violation.message
        assert bound.value <= result.time * (1 + 1e-9), (schedule.meta.get("producer"), bound, result.time)


def _max_flow_meets(machine, collective, model, horizon: float) -> bool:
    """Whether a single-source unicast demand fits in ``horizon`` as a plain max-flow, with each
    link's capacity its usable window times its bytes per second of link time."""
    demand = unicast_commodities(collective)
    windows = link_windows(machine, demand, model)
    graph = nx.DiGraph()
    cost = windows.cost(float(demand.largest[0]))
    for e in range(machine.num_links):
        u, v = int(machine.link_src[e]), int(machine.link_dst[e])
        room = max(0.0, horizon - float(windows.lost[e])) / float(cost[e]) if np.isfinite(windows.lost[e]) else 0.0
        previous = graph.get_edge_data(u, v, {"capacity": 0.0})["capacity"]
        graph.add_edge(u, v, capacity=previous + room)
    source = int(demand.pair_src[0])
    for d, amount in zip(demand.pair_dst.tolist(), demand.pair_bytes.tolist()):
        graph.add_edge(d, "sink", capacity=amount)
    value = nx.maximum_flow_value(graph, source, "sink")
    return value >= demand.pair_bytes.sum() * (1 - 1e-9)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), npus=st.integers(2, 7), switches=st.integers(0, 2),
       model=st.sampled_from(MODELS))
def test_single_source_lp_matches_a_max_flow(seed, npus, switches, model):
    """Scatter is one commodity: the certified bound is the least horizon whose max-flow (each
    link open for its window only) carries the demand."""
    machine, collective = _random_case(seed, npus, switches, "scatter", 1)
    found = solve_flow(machine, collective, model, solver="glop")
    assert found.lp.solved
    assert _max_flow_meets(machine, collective, model, found.bound * (1 + 1e-7))
    assert not _max_flow_meets(machine, collective, model, found.bound * (1 - 1e-6))


@pytest.mark.parametrize("machine", [gen.torus([4, 4], 50 * 2.0**30, 5e-7), gen.hypercube(4, 25e9, 1e-6),
                                     gen.nvswitch(8), gen.dgx1(),
                                     gen.multinode(2, 4, nvlink_bandwidth=300e9, nvlink_latency=5e-7,
                                                   nic_bandwidth=25e9, nic_latency=2e-6)],
                         ids=lambda m: m.name)
def test_symmetry_reduction_and_solvers_agree(machine):
    collective = make_collective("alltoall", range(machine.num_npus), 2.0**26, 2)
    values = []
    for symmetry in (True, False):
        for solver in ("glop", "pdlp", "highs"):
            found = solve_flow(machine, collective, TimeModel(), solver=solver, symmetry=symmetry)
            values.append(found.bound)
    assert max(values) == pytest.approx(min(values), rel=1e-6)
    reduced = solve_flow(machine, collective, TimeModel(), solver="glop")
    assert reduced.group.order > 1 and reduced.modelled.size < collective.num_ranks


def test_uniform_torus_alltoall_is_the_capacity_bound():
    """On a torus every shortest path loads the links alike, so the flow bound is the byte count
    over shortest paths: 64 link times per link for an 8x8 torus with C = 1."""
    torus = gen.torus([8, 8], 50 * 2.0**30, 5e-7)
    collective = make_collective("alltoall", range(64), 2.0**30, 1)
    tau = 5e-7 + collective.chunk_bytes / (50 * 2.0**30)
    assert mcf_bound(torus, collective).value == pytest.approx(64 * tau, rel=1e-9)


def test_switch_alltoall_counts_the_first_and_last_hop():
    """Eight GPUs on one switch, C = 1: each uplink carries 7 chunks, and the last of them still
    has to cross a downlink, so 8 link times (the cut bound says 7)."""
    star = gen.nvswitch(8)
    collective = make_collective("alltoall", range(8), 2.0**28, 1)
    tau = float(star.link_latency[0] + collective.chunk_bytes / star.link_bandwidth[0])
    assert mcf_bound(star, collective).value == pytest.approx(8 * tau, rel=1e-9)
    assert cut_bound(star, collective).value < 7.01 * tau


def test_hot_receiver_waits_for_its_first_chunk():
    """AlltoAllv on a switch where one GPU receives most: its downlink cannot start before the
    smallest chunk bound for it has crossed an uplink, however small other chunks are."""
    star = gen.nvswitch(4)
    sizes = np.array([[0, 8, 1, 1], [8, 0, 1, 1], [8, 1, 0, 1], [8, 1, 1, 0]], dtype=float) * 2.0**20
    collective = make_alltoallv(range(4), sizes)
    bandwidth, latency = float(star.link_bandwidth[0]), float(star.link_latency[0])
    into_gpu0 = 3 * (latency + 8 * 2.0**20 / bandwidth)
    first_uplink = latency + 8 * 2.0**20 / bandwidth
    assert mcf_bound(star, collective).value == pytest.approx(first_uplink + into_gpu0, rel=1e-9)


def test_certificate_is_independent_of_the_solver():
    """Any prices give a valid bound; zero prices give none; the LP's prices give the optimum."""
    machine = gen.dgx1()
    collective = make_alltoallv(range(8), moe_traffic(8, 2.0**26, seed=3), 2)
    found = solve_flow(machine, collective, TimeModel())
    demand, windows = found.demand, found.windows
    assert certify(machine, demand, windows, np.zeros(machine.num_links)) == (0.0, 0.0)
    uniform, _ = certify(machine, demand, windows, np.ones(machine.num_links))
    assert 0 < uniform <= found.bound
    assert found.bound == pytest.approx(found.lp_time, rel=1e-6)


def test_not_unicast_gets_no_mcf_bound():
    ring = gen.ring(4, 1e9, 1e-6)
    assert mcf_bound(ring, make_collective("allgather", range(4), 2.0**20)) is None
    replicated = make_custom(range(4), [[0, 1]], [[3]], 2.0**20)  # two holders: not one source
    assert mcf_bound(ring, replicated) is None
    point = make_custom(range(4), [[0], [1]], [[2], [3]], 2.0**20)
    assert mcf_bound(ring, point).value > 0


def test_an_lp_too_large_is_refused_not_built(monkeypatch):
    """Past the size limit there is no MCF bound (the others still hold) and mcf says why."""
    from optcoll.bounds import mcf
    from optcoll.producers.base import NotApplicable

    monkeypatch.setattr(mcf, "MAX_VARIABLES", 100)
    mesh = gen.mesh([3, 4], 1e9, 1e-6)  # no symmetry group: 12 commodities x 34 links
    collective = make_collective("alltoall", range(12), 2.0**20)
    assert mcf_bound(mesh, collective) is None
    with pytest.raises(NotApplicable, match="variables"):
        SYNTHESIZERS["mcf"](Instance("mesh", mesh, collective))


def _rail_solution():
    from optcoll.instances.instancefile import load_instance
    from optcoll.instances.suite import instances_dir

    instance = load_instance(instances_dir() / "machines" / "dgxh100-rail-4x8-alltoall-c1.toml")
    return instance.machine, solve_flow(instance.machine, instance.collective, instance.model)


@pytest.mark.parametrize("side", ["source", "destination"])
def test_relay_flows_are_optimal_flows(side):
    """A relay flow is another optimum of the same LP: every row within its bounds, T within
    the re-solve's slack of the optimum."""
    from optcoll.bounds.mcf import TIDY_SLACK, relay_flow

    machine, solution = _rail_solution()
    flow = relay_flow(solution, machine, side)
    model = solution.model
    x = np.append(flow.ravel() / model.unit_bytes, solution.lp.objective * (1 + TIDY_SLACK))
    rows = model.matrix @ x
    tolerance = 1e-6 * max(1.0, float(np.abs(model.row_hi[np.isfinite(model.row_hi)]).max()))
    assert np.all(rows >= model.row_lo - tolerance) and np.all(rows <= model.row_hi + tolerance)


def test_relay_early_is_pxn_and_relay_late_relays_at_the_destination():
    """On a rail cluster the NICs are the bottleneck and NVLink and the spine have slack: relaying
    early sends a chunk for another rail over NVLink to the GPU on that rail, then one NIC hop
    (NCCL's PXN), never over the spine; relaying late takes the NIC first and NVLink at the
    destination node."""
    from optcoll.bounds.mcf import relay_flow

    machine, solution = _rail_solution()
    labels = machine.labels
    spine = np.array(["spine" in (labels[u], labels[v]) for u, v in zip(machine.link_src, machine.link_dst)])
    into_nvswitch = np.array(["nvswitch" in labels[v] for v in machine.link_dst])
    source = int(solution.demand.origin[solution.modelled[0]])
    node_of = lambda v: labels[v].split("g")[0].split(".")[0]  # noqa: E731  "n0g3" and "n0.nvswitch" → "n0"
    own_node = np.array([node_of(u) == node_of(source) for u in machine.link_src])
    early, late = relay_flow(solution, machine, "source")[0], relay_flow(solution, machine, "destination")[0]
    chunk = float(solution.demand.pair_bytes.max())
    intra = 7 * chunk  # the source's chunks for its own node
    noise = 1e-3 * chunk  # what the re-solve's slack on T lets wander
    assert early[spine].sum() < noise
    assert early[into_nvswitch & own_node].sum() > 2 * intra  # PXN: NVLink first
    assert late[spine].sum() < noise
    assert late[into_nvswitch & own_node].sum() == pytest.approx(intra, abs=noise)
