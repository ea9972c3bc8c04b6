"""Recorded ground truth: per instance file, the best proven bound and the best verified schedule
(stored compressed beside it), updated by re-solving and checked without solving."""
from optcoll.truth.check import TruthFinding, verify_suite
from optcoll.truth.record import Claim, Truth, TruthContradiction
from optcoll.truth.stored import load_truth, schedule_path, verify_stored
from optcoll.truth.update import Updated, update_suite

__all__ = ["Claim", "TruthFinding", "Truth", "TruthContradiction", "Updated", "load_truth",
           "schedule_path", "update_suite", "verify_stored", "verify_suite"]
