"""The verdict on one instance: a worker's record judged against the recorded ground truth.

The reference (``against``):

- ``"best"`` (default): the recorded best verified schedule time, which is the proven optimum
  where the truth's status is "optimal" and the best known schedule where it is "bounded";
- ``"bound"``: the recorded best proven lower bound (stricter where the optimum is unknown).

ratio = verified time / reference; the instance passes when ratio ≤ its threshold. A valid
schedule faster than the proven lower bound is a ``contradiction`` (a bug somewhere: it fails
loudly); one between the bound and a bounded instance's best known time passes with a note that
it beats the record. An instance without usable recorded truth fails as ``no-truth``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from optcoll.check.config import Threshold
from optcoll.results.record import MEET_TOLERANCE
from optcoll.sweeps.jobs import FAILED
from optcoll.instances.suite import InstanceSpec
from optcoll.truth import load_truth
from optcoll.truth.record import OPTIMAL, above
from optcoll.units import format_time

AGAINST = ("best", "bound")
PASS, SKIPPED = "pass", "skipped"
#: Every way an instance fails, in the order a summary lists them.
FAILURES = ("invalid", "gap", "contradiction", "timeout", "error", "crash", "malformed", "missing",
            "no-truth")
STATUSES = (PASS, *FAILURES, SKIPPED)


@dataclass(frozen=True)
class Verdict:
    """One instance's verdict. ``message`` says what was wrong (or how it went) in one line;
    ``detail`` holds a traceback, a command's output or every MSCCL problem."""

    instance: str
    file: str
    problem: str  # "allgather of 1 GiB (C=1) on dgx1"
    status: str
    message: str
    threshold: float
    threshold_source: str
    time: float | None = None
    reference: float | None = None
    reference_kind: str | None = None  # "optimum" | "best known" | "lower bound"
    ratio: float | None = None  # time / reference
    lower_bound: float | None = None
    seconds: float | None = None
    source: str | None = None
    violation: dict[str, Any] | None = None
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status not in (PASS, SKIPPED)

    def line(self) -> str:
        return f"{self.instance}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "failed": self.failed}


def _problem(spec: InstanceSpec, record: dict[str, Any]) -> str:
    """The question in words; a C-free instance names the C the synthesizer's best schedule used."""
    from optcoll.units import format_size

    inst = spec.instance
    c = inst.collective
    chunks = (f"C free in {{{', '.join(map(str, inst.chunk_choices))}}}"
              + (f" → {record['chunks_per_rank']}" if "chunks_per_rank" in record else "")
              if inst.chunk_choices else f"C={c.chunks_per_rank}")
    return (f"{c.kind} of {format_size(c.size_bytes)} ({chunks}) on {inst.machine.name}, "
            f"{inst.model.kind} model")


def _pool_failure(record: dict[str, Any]) -> tuple[str, str]:
    """A record the sweep pool wrote for a worker it had to stop, or an unexpected exception."""
    reason = record.get("reason", "")
    if record.get("error") == "Timeout":
        limit = format_time(float(record["params"]["time_limit"]))
        return "timeout", (f"no schedule within the time limit of {limit}: the synthesizer did not "
                           f"respond to the interrupt, so its worker process was killed ({reason})")
    if record.get("error") == "Killed":
        return "crash", f"the synthesizer's {reason}"
    return "error", f"checking failed: {reason}"


def judge(spec: InstanceSpec, record: dict[str, Any], threshold: Threshold, against: str) -> Verdict:
    base = dict(instance=spec.name, file=str(spec.path), problem=_problem(spec, record),
                threshold=threshold.value, threshold_source=threshold.source,
                seconds=record.get("seconds"), source=record.get("source"),
                violation=record.get("violation"), detail=record.get("detail", ""))
    status = record["status"]
    if status == FAILED:
        status, message = _pool_failure(record)
        return Verdict(status=status, message=message, **base)
    if status != "valid":
        return Verdict(status=status, message=record["message"], **base)
    time = float(record["time"])
    truth, stale = load_truth(spec)
    if truth is None or (truth.best if against == "best" else truth.lower_bound) is None:
        why = stale or "no recorded ground truth to compare with"
        return Verdict(status="no-truth", time=time,
                       message=f"valid ({format_time(time)}), but {why}; run `optcoll truth update`",
                       **base)
    bound = truth.lower_bound.value if truth.lower_bound else None
    if against == "best":
        reference = truth.best.value
        kind = "optimum" if truth.status == OPTIMAL else "best known"
    else:
        reference, kind = bound, "lower bound"
    # an instance with nothing to do has a zero reference: only a zero time meets it
    ratio = time / reference if reference > 0 else (1.0 if time <= 0 else math.inf)
    numbers = dict(time=time, reference=reference, reference_kind=kind, lower_bound=bound,
                   ratio=ratio)
    if bound is not None and above(bound, time):
        return Verdict(status="contradiction", message=(
            f"valid schedule of {format_time(time)} beats the proven lower bound "
            f"{format_time(bound)} ({truth.lower_bound.source}): a bug in a bound, the recorded "
            f"truth or the verifier; please report it"), **numbers, **base)
    against_text = f"{ratio:.4f}× the recorded {kind} {format_time(reference)}"
    if ratio > threshold.value * (1 + MEET_TOLERANCE):
        return Verdict(status="gap", message=(
            f"time {format_time(time)} is {against_text} (+{100 * (ratio - 1):.2f} %), over the "
            f"threshold {threshold.value:g}× ({threshold.source})"), **numbers, **base)
    note = ""
    if truth.best is not None and time < truth.best.value * (1 - MEET_TOLERANCE):
        note = f"; it beats the best schedule on record ({format_time(truth.best.value)})"
    return Verdict(status=PASS, message=f"time {format_time(time)} is {against_text}{note}",
                   **numbers, **base)
