"""The one benchmark harness: a child's own CPU and peak memory, its timeout, its address-space
cap, JSON calls by name and forked calls on in-memory arguments."""
from __future__ import annotations

import os
import time

from optcoll.bench.isolate import call, call_forked, run_child

GIB = 2.0**30


def test_a_child_reports_its_own_cpu_and_peak_memory():
    burn = "import time; t = time.process_time(); x = bytearray(200 * 2**20)\nwhile time.process_time() - t < 0.3: pass"
    run = run_child(["-c", burn + "\nprint('done')"], timeout=60)
    assert run.code == 0 and run.stdout.strip() == "done" and not run.timed_out
    assert run.cpu >= 0.3 and run.peak_bytes >= 200 * 2**20 and run.wall >= run.cpu * 0.5


def test_a_child_is_stopped_at_its_timeout_and_its_stderr_kept():
    run = run_child(["-c", "import sys, time; print('started', file=sys.stderr, flush=True); time.sleep(60)"],
                    timeout=1)
    assert run.timed_out and run.code != 0 and run.wall < 30
    assert run.last_error_line() == "started"


def test_the_address_space_cap_makes_an_oversized_case_fail_alone():
    row = call("optcoll.bench.isolate:no_such_function", {"not": "called"}, timeout=60)
    assert row["not"] == "called" and "error" in row
    run = run_child(["-c", "x = bytearray(3 * 2**30)"], timeout=60, memory_cap=1 * GIB)
    assert run.code == 1 and "MemoryError" in run.last_error_line()


def test_a_named_function_is_called_on_a_json_case():
    row = call("optcoll.bench.alltoall:measure",
               {"label": "ring of 4 (AlltoAll)", "kind": "torus", "params": {"dims": [4]}, "bound_only": True},
               timeout=300, memory_cap=4 * GIB)
    assert row["npus"] == 4 and row["bound_s"] > 0 and row["bound_cpu_s"] >= 0


def _slow_square(x: int, seconds: float) -> int:
    time.sleep(seconds)
    return x * x


def _die() -> None:
    os._exit(3)


def test_a_forked_call_answers_dies_or_runs_out_of_time():
    got = call_forked(_slow_square, 7, 0.0, timeout=30)
    assert got.result == 49 and got.why is None and not got.timed_out
    died = call_forked(_die, timeout=30)
    assert died.result is None and "exit code 3" in died.why and not died.timed_out
    slow = call_forked(_slow_square, 7, 60.0, timeout=0.5)
    assert slow.result is None and slow.timed_out and slow.wall < 30
