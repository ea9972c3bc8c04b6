"""A guard against solver models that would not fit in memory: refuse them before building.

Why: the exact models grow fast (a time-expanded 8×8 torus AllGather with 2 chunks per rank has
4.3 million terms and takes 1.8 GiB to build and load); when one does not fit, the operating
system kills the process (or a sweep's worker) with no message. Every formulation counts, before building,
the variables and terms (non-zero coefficients) it will create — from the same pruning windows its
builder uses — and ``require_fits`` turns them into bytes with the calibration below and refuses
with one line naming the estimate and the limit.

The limit: ``--max-memory`` (e.g. "8 GiB"), else ``DEFAULT_SHARE`` of MemAvailable in
/proc/meminfo at the moment of the check (no limit where that file does not exist). It bounds one
model; the N workers of a parallel sweep each take 1/N of that share (``share_among``), since
their models may grow at once. An explicit ``--max-memory`` applies to every model as given.

Calibration (bytes = fixed + per_term × terms + per_variable × variables, times a thread factor):
measured with ``tests/hardening/test_memory_guard.py::peak_model_bytes``: in a fresh process the
problem and its start schedule are prepared, the peak-RSS mark is reset (/proc/self/clear_refs),
then the model is built and solved for 2 s with one thread; the figure is VmHWM minus the RSS
before building. The coefficients minimise the squared relative error (non-negative least
squares) over 46 models from 1.5·10^4 to 4.3·10^6 terms (tori, hypercubes, meshes, a 2×8
cluster, C = 1 and 2, horizons and step counts scaled up to 3×), OR-Tools 9.15, z3 5.4.1,
Python 3.11, x86-64; ``CALIBRATION`` lists the ranges and the worst estimate/measured ratios
seen. Thread factors were measured at two threads only (the machine had two cores).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from optcoll.errors import InputError
from optcoll.units import format_size

#: Share of MemAvailable one model may take when no ``--max-memory`` is given.
DEFAULT_SHARE = 0.8
#: How many processes of a sweep split ``DEFAULT_SHARE`` (set in each worker: ``share_among``).
_sharers = 1
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class ModelSize:
    """What a formulation is about to build, counted without building it."""

    formulation: str  # calibration key: "time-expanded", "continuous", "step", "step-smt"
    what: str  # e.g. "at 32 epochs", for the message
    variables: int
    terms: int  # non-zero coefficients of the rows (or atoms of the constraints, for z3)


@dataclass(frozen=True)
class Calibration:
    fixed: float  # bytes of a tiny model (solver start-up, buffers)
    per_term: float
    per_variable: float
    per_extra_thread: float = 0.0  # share of the model copied once more per extra solver thread


#: (formulation, backend) → coefficients fitted to measurements (module docstring says how).
#: Per row: fixed bytes, bytes per term, bytes per variable, extra share per thread; above it the
#: models measured (their terms) and the estimate/measured ratios seen (worst low, worst high).
CALIBRATION: Mapping[tuple[str, str], Calibration] = {
    # 10 models, 1.5e4..4.3e6 terms (torus4x4 to torus8x8 C=2 at 1.8 GiB); 0.82..1.26.
    # Two threads: +3 % (hypercube5), -6 % (cluster2x8).
    ("time-expanded", "cpsat"): Calibration(13.7e6, 107, 1718, 0.05),
    # 5 models, 1.5e4..1.4e6 terms; 0.94..1.06 (SCIP runs on one thread here).
    ("time-expanded", "scip"): Calibration(34.9e6, 0, 6308),
    # 5 models, 1.5e4..1.4e6 terms; 0.70..1.10.
    ("time-expanded", "highs"): Calibration(20.3e6, 78, 3390),
    # 5 models, 2.2e4..2.9e6 terms (torus16x16: 1.2 GiB); 0.83..1.10. Two threads: -3 %.
    ("continuous", "cpsat"): Calibration(16.9e6, 503, 0, 0.05),
    # 6 models, 6.0e4..1.2e6 terms; 0.91..1.07. Two threads: +17 % (hypercube6). Rechecked when
    # the step model moved to the toolkit's CP-SAT translation (6 models, 7.7e3..1.6e5 terms):
    # 0.82..1.26, and 2.9 on the smallest (its fixed part dominates), so kept as it was.
    ("step", "cpsat"): Calibration(34.3e6, 0, 2395, 0.2),
    # Fitted again when the step model's MIPs moved from pywraplp to MathOpt (the toolkit's one
    # translation): 6 models each, 7.7e3..1.6e5 terms; 0.75..1.15 (SCIP), 0.92..1.10 (HiGHS).
    ("step", "scip"): Calibration(15.9e6, 0, 8188),
    ("step", "highs"): Calibration(6.7e6, 0, 5890),
    # 5 models, 2.3e4..3.2e5 terms; 0.88..1.14 (z3 is single-threaded).
    ("step-smt", "z3"): Calibration(21.0e6, 691, 3650),
    # 6 models, 1.3e5..1.9e6 terms (ring8, DGX-1 C = 1 and 2, torus4x4 at 340 MB; built through
    # the CP-SAT Python API, so bytes per term count the Python objects too); 0.97..1.03. Threads:
    # not measured, the time-expanded model's factor.
    ("direct allreduce", "cpsat"): Calibration(61.3e6, 143.6, 0, 0.05),
    # 7 models, 2.5e5..7.1e6 terms (ring8, line8, DGX-1 C = 1 and 2 at 3-4 epochs, torus4x4,
    # hypercube4 at 1.7 GB; built through the CP-SAT Python API, solved 2 s); 0.87..1.15.
    # Threads: not measured, the time-expanded model's factor.
    ("allreduce pieces", "cpsat"): Calibration(68.1e6, 252, 0, 0.05),
}


class ModelTooLarge(InputError):
    """A model whose estimated memory exceeds the limit; it was not built."""


def available() -> int | None:
    """MemAvailable in bytes, or None where /proc/meminfo does not say (not Linux)."""
    try:
        for line in MEMINFO.read_text(encoding="ascii").splitlines():
            name, _, value = line.partition(":")
            if name == "MemAvailable":
                return int(value.split()[0]) * 1024  # the file counts kB (KiB)
    except (OSError, ValueError, IndexError):
        return None
    return None


def share_among(processes: int) -> None:
    """This process is one of ``processes`` that may build models at once: each gets an equal
    part of the default share."""
    global _sharers
    _sharers = max(1, processes)


def default_limit() -> int | None:
    free = available()
    return None if free is None else int(DEFAULT_SHARE * free / _sharers)


def _default_text() -> str:
    share = f"{DEFAULT_SHARE / _sharers:.0%} of the memory available now"
    return share if _sharers == 1 else f"{share}: {DEFAULT_SHARE:.0%} split among {_sharers} workers"


def estimate(size: ModelSize, backend: str, threads: int = 1) -> int:
    """Peak bytes to build ``size`` and solve it with ``backend`` on ``threads`` threads."""
    cal = CALIBRATION[size.formulation, backend]
    model = cal.per_term * size.terms + cal.per_variable * size.variables
    return int(cal.fixed + model * (1 + cal.per_extra_thread * (max(1, threads) - 1)))


def require_fits(size: ModelSize, backend: str, threads: int, limit: int | None) -> None:
    """Refuses (``ModelTooLarge``) a model whose estimate exceeds ``limit`` bytes (None: the
    default share of the memory available now)."""
    explicit = limit is not None
    limit = limit if explicit else default_limit()
    if limit is None:
        return
    need = estimate(size, backend, threads)
    if need <= limit:
        return
    where = "--max-memory" if explicit else _default_text()
    smaller = "fewer chunks per rank" + ("" if size.formulation.startswith("step") else
                                         ", the step model (--model step)")
    raise ModelTooLarge(
        f"the {size.formulation} model {size.what} would need about {_approx(need, 1024, BYTES)} "
        f"({_approx(size.variables, 1000, COUNTS)} variables, {_approx(size.terms, 1000, COUNTS)} terms) "
        f"with {backend}, over the limit of {format_size(limit) if explicit else _approx(limit, 1024, BYTES)} "
        f"({where}); not built. Use {smaller} or a larger --max-memory", field="max-memory")


def _approx(n: float, base: int, units: tuple[str, ...]) -> str:
    """About three significant digits with the largest unit that keeps the number ≥ 1."""
    exponent = max((e for e in range(len(units)) if n >= base ** e), default=0)
    value = n / base ** exponent
    return (f"{value:.3g} {units[exponent]}" if value < 1000 else f"{value:.0f} {units[exponent]}").rstrip()


BYTES = ("B", "KiB", "MiB", "GiB", "TiB")
COUNTS = ("", "thousand", "million", "billion")
