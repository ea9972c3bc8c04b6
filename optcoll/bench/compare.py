"""A figure, not a test: one synthesizer's verified time per instance, this checkout next to another
checkout of optcoll (typically ``main``), in one run.

Each checkout runs in its own child process (``PYTHONPATH`` set to it, its own numba cache
directory) over the same instance files, with ``best_of`` over the same seeds, the way
``optcoll report`` runs synthesizers; every schedule passes the shared verifier of its checkout.
Times are model times (deterministic); CPU times are each child's own, with the load average.

    git archive main | tar -x -C /tmp/main-src
    optcoll bench compare --base /tmp/main-src --algo tacos+ --suites quick,machines
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from optcoll.bench.isolate import ROOT, run_child
from optcoll.errors import InputError
from optcoll.text.document import Paragraph, table, to_markdown

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
        out = run_child(["-c", _CHILD, algo, str(runs), *files], env=env, cwd=tempfile.gettempdir())
    if out.code != 0:
        raise InputError(f"the child running {checkout} failed: {out.last_error_line()}", field="--base")
    return {row["path"]: row for row in map(json.loads, out.stdout.splitlines())}


def _ms(row: dict) -> str:
    return "n/a" if row["time"] is None else f"{row['time'] * 1e3:.4f}"


def compare(base: str, algo: str, runs: int, suites: list[str], only: str | None
            ) -> tuple[str, list[dict[str, Any]], int]:
    """The Markdown comparison, its rows, and how many instances got slower (or changed
    applicability) here than in the ``base`` checkout."""
    here = Path(ROOT)
    files = instance_files(here, suites, only)
    load = os.getloadavg()[0]
    theirs = run_checkout(Path(base).resolve(), algo, runs, files)
    mine = run_checkout(here, algo, runs, files)
    rows, cells = [], []
    worse = better = 0
    for path in files:
        b, m = theirs[path], mine[path]
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
        rows.append({"instance": name, "base": b, "this": m, "change": change})
        cells.append([name, _ms(b), _ms(m), change, f"{b['cpu']:.2f}", f"{m['cpu']:.2f}"])
    text = to_markdown([
        Paragraph(f"{algo}, best of {runs} seeds; base {base} vs {here}; "
                  f"1-min load {load:.2f} -> {os.getloadavg()[0]:.2f}"),
        table(["instance", "base (ms)", "this (ms)", "change", "base CPU (s)", "this CPU (s)"], cells),
        Paragraph(f"{len(files)} instances: {better} faster, {worse} slower (or applicability changed), "
                  f"{len(files) - better - worse} equal")])
    return text, rows, worse
