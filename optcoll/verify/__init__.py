"""The one shared verifier/simulator (docs/model.md §5).

Every schedule, whoever produced it, passes through ``verify`` before any number about it is
believed: it returns the schedule's time and statistics, or the first violation in plain words.
"""
from optcoll.verify.problem import VIOLATION_KINDS
from optcoll.verify.result import LinkStats, RankStats, Verification, Violation
from optcoll.verify.stepmodel import step_to_timed
from optcoll.verify.timeline import TimelineRow, draw_gantt, timeline, utilisation
from optcoll.verify.verifier import require_valid, verify

__all__ = ["verify", "require_valid", "Verification", "Violation", "LinkStats", "RankStats",
           "VIOLATION_KINDS", "step_to_timed", "timeline", "utilisation", "draw_gantt", "TimelineRow"]
