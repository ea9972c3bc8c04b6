"""``optcoll truth verify``: recorded ground truth checked without solving anything.

Per instance with a record: it is for the file's current content; the stored schedule loads,
passes the verifier (at the C it chose, when the instance leaves C free) and takes the recorded
time; every recorded bound (and every analytic bound computed now at the schedule's C, and for a
C-free instance the least over C) is ≤ the recorded schedule time; the status and gap follow from the numbers.
"""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.results.record import meets
from optcoll.instances.suite import InstanceSpec, Suite
from optcoll.truth.record import OPTIMAL, Truth, TruthContradiction, above, unproven
from optcoll.truth.stored import load_truth, verify_stored


@dataclass(frozen=True)
class TruthFinding:
    instance: str
    ok: bool
    status: str  # the recorded status, "missing" or "stale"
    message: str


def _check(spec: InstanceSpec, truth: Truth) -> str:
    from optcoll.bounds import lower_bounds
    from optcoll.producers.chunks import chosen, least_bound

    recorded = spec.data["results"]
    if truth.best is not None:
        time = verify_stored(spec, truth)
        inst = spec.instance
        bounds = [(f"recorded bound ({truth.lower_bound.source})", truth.lower_bound.value)] \
            if truth.lower_bound else []
        at_c = chosen(inst, truth.best.details.get("params", {}))  # every bound at the schedule's C
        bounds += [(f"analytic {b.name} bound", b.value)
                   for b in lower_bounds(at_c.machine, at_c.collective, at_c.model)]
        if inst.chunk_choices:  # and the instance's own: the least over C
            least = least_bound(inst)
            bounds.append((f"analytic {least.name} bound ({least.detail})", least.value))
        for name, value in bounds:
            if above(value, time):
                raise TruthContradiction(f"{spec.name}: {name} {value!r} s exceeds the recorded "
                                         f"schedule time {time!r} s")
    if recorded.get("status") != truth.status:
        raise TruthContradiction(f"{spec.name}: recorded status {recorded.get('status')!r} does not "
                                 f"follow from the numbers ({truth.status})")
    gap = recorded.get("gap")
    if (gap is None) != (truth.gap is None) or (gap is not None and not meets(1 + gap, 1 + truth.gap)):
        raise TruthContradiction(f"{spec.name}: recorded gap {gap!r} does not follow from the numbers")
    if truth.status == OPTIMAL:
        return "optimal, schedule re-verified"
    if truth.best is None:
        return "no schedule recorded"
    why = unproven(truth.best.details, truth.family)
    return f"bounded (gap {100 * (truth.gap or 0):.2f} %), schedule re-verified" + (f"; not proven: {why}" if why else "")


def verify_suite(suite: Suite) -> list[TruthFinding]:
    findings = []
    for spec in suite.specs:
        truth, stale = load_truth(spec)
        if stale:
            findings.append(TruthFinding(spec.name, False, "stale", stale))
        elif truth is None:
            findings.append(TruthFinding(spec.name, True, "missing", "no recorded truth"))
        else:
            try:
                findings.append(TruthFinding(spec.name, True, truth.status, _check(spec, truth)))
            except TruthContradiction as exc:
                findings.append(TruthFinding(spec.name, False, truth.status, str(exc)))
    return findings
