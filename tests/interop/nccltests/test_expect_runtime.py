"""The runtime model under ``optcoll expect``: NCCL's ring chunks (one channel's share, cut in
slices), the per-slice synchronisation against the ring's own time, NCCL's tree on two nodes, and
the nccl-tests host floor that ``--measured`` applies exactly when the output says nGpus > 1."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from optcoll.analysis.expect import predict as P
from optcoll.analysis.expect.nccl import estimates
from optcoll.cli.main import cli
from optcoll.machines.calibration import generation_of
from optcoll.machines.catalog import load_machine

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
    assert P.slice_rate(ctx, "ll128", "nccl-ring", nc, unit) == 1.0  # LL128 syncs per line, not per slice
    assert P.slice_rate(ctx, "simple", "nccl-nvls", nc, unit) == 1.0


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
    order predicted 44.4 ms, 15 rounds each as slow as one remote peer's bytes."""
    from optcoll.analysis.expect.accuracy import points
    from optcoll.interop.measurements import find

    at = {p.size: p for p in points(find("cluster2x8-alltoall-mscclpp-ndmv4"))}
    assert at[1 << 30].predicted.producer == "direct" and abs(at[1 << 30].error) < 0.10

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
