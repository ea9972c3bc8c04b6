"""The runtime model under ``optcoll expect``: NCCL's ring chunks (one channel's share, cut in
slices), the per-slice synchronisation against the ring's own time, NCCL's tree on two nodes, and
the tree's per-level network latency, and the nccl-tests host floor that ``--measured`` applies
exactly when the output says nGpus > 1."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from optcoll.analysis.expect import predict as P
from optcoll.analysis.expect.calibrated import TIME_MODEL
from optcoll.analysis.expect.nccl import channels, estimates
from optcoll.cli.main import cli
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance
from optcoll.machines.calibration import PROTOCOLS, generation_of
from optcoll.machines.catalog import load_machine
from optcoll.machines.nccl_latency import HW_LATENCY_US
from optcoll.producers.registry import get_synthesizer
from optcoll.verify import verify

RAW = Path(__file__).parents[3] / "measurements" / "raw"
MIB = 1 << 20


def _context(name: str) -> P.Context:
    return P.context(load_machine(name), generation_of(name))


def test_ring_chunks_are_nccls_per_channel_slices():
    """dgxa100, 24 channels: 64 MiB gives each channel 64 MiB / (8 · 24) per ring step, two Simple
    slices (NCCL's realChunkSize, ALLREDUCE_CHUNKSTEPS / SLICESTEPS), so C = 48; from 384 MiB on a
    channel's step holds two full 1 MiB slices and C follows the slice."""
    ctx = _context("dgxa100")
    nc, unit = P.channel_slice("ring", "simple", 64 * MIB, ctx)
    assert nc == 24 and unit == math.ceil(64 * MIB / (8 * 24 * 2))
    assert P.run(ctx, "allreduce", 64 * MIB, "nccl-ring", "ring", "simple").chunks == 48
    assert P.channel_slice("ring", "simple", 1 << 30, ctx)[1] == MIB


def test_slice_synchronisation_costs_what_each_slice_adds():
    """The rate leaves s / (s + σ·B_ch): the time a ring's bytes take at that rate is the time at
    full rate plus σ per slice of each channel (2 (n-1) steps × 2 slices, all channels in parallel)."""
    ctx = _context("dgxa100")
    size = 64 * MIB
    nc, unit = P.channel_slice("ring", "simple", size, ctx)
    rate = P.slice_rate(ctx, "simple", "nccl-ring", nc, unit)
    per_channel = ctx.nccl.intra_gbs * 1e9 / nc
    slices = 2 * 7 * 2
    bytes_per_channel = slices * unit
    sigma = ctx.generation.slice_sync.value * 1e-6
    assert bytes_per_channel / (per_channel * rate) == pytest.approx(bytes_per_channel / per_channel + slices * sigma)
    assert P.slice_rate(ctx, "simple", "nccl-nvls", nc, unit) == 1.0


def test_ll_and_ll128_steps_hold_their_channel_for_nccls_step_latency():
    """A100, 4 MiB ring/LL128: each of a channel's 2 (n−1) steps moves 4 MiB / (8 · 24) bytes at the
    channel's share of the LL128 rate and holds it 1.9 us more (hwLatencies[NVLINK][RING][LL128]),
    as NCCL's model adds its latency to size / bandwidth, less the 1/24 the simulated propagation
    charges; the predicted call is then within 2 % of Azure's measured 102.8 us, where the
    overlapped model said 77.7 us. One channel pays NCCL's α once, as propagation; RCCL on MI300X
    loses no step time (``step_sync`` 0), nor does an in-switch reduction."""
    ctx = _context("dgxa100")
    nc, unit = P.channel_slice("ring", "ll128", 4 * MIB, ctx)
    assert (nc, unit) == (24, math.ceil(4 * MIB / (8 * 24)))
    per_channel = ctx.nccl.intra_gbs * 1e9 * ctx.generation.ll128_payload.value / nc
    rate = P.slice_rate(ctx, "ll128", "nccl-ring", nc, unit)
    assert rate == pytest.approx(unit / (unit + 1.9e-6 * (1 - 1 / 24) * per_channel), abs=1e-6)
    assert P.run(ctx, "allreduce", 4 * MIB, "nccl-ring", "ring", "ll128").seconds == pytest.approx(102.76e-6, rel=0.02)
    assert P.slice_rate(ctx, "ll", "nccl-ring", 1, 128) == 1.0
    mi300x = _context("mi300x")
    assert P.slice_rate(mi300x, "ll128", "nccl-ring", *P.channel_slice("ring", "ll128", 32 * MIB, mi300x)) == 1.0


def test_a_ring_step_on_one_of_several_links_pays_the_sync_at_that_links_rate():
    """DGX-1: a GPU's six NVLinks; two channels run on two of them, each at one link's rate, not
    at a sixth of the GPU's (``intra_links``)."""
    ctx = _context("dgx1")
    assert ctx.nccl.intra_links == 6
    ll = min(ctx.nccl.intra_gbs * 0.5, ctx.generation.ll_max_busbw.value)  # LL: half, capped (llMaxBws)
    link = ll / 6 * 1e9
    assert P.slice_rate(ctx, "ll", "nccl-ring", 2, 4096) == pytest.approx(4096 / (4096 + 0.3e-6 * link), abs=1e-6)


def test_a_slice_into_the_network_pays_its_sync_at_the_nics_rate():
    """2 x DGX H100, 16 MiB ring/Simple: a channel's slice takes longer on its share of the GPU's
    400 Gbit/s NIC than of its NVLinks, so the same 6 us sync leaves more of the NIC's rate; one
    node has no network link to rate."""
    ctx = _context("dgxh100-rail-2x8")
    nc, unit = P.channel_slice("ring", "simple", 16 * MIB, ctx)
    sigma = ctx.generation.slice_sync.value * 1e-6
    net = P.slice_rate(ctx, "simple", "nccl-ring", nc, unit, network=True)
    assert net == pytest.approx(unit / (unit + sigma * ctx.nccl.inter_gbs * 1e9 / nc), abs=1e-6)
    assert net > P.slice_rate(ctx, "simple", "nccl-ring", nc, unit)
    assert P.slice_rate(_context("dgxh100"), "simple", "nccl-ring", nc, unit, network=True) == 1.0


def test_ring_ll_trims_channels_at_nccls_thread_threshold():
    """enqueue.cc: a ring/LL call keeps nc channels while nBytes >= nc · 512 threads · 8 B · nRanks
    (NCCL_LL_THREAD_THRESHOLD 8, times nRanks for the ring): 8 ranks keep all 24 A100 channels from
    768 KiB, 8 channels at 256 KiB."""
    view = _context("dgxa100").nccl
    assert channels("ring", "ll", 2 * MIB, view) == 24
    assert channels("ring", "ll", 256 * 1024, view) == 8


def test_nccl_runs_tree_on_two_a100_nodes_at_large_sizes():
    """cluster2x8, 10 GiB: a tree sends each byte across the nodes once each way, so NCCL rates it at
    up to twice the network (search.cc pass 2, tuning.cc bwIntra for <= 2 nodes) and picks it over
    the NIC-bound ring; the OCI run measured 219 GB/s busbw, above the ring's 192."""
    ctx = _context("cluster2x8")
    assert estimates("allreduce", 10 << 30, ctx.nccl)[0].algorithm == "tree"
    assert estimates("allreduce", 10 << 30, _context("dgxa100").nccl)[0].algorithm == "ring"  # one node


def test_nccl_alltoall_on_two_a100_nodes_serves_every_peer_at_once():
    """cluster2x8, 1 GiB AlltoAll: NCCL's grouped sends keep every GPU's 200 Gbit/s NIC busy with its
    8 remote peers at once; mscclpp's NDmv4 table measured 26.6 ms (37.8 GB/s busbw). A peer-by-peer
    order predicted 44.4 ms, 15 rounds each as slow as one remote peer's bytes. With NIC links'
    slice synchronisation rated at the channel's NIC share the prediction is 22.9 ms, 14 % under
    the measurement (reports/expect/accuracy.md lists it as a miss of the 10 % target; NCCL's
    128 KiB p2p net chunks are not modelled yet), and never below the NIC-bound floor."""
    from optcoll.analysis.expect.accuracy import points
    from optcoll.interop.measurements import find

    at = {p.size: p for p in points(find("cluster2x8-alltoall-mscclpp-ndmv4"))}
    remote = (1 << 30) / 16 * 8  # each GPU's bytes for the 8 GPUs of the other node
    nic = 200e9 / 8 * 0.96  # the GPU's 200 Gbit/s NIC at NCCL's NET_BW rate (calibration.NET_EFFICIENCY)
    assert at[1 << 30].predicted.producer == "direct" and abs(at[1 << 30].error) < 0.15
    assert remote / nic <= at[1 << 30].predicted.seconds <= 1.1 * remote / nic


def _tree_seconds(ctx: P.Context, protocol: str, tree: bool) -> float:
    """nccl-tree at 1 KiB, one chunk, verified on the machine rated with a tree level's step
    latencies (``tree``) or a ring step's."""
    rated = ctx.rated(protocol, False, tree=tree).machine
    collective = make_collective("allreduce", list(range(ctx.physical.num_npus)), 1024.0, 1)
    schedule = get_synthesizer("nccl-tree").run(Instance("t", rated, collective, TIME_MODEL), 0)
    result = verify(rated, collective, schedule, TIME_MODEL)
    assert result.valid
    return float(result.time)


@pytest.mark.parametrize("protocol", ["ll", "ll128", "simple"])
def test_a_tree_at_one_kib_costs_nccls_tree_latency_model(protocol):
    """NCCL's tuning.cc charges a tree AllReduce 2 ((ppn − 1) · intra + log2(nNodes) · inter) with the
    tree's own hwLatencies; on two rail-connected H100 nodes the verified tree at 1 KiB (latency
    bound) on the tree-rated machine is that sum."""
    i = ("ll", "ll128", "simple").index(protocol)
    intra, inter = HW_LATENCY_US["nvlink"]["tree"][i], HW_LATENCY_US["net"]["tree"][i]
    seconds = _tree_seconds(_context("dgxh100-rail-2x8"), protocol, True)
    # plus moving 1 KiB, at most 0.2 us even at LL's 39 GB/s cap across nodes
    assert 0 <= seconds - 2 * (7 * intra + 1 * inter) * 1e-6 <= 0.2e-6


def test_the_trees_network_latency_grows_with_log2_nodes():
    """LL: from 2 to 4 rail-connected nodes the tree gains a level across nodes (log2 1 -> 2): up and
    down, one network hop at a tree level's 5.0 us (not a ring step's 2.7) and the hop into the
    parent node's chain; and NCCL's tree run by ``predict.run`` is the tree-rated one."""
    column = PROTOCOLS["ll"]
    level = column.tree_step_net_us.value + column.tree_step_nvlink_us.value
    two, four = _context("dgxh100-rail-2x8"), _context("dgxh100-rail-4x8")
    grown = _tree_seconds(four, "ll", True) - _tree_seconds(two, "ll", True)
    assert grown == pytest.approx(2 * level * 1e-6, abs=0.2e-6)  # and 1 KiB at LL's lower cap on 4 nodes
    assert column.tree_step_net_us.value == 5.0 > column.step_net_us.value == 2.7
    run = P.run(four, "allreduce", 1024, "nccl-tree", "tree", "ll")
    assert run.seconds == pytest.approx(_tree_seconds(four, "ll", True) + P.call_latency("nccl-tree", "ll"))


def _scale_up_step(ctx: P.Context, protocol: str, tree: bool = False) -> float:
    """The latency of one GPU-to-GPU step through the node's NVSwitch on the rated machine (us)."""
    rated = ctx.rated(protocol, False, tree=tree)
    m = rated.machine
    link = next(e for e in m.out_links[0].tolist() if rated.scale_up[e])
    return float(m.link_latency[link]) * 2 * 1e6


def test_a_ring_across_nodes_steps_no_faster_than_the_hosts_network_post():
    """tuning.cc: on more than one node every ring step costs at least getNetOverhead (Intel 1 us,
    AMD 2 us, x3 for Simple); a tree level keeps its own latency, one node has no network post."""
    h100, a100 = _context("dgxh100-rail-2x8"), _context("cluster2x8")  # Intel and AMD hosts
    assert _scale_up_step(h100, "ll") == pytest.approx(1.0)  # NVLink LL step 0.6 < 1.0
    assert _scale_up_step(h100, "ll128") == pytest.approx(1.9)  # above the overhead already
    assert _scale_up_step(a100, "simple") == pytest.approx(6.0)  # 3 x 2 us over NVLink Simple 3.4
    assert _scale_up_step(a100, "ll", tree=True) == pytest.approx(0.6)
    assert _scale_up_step(_context("dgxh100"), "ll") == pytest.approx(0.6)


def test_ll_across_nodes_is_capped_at_the_hosts_llmaxbw():
    """tuning.cc llMaxBws: across nodes LL's bus bandwidth per GPU is the host's (Intel 39 GB/s on 2
    nodes, 20.4 on more; AMD 22.5 and 19.0), in one node the generation's (Hopper 141): the LL-rated
    links of one GPU add up to no more, and NCCL's own estimate uses the same cap."""
    from optcoll.machines.calibration import ll_max_busbw

    for name, cap in (("dgxh100-rail-2x8", 39.0), ("dgxh100-rail-4x8", 20.4), ("cluster2x8", 22.5),
                      ("dgxh100", 141.0)):
        ctx = _context(name)
        assert ll_max_busbw(ctx.generation, name, ctx.nccl.nodes).value == cap == ctx.nccl.ll_max_gbs
        m = ctx.rated("ll", False).machine
        assert float(m.link_bandwidth[m.out_links[0]].sum()) <= cap * 1e9 * (1 + 1e-9)


def _expect(*args: str) -> str:
    result = CliRunner().invoke(cli, ["expect", "dgxa100", "--sizes", "4KiB,64MiB", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_measured_with_gpus_per_thread_gets_the_host_floor():
    out = _expect("--measured", str(RAW / "dgxa100-allreduce-oci.txt"))  # nThread 1 nGpus 8
    assert "40 us (host floor)" in out and "nGpus 8 per nccl-tests thread (-g 8)" in out
    rows = json.loads(_expect("--measured", str(RAW / "dgxa100-allreduce-oci.txt"), "--json"))
    assert rows[0]["host_floor"] == pytest.approx(40e-6) and rows[0]["predicted"] == pytest.approx(40e-6)
    assert rows[1]["predicted"] == rows[1]["nccl"]["time"] > 40e-6  # the floor binds only where it is above


def test_measured_with_one_gpu_per_thread_gets_no_floor():
    out = _expect("--measured", str(RAW / "cluster2x8-allreduce-oci.txt"))  # mpirun -np 16, nGpus 1
    assert "host floor" not in out
    rows = json.loads(_expect("--json"))
    assert all("host_floor" not in r for r in rows)
