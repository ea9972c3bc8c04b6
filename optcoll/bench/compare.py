"""A figure, not a test: one synthesizer's verified time per instance, this checkout next to another
checkout of optcoll (typically ``main``), in one run.

Each checkout runs in its own child process (``PYTHONPATH`` set to it, its own numba cache
directory) over the same instance files, with ``best_of`` over the same seeds, the way
``optcoll report`` runs synthesizers; every schedule passes the shared verifier of its checkout.
Times are model times (deterministic); CPU times are each child's own, with the load average.

    git archive main | tar -x -C /tmp/main-src
    python -m optcoll.bench.compare --base /tmp/main-src --algo tacos+ --suites quick,machines
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: Runs in each checkout: only APIs both sides have (instance loading, the registry, best_of).
_CHILD = r"""
import json, sys, time
from optcoll.instances.instancefile import load_instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.registry import best_of, get_synthesizer
algo, runs = sys.argv[1], int(sys.argv[2])
synth = get_synthesizer(algo)
for path in sys.argv[3:]:
    start = time.process_time()
    try:
        _, times = best_of(load_instance(path), synth, runs=runs)
        row = {"path": path, "time": min(times)}
    except NotApplicable as error:
        row = {"path": path, "time": None, "note": str(error).splitlines()[0][:80]}
    row["cpu"] = time.process_time() - start
    print(json.dumps(row), flush=True)
"""


def instance_files(root: Path, suites: list[str], only: str | None) -> list[str]:
    files = []
    for suite in suites:
        for path in sorted((root / "instances" / suite).glob("*.toml")):
            if path.name != "suite.toml" and (only is None or re.search(only, path.stem)):
                files.append(str(path))
    return files


def run_checkout(checkout: Path, algo: str, runs: int, files: list[str]) -> dict[str, dict]:
    """{instance path: {"time", "cpu"[, "note"]}} from a child process running ``checkout``'s code."""
    with tempfile.TemporaryDirectory(prefix="optcoll-compare-") as cache:
        env = dict(os.environ, PYTHONPATH=str(checkout), NUMBA_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", _CHILD, algo, str(runs), *files], env=env,
                             cwd=tempfile.gettempdir(), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{checkout}: the child failed:\n{out.stderr[-2000:]}")
    return {row["path"]: row for row in map(json.loads, out.stdout.splitlines())}


def _ms(row: dict) -> str:
    return "n/a" if row["time"] is None else f"{row['time'] * 1e3:.4f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, type=Path, help="the other checkout (e.g. main)")
    parser.add_argument("--algo", default="tacos+")
    parser.add_argument("--runs", type=int, default=3, help="seeds per instance (best_of)")
    parser.add_argument("--suites", default="quick,standard,frontier,machines,sizes")
    parser.add_argument("--only", default=None, help="regular expression on the instance name")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parents[2]
    files = instance_files(here, args.suites.split(","), args.only)
    load = os.getloadavg()[0]
    base = run_checkout(args.base.resolve(), args.algo, args.runs, files)
    mine = run_checkout(here, args.algo, args.runs, files)
    print(f"{args.algo}, best of {args.runs} seeds; base {args.base} vs {here}; "
          f"1-min load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    print("| instance | base (ms) | this (ms) | change | base CPU (s) | this CPU (s) |")
    print("|---|---|---|---|---|---|")
    worse = better = 0
    for path in files:
        b, m = base[path], mine[path]
        change = ""
        if b["time"] is not None and m["time"] is not None:
            ratio = m["time"] / b["time"] - 1
            change = f"{ratio:+.2%}"
            worse += ratio > 1e-9
            better += ratio < -1e-9
        elif b["time"] is not None or m["time"] is not None:
            change = "applicability changed"
            worse += 1
        name = f"{Path(path).parent.name}/{Path(path).stem}"
        print(f"| {name} | {_ms(b)} | {_ms(m)} | {change} | {b['cpu']:.2f} | {m['cpu']:.2f} |")
    print(f"{len(files)} instances: {better} faster, {worse} slower (or applicability changed), "
          f"{len(files) - better - worse} equal")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
