"""Slot plans on one switch: a staircase of first-wave reductions and the broadcasts that follow it,
for the staggered form of ``rail-exchange`` (issue 13; docs/model.md §5's copy and reduce
semantics, on section 3's plain switch, counted in whole link occupancies).

**The slot model.** G GPUs hang off one switch, one uplink and one downlink each. Time is cut into
slots of one NVLink hop: a GPU starts at most one send per slot (its uplink), the switch forwards
it in the next slot (the receiver's downlink, one per slot) and the receiver holds it from the slot
after that, so a send started in slot s is usable from s + 2. Chunk j belongs to GPU j.

* The **broadcast** part: chunk j is available on GPU j from a release slot and must reach every
  GPU by a common deadline; a GPU relays only what it holds.
* The **reductions** are the same problem reversed in time: if chunk j is broadcast from slot
  M − F_j to every GPU by M, reading every send (s, a → b) backwards as a reduction b → a in slot
  M − s − 2 sums every GPU's partial of chunk j on GPU j by slot F_j (a GPU sends its partial once,
  after every partial it collects has arrived, exactly as a broadcast GPU relays after it received).

**Why a staircase.** In the two-node exchange of two chunks per GPU (``railexchange``), rail j
sends its first node partial when that partial is complete (slot F_j), and the second partial
follows it on the same NIC, so the second sum lands on its GPU at F_j plus a fixed number of NIC
hops. The last phase is then the broadcast above, released at F_j, and the AllReduce ends at that
fixed NIC time plus its deadline D. Ending every first-wave reduction at once (the Latin square of
the plain form, F_j = G) gives D = 2G; a *staircase* (some reductions done early, the rest late)
lets the early chunks' broadcasts start while the late ones are still being summed.
``staircase`` finds one in two levels, both CP-SAT with one worker and a fixed seed:

1. A *counting relaxation* (``_relaxed_staircases``) groups the chunks by F and keeps, per group
   and slot, only how many of its sends start: at most as many as the group holds (its releases
   plus its arrivals), at most G per slot over all groups, (G − 1) per chunk in all, on both sides
   (the reductions read backwards). Every slot plan satisfies it, so the least D it admits bounds
   the slot model from below; it solves in milliseconds and proposes staircases, each once.
2. Each proposed staircase is checked exactly (``slot_broadcast``, once per side, a small
   deterministic time limit each): the first that passes both is the plan.

Deadlines are tried upward from the relaxation's least D up to 2G − 1, so a plan found at that
least D is optimal in the slot model. Deterministic, cached per G.

**How far it goes (G = 8, the cluster2x8 case).** It finds D = 15 against the plain form's 16 (the
staircase F = 5, 5, 6, 8, 8, 8, 9, 10, in 0.5 s), and 14 is out of reach (the relaxation says so;
by hand): a broadcast of 8 chunks by slot 14
makes 56 sends, all in slots 5 … 12 (none before the first staircase step, whose reduction alone
needs 5 slots since holders grow like Fibonacci numbers, and none after 12). In slots 9 … 12 at
most 8 GPUs send each, so slots 5 … 8 need 24 sends. A GPU sends only once it holds a chunk: with
n_t chunks released by slot t (F_j ≤ t), slot 5 has at most n5 senders, slot 6 n6, slot 7
min(8, n7 + n5) (the receivers of slot 5's sends join) and slot 8 min(8, n8 + n5 + n6), so
n5 + n6 ≥ 8. Counted the same way backwards, the reductions cannot finish 5 chunks by slot 6
(35 sends needed in slots 0 … 4, at most 34 possible) nor 4 by slot 5 (28 needed, 24 possible),
so n6 ≤ 4 and n5 ≤ 3. This bounds the staggered structure, not the AllReduce (the lower bounds
of ``optcoll.bounds`` do that).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice

from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock
from optcoll.producers.exact.toolkit import run_cpsat

#: (slot, chunk, sender GPU, receiver GPU): one send in a slot plan
Send = tuple[int, int, int, int]

#: the largest G modelled: an exact check has G²(G − 1) booleans per slot, and at G = 12 the
#: checks ran out of time on every proposal (110 CPU seconds, no plan)
MAX_GPUS = 8
#: CP-SAT deterministic time for one exact check (about half as many CPU seconds)
CHECK_LIMIT = 5.0
#: Wall-clock seconds any one CP-SAT call here may take (a safety net: the work limit ends the
#: checks first, and the relaxation solves in milliseconds)
CALL_SECONDS = 60.0
#: staircases the relaxation proposes per deadline before the next deadline is tried
PROPOSALS = 8


@dataclass(frozen=True)
class Staircase:
    """A slot plan for G GPUs: chunk j's sum is on GPU j at slot ``finish[j]`` after
    ``reductions`` (forward time), and ``broadcasts`` spreads chunks released at ``finish`` to
    every GPU by ``deadline``; both lists in slot order."""

    finish: tuple[int, ...]
    deadline: int
    reductions: tuple[Send, ...]
    broadcasts: tuple[Send, ...]


def fibonacci_slots(gpus: int) -> int:
    """Slots a broadcast of one chunk to ``gpus`` GPUs needs in the slot model (holders 1, 1, 2,
    3, 5, 8, ... at slots 0, 1, 2, ...): also the fastest reduction of one chunk."""
    if gpus <= 1:
        return 0
    held = [1, 1]
    while held[-1] < gpus:
        held.append(held[-1] + held[-2])
    return len(held) - 1


def _solved(model, limit: float | None = None) -> list[int] | None:
    """The values of a solution (by variable index) through the toolkit's one CP-SAT path, or None
    when none was found: one worker, a fixed seed and, given a ``limit``, a deterministic time
    limit, so the answer is reproducible. Ctrl-C ends the run (KeyboardInterrupt) rather than
    letting a truncated answer into the cache."""
    res = run_cpsat(model, Clock(Budget(CALL_SECONDS, threads=1, seed=0, work_limit=limit)), has_objective=False)
    if res.interrupted:
        raise KeyboardInterrupt
    return None if res.values is None else res.values.tolist()


def slot_broadcast(avail: Sequence[int], deadline: int,
                   limit: float | None = CHECK_LIMIT) -> tuple[Send, ...] | None:
    """Chunk j from GPU j, released at slot ``avail[j]``, to every GPU by ``deadline``, in slot
    order; None when CP-SAT finds no plan within ``limit`` (deterministic time; with no limit,
    None means there is none)."""
    from ortools.sat.python import cp_model

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
    for j in range(gpus):
        for b in range(gpus):
            if b != j:
                model.AddExactlyOne([var for _, var in into[j, b]])
    for (j, a, b, s), var in send.items():
        if a != j:  # a relays only what reached it by s
            model.AddBoolOr([held for t, held in into[j, a] if t <= s - 2] + [var.Not()])
    values = _solved(model, limit)
    if values is None:
        return None
    return tuple(sorted((s, j, a, b) for (j, a, b, s), var in send.items() if values[var.Index()]))


def _relaxed_staircases(gpus: int, deadline: int) -> Iterator[tuple[int, ...]]:
    """Staircases (sorted F) the counting relaxation admits for ``deadline`` (module docstring),
    each once, in the solver's order."""
    from ortools.sat.python import cp_model

    latest = deadline - fibonacci_slots(gpus)  # a chunk released later cannot reach every GPU
    model = cp_model.CpModel()
    count = [model.NewIntVar(0, gpus, "") for _ in range(latest + 1)]  # chunks with F = f
    model.Add(sum(count) == gpus)
    for release, end in ((lambda f: f, deadline), (lambda f: latest - f, latest)):  # broadcasts, reductions
        per_slot = defaultdict(list)
        for f, size in enumerate(count):
            sends = {s: model.NewIntVar(0, gpus, "") for s in range(release(f), end - 1)}
            for s, var in sends.items():
                model.Add(var <= size + sum(sends[t] for t in sends if t <= s - 2))
                per_slot[s].append(var)
            model.Add(sum(sends.values()) == (gpus - 1) * size)
        for group in per_slot.values():
            model.Add(sum(group) <= gpus)
    while True:
        values = _solved(model)
        if values is None:
            return
        found = [values[var.Index()] for var in count]
        yield tuple(f for f, size in enumerate(found) for _ in range(size))
        model.AddForbiddenAssignments(count, [tuple(found)])


def _checked(finish: tuple[int, ...], deadline: int) -> Staircase | None:
    """The exact slot plans for one staircase, or None (module docstring, level 2)."""
    last = max(finish)
    backwards = slot_broadcast([last - f for f in finish], last)
    if backwards is None:
        return None
    broadcasts = slot_broadcast(finish, deadline)
    if broadcasts is None:
        return None
    # a send a → b in slot s, read backwards: b reduces its partial into a in slot last − s − 2
    reductions = tuple(sorted((last - s - 2, j, b, a) for s, j, a, b in backwards))
    return Staircase(finish, deadline, reductions, broadcasts)


@lru_cache(maxsize=16)
def staircase(gpus: int) -> Staircase | None:
    """The staircase of least deadline found for ``gpus`` GPUs (module docstring), None when none
    beats the plain form's 2G or G exceeds ``MAX_GPUS``. Deterministic; cached per G."""
    if not 2 <= gpus <= MAX_GPUS:
        return None
    for deadline in range(2 * fibonacci_slots(gpus), 2 * gpus):
        for finish in islice(_relaxed_staircases(gpus, deadline), PROPOSALS):
            plan = _checked(finish, deadline)
            if plan is not None:
                return plan
    return None
