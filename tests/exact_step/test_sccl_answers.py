"""optcoll's step model against SCCL's own answers (issue 18): least steps with one round per step
and one chunk per rank, as SCCL's ``msccl solve least-steps`` gives them, for its generic
topologies (Ring, Line, Star, FullyConnected, HubAndSpoke), DGX-1 and six collectives.

The answers in ``data/sccl_least_steps.csv`` were produced by running SCCL itself (msccl-tools at
commit 030a750, its z3 encoding; the command is in the file's header). Rows SCCL did not answer
within 30 s are kept with ``none`` and not compared: there optcoll's answer has no reference.
"""
from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from optcoll.collectives.builtins import make_custom
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines import generators as G
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.producers.exact.step import solve_step
from step_helpers import BW, LAT, instance, named, verified

ANSWERS = Path(__file__).parent / "data" / "sccl_least_steps.csv"
#: SCCL's HubAndSpoke: fully connected, one send and one receive per node per round.
ONE_PORT = TimeModel(kind="step", send_ports=1, recv_ports=1)


def _star(n: int) -> Machine:
    """SCCL's Star (non-blocking): NPU 0 linked both ways with every other NPU."""
    b = MachineBuilder(f"npustar{n}", n)
    for i in range(1, n):
        b.add_link(0, i, bandwidth=BW, latency=LAT, bidirectional=True)
    return b.build()


MACHINES = {"Ring": lambda n: G.ring(n, BW, LAT), "Line": lambda n: G.line(n, BW, LAT), "Star": _star,
            "FullyConnected": lambda n: G.fully_connected(n, BW, LAT),
            "HubAndSpoke": lambda n: G.fully_connected(n, BW, LAT), "DGX1": lambda n: G.dgx1(BW, LAT)}


def sccl_question(topology: str, n: int, collective: str) -> Instance:
    """SCCL's question in optcoll's terms: root 0 where one is needed; SCCL's Allreduce at one
    chunk is the whole buffer as one chunk, which every rank contributes to and needs."""
    machine = MACHINES[topology](n)
    kind = collective.lower()
    if kind == "allreduce":
        ranks = list(range(machine.num_npus))
        inst = named(machine, make_custom(ranks, [ranks], [ranks], 1e3, combining=True,
                                          name="allreduce-whole-buffer"))
    else:
        inst = instance(machine, kind, root=0 if kind in ("broadcast", "scatter", "gather") else None)
    return replace(inst, model=ONE_PORT) if topology == "HubAndSpoke" else inst


def _answered() -> list[tuple[str, int, str, int]]:
    rows = csv.DictReader(line for line in ANSWERS.read_text(encoding="utf-8").splitlines()
                          if not line.startswith("#"))
    return [(r["topology"], 8 if r["n"] == "-" else int(r["n"]), r["collective"], int(r["least_steps"]))
            for r in rows if r["least_steps"].isdigit()]


@pytest.mark.parametrize("topology,n,collective,steps", _answered(), ids=str)
def test_least_steps_agree_with_sccls_own_answer(topology, n, collective, steps):
    """Both solvers prove least steps; they must agree, and optcoll's schedule must verify."""
    inst = sccl_question(topology, n, collective)
    out = solve_step(inst, objective="steps", time_limit=60)
    assert out.status == "optimal" and out.params["S"] == steps, out.notes
    verified(inst, out)
