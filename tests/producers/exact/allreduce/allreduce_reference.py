"""Independent references for the AllReduce tests.

* ``z3_feasible``: the combining rules written once more, plainly, as z3 bit-vectors: is there a
  step schedule (one round per step) of S steps for a whole-buffer AllReduce? By default a copy
  replaces the receiver's partial (copy-or-reduce); ``reduce_only`` forbids a copy over a partial,
  SCCL's rules. It shares nothing with the CP-SAT encoding (no windows, no symmetry breaking,
  sets as bit-vectors), so agreement of the two on least steps is a cross-check.
* ``nvls_schedule``: the NVLS-style AllReduce on a star of NPUs around a switch that reduces and
  multicasts, written by hand: in slot j every NPU reduces its chunk j into the switch, which
  multicasts the sum back one slot later.
* ``small_machine``: random strongly connected machines with a few link speeds (so the direct
  model's epochs stay few), optionally with one switch that may reduce and/or multicast.
"""
from __future__ import annotations

import numpy as np
import z3

from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.schedules.schedule import Schedule, ScheduleBuilder


def z3_feasible(machine: Machine, steps: int, timeout_ms: int = 60_000, *, chunks: int | None = None,
                reduce_only: bool = False) -> bool | None:
    """Whole-buffer AllReduce over every NPU of a switchless machine with equal links, ``chunks``
    chunks (default: one per rank): a schedule of ``steps`` steps exists (True), does not (False) or
    z3 gave up (None)."""
    n = machine.num_npus
    k = n if chunks is None else chunks
    assert not machine.switches and np.ptp(machine.link_bandwidth) == 0
    full = (1 << n) - 1
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    val = {(c, v, 0): z3.BitVecVal(1 << v, n) for c in range(k) for v in range(n)}
    for c in range(k):
        for v in range(n):
            for t in range(1, steps + 1):
                val[(c, v, t)] = z3.BitVec(f"v{c}_{v}_{t}", n)
    # op[e, c, t]: 0 nothing, 1 copy, 2 reduce, for the transfer of chunk c on link e in step t.
    op = {(e, c, t): z3.Int(f"o{e}_{c}_{t}") for e in range(machine.num_links) for c in range(k)
          for t in range(1, steps + 1)}
    for key, o in op.items():
        s.add(o >= 0, o <= 2)
    for e in range(machine.num_links):
        for t in range(1, steps + 1):
            s.add(z3.Sum([z3.If(op[(e, c, t)] > 0, 1, 0) for c in range(k)]) <= 1)
    for c in range(k):
        for v in range(n):
            for t in range(1, steps + 1):
                into = [e for e in range(machine.num_links) if machine.link_dst[e] == v]
                sent = {e: val[(c, int(machine.link_src[e]), t - 1)] for e in into}
                copies = z3.Sum([z3.If(op[(e, c, t)] == 1, 1, 0) for e in into])
                reduces = [(op[(e, c, t)] == 2, sent[e]) for e in into]
                before = val[(c, v, t - 1)]
                union = before
                for on, bits in reduces:
                    union = union | z3.If(on, bits, z3.BitVecVal(0, n))
                disjoint = [z3.Implies(on, bits & before == 0) for on, bits in reduces]
                disjoint += [z3.Implies(z3.And(a_on, b_on), a_bits & b_bits == 0)
                             for i, (a_on, a_bits) in enumerate(reduces) for b_on, b_bits in reduces[i + 1:]]
                copied = [z3.Implies(op[(e, c, t)] == 1, val[(c, v, t)] == sent[e]) for e in into]
                s.add(copies <= 1)
                if reduce_only:  # SCCL's rules: a copy never lands on a partial (ranks never hold none)
                    s.add(copies == 0)
                s.add(z3.Implies(copies == 1, z3.And(*[z3.Not(on) for on, _ in reduces], *copied)))
                s.add(z3.Implies(copies == 0, z3.And(*disjoint, val[(c, v, t)] == union)))
            s.add(val[(c, v, steps)] == full)
    answer = s.check()
    return None if answer == z3.unknown else answer == z3.sat


def nvls_schedule(machine: Machine, chunk_bytes: float) -> Schedule:
    """Every NPU reduces chunk j into the switch in slot j; the switch multicasts it in slot j+1
    (one slot = α + b/B of the star's uniform links)."""
    switch = machine.num_npus
    slot = float(machine.link_latency[0] + chunk_bytes / machine.link_bandwidth[0])
    b = ScheduleBuilder(machine)
    for j in range(machine.num_npus):
        for v in range(machine.num_npus):
            b.send(j, v, switch, start=j * slot, op="reduce")
            b.send(j, switch, v, start=(j + 1) * slot, op="copy")
    return b.build()


def star(n: int, bandwidth: float, latency: float, *, multicast: bool = False, reduce: bool = False,
         hub_switch: bool = True) -> Machine:
    """``n`` NPUs around a hub: a switch (flags as given) or, SCCL's star, NPU 0."""
    b = MachineBuilder(f"star{n}", n if hub_switch else n)
    hub = b.add_switch("hub", multicast=multicast, reduce=reduce) if hub_switch else 0
    for v in range(0 if hub_switch else 1, n):
        b.add_link(v, hub, bandwidth=bandwidth, latency=latency, bidirectional=True)
    return b.build()


def small_machine(rng: np.random.Generator, npus: int, switch: str | None) -> Machine:
    """A cycle through the NPUs both ways plus a few random links, at 1 or 2 GB/s and 0 or 1 µs;
    with ``switch`` ("plain", "reduce", "multicast", "both") a switch linked to some NPUs."""
    b = MachineBuilder("small", npus)

    def link(u, v):
        b.add_link(u, v, bandwidth=float(rng.choice([1e9, 2e9])), latency=float(rng.choice([0.0, 1e-6])),
                   bidirectional=True)

    for v in range(npus):
        link(v, (v + 1) % npus) if npus > 2 or v == 0 else None
    for _ in range(int(rng.integers(0, 2))):
        u, v = rng.choice(npus, size=2, replace=False)
        link(int(u), int(v))
    if switch is not None:
        hub = b.add_switch("sw", multicast=switch in ("multicast", "both"), reduce=switch in ("reduce", "both"))
        for v in rng.choice(npus, size=int(rng.integers(2, npus + 1)), replace=False).tolist():
            link(int(v), hub)
    return b.build()
