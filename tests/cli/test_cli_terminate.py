"""SIGTERM ends a long command with SIGTERM's status (143): in the middle of a solver call the solver
stops cleanly and the command shows its best so far, and a command that runs solve after solve
(``bench allreduce``) starts no other. The signal is sent from inside the first CP-SAT call of a
real ``optcoll`` process (``backends.cpsat_solve``, the fault-injection point), so it lands where
the bug was; the tests wait for the process, never a fixed time. How fast each command stops is
measured in ``optcoll bench limits``."""
from __future__ import annotations

import subprocess
import sys

from cli_paths import REPO

EXIT_TERMINATED = 143

#: ``optcoll ARGS`` in a fresh process whose first CP-SAT call sends it SIGTERM as it starts.
_CHILD = """
import os, signal, sys
from optcoll.producers.exact.toolkit import backends
real = backends.cpsat_solve
def first_call_terminates(wrapper, proto):
    if not getattr(first_call_terminates, "sent", False):
        first_call_terminates.sent = True
        os.kill(os.getpid(), signal.SIGTERM)
    return real(wrapper, proto)
backends.cpsat_solve = first_call_terminates
from optcoll.cli.main import main
sys.argv[0] = "optcoll"
main()
"""


def _terminated_in_first_solver_call(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=600)


def test_sigterm_in_a_solver_call_shows_the_best_so_far_and_exits_143():
    proc = _terminated_in_first_solver_call("solve", str(REPO / "instances" / "quick" / "dgx1-allreduce-c1.toml"),
                                            "--time-limit", "10 min")
    assert proc.returncode == EXIT_TERMINATED, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "optcoll: terminated (SIGTERM)" and "Traceback" not in proc.stderr
    assert "(verified)" in proc.stdout  # the best schedule so far, shown
    assert "interrupted: returning the best schedule so far and the proven bound" in proc.stdout


def test_sigterm_stops_bench_allreduce_before_its_next_machine(tmp_path):
    """It used to be taken for that solve's Ctrl-C, and the benchmark went on to the next machine."""
    out_file = tmp_path / "allreduce.md"
    proc = _terminated_in_first_solver_call("bench", "allreduce", "--time-limit", "60", "-o", str(out_file))
    assert proc.returncode == EXIT_TERMINATED, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "optcoll: terminated (SIGTERM)" and "Traceback" not in proc.stderr
    rows = [line for line in proc.stderr.splitlines() if line.count(" | ") > 3]
    assert len(rows) <= 1 and not out_file.exists()  # the machine it was on at most; no report
