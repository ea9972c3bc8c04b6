"""optcoll's step model against SCCL's own answers (issue 18): least steps with one round per step
and one chunk per rank, as SCCL's ``msccl solve least-steps`` gives them, for its generic
topologies (Ring, Line, Star, FullyConnected, HubAndSpoke), DGX-1 and six collectives.

The answers in ``data/sccl_least_steps.csv`` were produced by running SCCL itself (msccl-tools at
commit 030a750, its z3 encoding; the command is in the file's header). Rows SCCL did not answer
within 30 s are kept with ``none`` and not compared: there optcoll's answer has no reference.
``data/sccl/`` holds the two algorithms of SCCL's own DGX-1 AllGather Pareto front, as it wrote
them (``data/sccl/README.md``).
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
from solver_checks import proof_budget
from step_helpers import BW, LAT, instance, named, verified

ANSWERS = Path(__file__).parent / "data" / "sccl_least_steps.csv"
#: SCCL's HubAndSpoke: fully connected, one send and one receive per node per round.
ONE_PORT = TimeModel(kind="step", send_ports=1, recv_ports=1)
STEP_MODEL = TimeModel(kind="step")
PROOF = proof_budget()


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
    out = solve_step(inst, objective="steps", budget=PROOF)
    assert out.status == "optimal" and out.params["S"] == steps, out.notes
    verified(inst, out)


@pytest.mark.parametrize("topology,n,steps", [(t, n, s) for t, n, c, s in _answered() if c == "Allreduce"], ids=str)
def test_allreduce_under_sccls_own_rules_gives_sccls_answer(topology, n, steps):
    """With combining = reduce-only (SCCL's rules: no copy over a partial sum) every AllReduce row
    SCCL answered is answered the same, and the schedule verifies under those rules."""
    inst = sccl_question(topology, n, "Allreduce")
    inst = replace(inst, model=replace(inst.model, combining="reduce-only"))
    out = solve_step(inst, objective="steps", budget=PROOF)
    assert out.status == "optimal" and out.params["S"] == steps, out.notes
    verified(inst, out)


FRONT = sorted((Path(__file__).parent / "data" / "sccl").glob("*.json"))


def _sccl_algorithm(path: Path):
    """SCCL's algorithm file as (machine, collective, step schedule) in optcoll's terms: its links
    matrix (links[dst][src] parallel links) as a machine, its input and output maps as a collective,
    its steps as sends on one of the parallel links in each step."""
    import json

    from optcoll.schedules.schedule import from_arrays

    data = json.loads(path.read_text(encoding="utf-8"))
    links = data["topology"]["links"]
    n = len(links)
    b = MachineBuilder("sccl-" + data["topology"]["name"], n)
    for dst, row in enumerate(links):
        for src, count in enumerate(row):
            if count:
                b.add_link(src, dst, bandwidth=BW, latency=LAT, count=count)
    machine = b.build()
    chunks = 1 + max(c for held in data["input_map"].values() for c in held)
    pre = [[int(r) for r, held in data["input_map"].items() if c in held] for c in range(chunks)]
    post = [[int(r) for r, need in data["output_map"].items() if c in need] for c in range(chunks)]
    coll = make_custom(range(n), pre, post, 1e3, name="allgather")
    rows, rounds = [], []
    for s, step in enumerate(data["steps"], start=1):
        rounds.append(step["rounds"])
        used: dict[tuple[int, int], int] = {}
        for chunk, src, dst in step["sends"]:
            lanes = machine.links_between(src, dst)
            k = used.get((src, dst), 0)
            used[(src, dst)] = k + 1
            rows.append((chunk, lanes[k % len(lanes)], s))
    chunk, link, step = (list(col) for col in zip(*rows))
    return machine, coll, from_arrays(chunk, link, step=step, rounds=rounds), data["instance"]


@pytest.mark.parametrize("path", FRONT, ids=lambda p: p.name.split(".")[1])
def test_sccls_pareto_algorithms_verify_and_lie_on_optcolls_front(path):
    """SCCL's own DGX-1 AllGather front, read from its files: its DGX-1 is optcoll's (the same
    links), optcoll's verifier accepts each algorithm with SCCL's step count and rounds, and
    optcoll's Pareto front has exactly SCCL's two points."""
    import numpy as np

    from optcoll.producers.exact.step import pareto_front
    from optcoll.verify import verify

    machine, coll, schedule, sccl = _sccl_algorithm(path)
    ours = G.dgx1(BW, LAT)
    pairs = lambda m: sorted(zip(m.link_src.tolist(), m.link_dst.tolist()))  # noqa: E731
    assert pairs(machine) == pairs(ours)
    result = verify(machine, coll, schedule, STEP_MODEL)
    assert result.valid, result.violation
    assert schedule.num_steps == sccl["steps"] and sum(schedule.rounds) == sccl["steps"] + sccl["extra_rounds"]
    front = pareto_front(instance(ours), 6, budget=PROOF)
    found = {(p.steps, p.rounds, p.chunks) for p in front.points}
    assert front.complete and (sccl["steps"], sum(schedule.rounds), sccl["chunks"]) in found
    assert found == {(2, 3, 2), (3, 7, 6)} and np.all(np.diff([p.steps for p in front.points]) > 0)
