"""One truth per question (issue 34): the built-in suites ask some questions twice (DGX-1's
AllReduce at C = 2 is in the standard and the machines suite, with different budgets), and the
answer must not depend on which suite is read.

A *sibling* of an instance is an instance of a built-in suite with the same question key
(``InstanceSpec.question_key``: everything but the budget and the names) and a current record.
``optcoll truth update`` takes each sibling's recorded bound (a proof about the same question) and
its best schedule (re-verified on this instance before it is stored) as claims beside its own
solvers', so updating either instance brings it to the better of the two records; the claims
say which record they came from.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from optcoll.instances.suite import InstanceSpec, builtin_suite_names, find_suite, instances_dir
from optcoll.truth.record import Claim, Truth
from optcoll.truth.stored import load_truth


@dataclass(frozen=True)
class Sibling:
    """Another suite's record of the same question."""

    spec: InstanceSpec
    truth: Truth
    where: str  # "standard/dgx1-allreduce-c2"

    def bound(self) -> Claim | None:
        return self._claim(self.truth.lower_bound)

    def best(self) -> Claim | None:
        return self._claim(self.truth.best)

    def schedule_path(self) -> Path:
        assert self.truth.schedule
        return self.spec.path.parent / self.truth.schedule

    def _claim(self, claim: Claim | None) -> Claim | None:
        if claim is None:
            return None
        mark = f" (recorded for {self.where})"
        return replace(claim, source=claim.source if claim.source.endswith(mark) else claim.source + mark)


@lru_cache(maxsize=1)
def _builtin_specs() -> tuple[tuple[str, InstanceSpec], ...]:
    """Read once per process: an update changes one suite, and a sibling is in another."""
    return tuple((name, spec) for name in builtin_suite_names() for spec in find_suite(name).specs)


def siblings(spec: InstanceSpec) -> list[Sibling]:
    """The built-in suites' current records of ``spec``'s question, ``spec``'s own file left out;
    none for an instance outside the built-in suites (a user's suite keeps its own truth)."""
    if instances_dir().resolve() not in spec.path.resolve().parents:
        return []
    found = []
    for suite, other in _builtin_specs():
        if other.path.resolve() == spec.path.resolve() or other.question_key != spec.question_key:
            continue
        truth, _ = load_truth(other)  # a stale record answers another question
        if truth is not None:
            found.append(Sibling(other, truth, f"{suite}/{other.name}"))
    return found
