"""What every producer of schedules shares: a name, what it applies to, and one entry point.

A producer takes an ``Instance`` and a seed and returns a ``Schedule``; it never verifies its own
output privately and never talks to reports: the shared verifier and a result record sit between.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from optcoll.errors import InputError
from optcoll.instances.instance import Instance
from optcoll.schedules.schedule import Schedule


class NotApplicable(InputError):
    """The producer does not apply to this instance (e.g. recursive doubling on 6 ranks)."""


@dataclass(frozen=True)
class Synthesizer:
    name: str
    description: str
    run: Callable[[Instance, int], Schedule]

    def __call__(self, instance: Instance, seed: int = 0) -> Schedule:
        schedule = self.run(instance, seed)
        return schedule.with_meta(producer=self.name, seed=seed)
