"""``optcoll bench``: benchmarks that print figures and write them under reports/."""
from __future__ import annotations

import json

import click

from optcoll.cli.limits import BYTES, as_flags, out_option, progress_option, time_limit_option
from optcoll.cli.output import WholeHelpGroup, done, echo, json_option, say_overwrites
from optcoll.errors import InputError
from optcoll.units import format_size


def _say(progress: bool | None):
    """Where a benchmark's line per phase or case goes: stderr, terminal or not (a long run is
    never silent in a CI log), nowhere with --no-progress."""
    return (lambda line: None) if progress is False else (lambda line: echo(line, err=True))


@click.group(cls=WholeHelpGroup)
def bench() -> None:
    """Benchmarks (figures, not pass/fail)."""


@bench.command("core")
@click.option("--side", type=click.IntRange(min=1), default=32, show_default=True, help="Torus side: side×side NPUs.")
@click.option("--scale/--no-scale", default=False, show_default=True,
              help="Instead: the verifier at the producers' scale, 4096-NPU torus AllReduce and AlltoAll "
                   "synthesised, stored compact, read back and verified, one process per case (minutes; "
                   "about 4 GiB of memory per case), written as its own section of the report.")
@out_option("The benchmark report to write.", default="reports/bench-core.md", show_default=True)
@json_option
@progress_option
def bench_core(side: int, scale: bool, out: str, as_json: bool, progress: bool | None) -> None:
    """Verifier on a ~million-transfer torus AllGather, and the exact cut bound of the torus."""
    from optcoll.bench.file import write_bench_report

    if scale:
        return _bench_scale(out, as_json, _say(progress))
    from optcoll.bench.bounds import bench_cut
    from optcoll.bench.verify import bench_verify

    echo(f"optcoll bench core: verify a {side * side}-NPU torus AllGather, then its exact cut bound "
         "(targets: 5 s and 10 s, more under load)", err=True)
    say_overwrites(out)
    v = bench_verify(side)
    _say(progress)(f"verified in {v['verify_seconds']:.2f} s; cut bound next")
    c = bench_cut(side)
    sections = [
        (f"Verify a {v['npus']}-NPU 2D-torus AllGather schedule",
         ["transfers", "engine", "valid", "verify (s)", "build (s)", "peak traced memory", "max RSS"],
         [[v["transfers"], v["path"], v["valid"], f"{v['verify_seconds']:.2f}", f"{v['build_seconds']:.2f}",
           format_size(v["verify_peak_traced_bytes"]), format_size(v["max_rss_bytes"])]],
         "Target: ≤ 5 s. The schedule is dimension-ordered rings; its verified time equals the "
         f"closed form (N²−1)·τ: {v['time'] == v['expected_time']}."),
        (f"Exact ForestColl cut bound of the {c['npus']}-NPU torus",
         ["links", "seconds", "Dinkelbach steps", "max-flows", "exact", "NPUs inside worst cut",
          "1 GiB AllGather bound (s)"],
         [[c["links"], f"{c['seconds']:.2f}", c["iterations"], c["max_flows"], c["exact"],
           c["nodes_inside"], f"{c['allgather_1GiB_bound_s']:.6g}"]],
         "Target: ≤ 10 s."),
    ]
    text = write_bench_report(out, "Core benchmarks: verifier and exact cut bound", sections,
                              keep_other_sections=True)
    done(as_json, f"{text}\nwrote {out}", verify=v, cut=c, out=out)


def _bench_scale(out: str, as_json: bool, say) -> None:
    from optcoll.bench.file import write_bench_report
    from optcoll.bench.scale import CASES, run_case
    from optcoll.units import format_time

    say_overwrites(out)
    rows, figures = [], []
    for collective, npus in CASES:
        say(f"optcoll bench core --scale: {npus}-NPU torus {collective} (its own process)")
        f = run_case(collective, npus)
        figures.append(f)
        say(json.dumps(f))
        if "error" in f or "refused" in f:
            rows.append([f"{npus}-NPU {collective}", f"{f.get('floor_transfers', '–'):,}" if "floor_transfers" in f
                         else "–", "–", "–", "–", "–", "–", "–", "–", "–", "refused: " + f["refused"]
                         if "refused" in f else "error: " + f["error"]])
            continue
        rows.append([f"{npus}-NPU {collective}", f"{f['transfers']:,}", f"{f['synth_cpu_s']:.1f}",
                     format_size(f["synth_peak_bytes"]), format_size(f["file_bytes"]),
                     f"{f['save_s']:.1f} / {f['load_s']:.1f}", f"{f['verify_cpu_s']:.1f}",
                     f"{f['verify_wall_s']:.1f}", format_size(f["verify_peak_bytes"]), f["engine"],
                     f"valid, {format_time(f['time_s'])}" if f["valid"] else f"INVALID: {f['violation']}"])
    sections = [("The verifier at 4096 NPUs (2D torus, tacos+)",
                 ["case", "transfers", "synth CPU (s)", "synth peak RSS", "compact file", "save / load (s)",
                  "verify CPU (s)", "verify wall (s)", "verify peak RSS", "engine", "verdict"], rows,
                 "One process per case, run one after another. Synthesis: tacos+ on a 64×64 torus, 1 GiB, C = 1, "
                 "50 GiB/s and 0.5 µs per link and direction; its peak RSS is the process's high-water mark "
                 "during synthesis (reset at its start). The schedule is then stored in the compact form "
                 "(`.npz`), dropped, read back from the file, and verified by the shared verifier; verify "
                 "peak RSS is the high-water mark during verification (reset at its start; the schedule read "
                 "back is included). Targets (issue 37): AllReduce verified in ≤ 60 s CPU and ≤ 8 GiB; "
                 "AlltoAll synthesised, stored and verified, or refused up front with the size it would "
                 "need (`optcoll.producers.size`: a floor on the transfers of any schedule).")]
    text = write_bench_report(out, "Core benchmarks: verifier and exact cut bound", sections,
                              keep_other_sections=True)
    done(as_json, f"{text}\nwrote {out}", cases=figures, out=out)


@bench.command("exact")
@time_limit_option(default_text="Limit per timed instance and per ladder rung", default=600.0, show_default=True)
@time_limit_option("--pareto-limit", default_text="Limit of the DGX-1 Pareto front, per solver", default=120.0,
                   show_default=True)
@click.option("--only", default=None, metavar="fixed|ladder|step|allreduce|coarse",
              help="Measure one part (fixed: issue 3's list and the DGX-1 front; ladder: the size "
                   "ladders; step: SCCL's questions as whole commands, limit --pareto-limit; "
                   "allreduce: the direct AllReduce model; coarse, only when asked for: a 256-port "
                   "switch on a coarse grid) and keep the report's other sections as they are.")
@click.option("--families", default=None, metavar="NAMES",
              help="Ladder families, comma-separated (default: all; a wrong name lists them).")
@out_option("The benchmark report to write (sections not measured are kept).", default="reports/bench-exact.md",
            show_default=True)
@json_option
@progress_option
def bench_exact(time_limit: float, pareto_limit: float, only: str | None, families: str | None, out: str,
                as_json: bool, progress: bool | None) -> None:
    """Exact solvers: wall time to a proven optimum on issue 3's instances, the DGX-1 front, and
    per family the largest instance proven optimal within the time limit."""
    from optcoll.bench.exact import expected_duration, run_bench

    names = None if families is None else [name.strip() for name in families.split(",") if name.strip()]
    with as_flags(families="--families", only="--only"):
        expected = expected_duration(time_limit, pareto_limit, only, names)
    if expected:
        echo(f"optcoll bench exact: {expected}", err=True)
    say_overwrites(out)
    text = run_bench(out, time_limit, pareto_limit, echo=_say(progress), only=only, families=names)
    done(as_json, f"{text}\nwrote {out}", report=text, out=out)


@bench.command("allreduce")
@time_limit_option(default_text="Exact-solver limit per machine", default=120.0, show_default=True)
@out_option("The benchmark report to write.", default="reports/allreduce.md", show_default=True)
@json_option
@progress_option
def bench_allreduce(time_limit: float, out: str, as_json: bool, progress: bool | None) -> None:
    """Is ReduceScatter then AllGather optimal for AllReduce? Per machine of issue 13, with the
    faster direct schedules written beside the report."""
    from optcoll.bench.allreduce import write_report

    echo(f"optcoll bench allreduce: every machine of issue 13, the exact solver up to {time_limit:g} s on each; "
         "a line on stderr as each ends", err=True)
    say_overwrites(out)
    text = write_report(out, time_limit, echo=_say(progress))
    done(as_json, f"{text}\nwrote {out}", report=text, out=out)


@bench.command("limits")
@time_limit_option(default_text="The time limit every measured job runs with", default=10.0, show_default=True)
@click.option("--no-truth", is_flag=True, help="Leave out the truth-update rows (minutes each: every producer runs).")
@click.option("--no-large", is_flag=True,
              help="Leave out the 512-GPU AllReduce rows (solve at 120 s, numba's kernels warm and cold: 5 min).")
@out_option("The benchmark report to write.", default="reports/bench-limits.md", show_default=True)
@json_option
def bench_limits(time_limit: float, no_truth: bool, no_large: bool, out: str, as_json: bool) -> None:
    """Time limits kept: limit against wall and CPU time of solve, a sweep's exact job and truth
    update on the machines suite's largest instances, and solve of a 512-GPU AllReduce."""
    from optcoll.bench.file import write_bench_report
    from optcoll.bench.limits import limits_section

    echo(f"optcoll bench limits: optcoll warm, then {'' if no_large else 'a 512-GPU AllReduce at 120 s (5 min), '}"
         f"the machines suite's largest instances at {time_limit:g} s; a line on stderr as each ends", err=True)
    say_overwrites(out)
    section = limits_section(time_limit, truth=not no_truth, large=not no_large, echo=lambda line: echo(line, err=True))
    text = write_bench_report(out, "Time limits kept", [section])
    done(as_json, f"{text}\nwrote {out}", report=text, out=out)


@bench.command("greedy")
@click.option("--npus", default="64,256,1024", show_default=True, help="NPU counts, comma-separated.")
@click.option("--families", default="mesh2d,torus2d,hypercube,torus3d", show_default=True,
              help="Topology families (generator kinds), comma-separated.")
@click.option("--collectives", default="allgather,allreduce,alltoall", show_default=True,
              help="Collectives, comma-separated.")
@click.option("--algos", default="tacos,tacos+", show_default=True, help="Greedy synthesizers, comma-separated.")
@click.option("--bounds/--no-bounds", default=True, show_default=True, help="The lower bounds and gaps.")
@click.option("--include", type=click.Path(dir_okay=False, exists=True), default=None, metavar="FILE.jsonl",
              help="Rows of an earlier run (e.g. a separate 4096-NPU run) to include; a case run again "
                   "replaces its row.")
@click.option("--before", type=click.Path(dir_okay=False, exists=True), default=None, metavar="FILE.jsonl",
              help="Rows of the previous committed run, for the 'CPU before' column (default: the JSON-lines "
                   "file beside --out, read before it is overwritten).")
@click.option("--note", default="", help="A paragraph to put under the report's header.")
@click.option("--memory-cap", type=BYTES, default="8 GiB", show_default=True, metavar="SIZE",
              help="Address-space cap of each case's process.")
@out_option("The benchmark report to write (a JSON-lines file of the rows beside it).",
            default="reports/bench-greedy.md", show_default=True)
@json_option
def bench_greedy(npus: str, families: str, collectives: str, algos: str, bounds: bool, include: str | None,
                 before: str | None, note: str, memory_cap: float, out: str, as_json: bool) -> None:
    """Greedy synthesis time, peak memory, growth exponent and gap, 64 to 4096 NPUs (one process per case)."""
    from optcoll.bench.greedy import read_rows, run_bench

    def split(text: str) -> tuple[str, ...]:
        return tuple(item.strip() for item in text.split(",") if item.strip())

    if not all(n.isdigit() and int(n) > 0 for n in split(npus)):
        raise InputError(f"must be positive NPU counts, comma-separated, got {npus!r}", field="--npus")
    cases = len(split(npus)) * len(split(families)) * len(split(collectives)) * len(split(algos))
    echo(f"optcoll bench greedy: {cases} cases, one process each, a JSON row on stderr as each ends (a "
         "1024-NPU AlltoAll with tacos+ takes about half a minute of CPU, 4096 NPUs minutes)", err=True)
    say_overwrites(out)
    rows = run_bench(tuple(int(n) for n in split(npus)), split(families), split(collectives), split(algos), out,
                     bounds, note=note, extra_rows=read_rows(include) if include else None, memory_cap=memory_cap,
                     before=read_rows(before) if before else None)
    done(as_json, f"wrote {out} ({len(rows)} cases)", rows=rows, out=out)


@bench.command("expect")
@click.option("--machines", default="dgxh100,dgxh100-rail-16x8", show_default=True,
              help="Catalog machines, comma-separated.")
@click.option("--collectives", default="allreduce,allgather,reducescatter,alltoall", show_default=True,
              help="Collectives, comma-separated.")
@out_option("The benchmark report to write.", default="reports/bench-expect.md", show_default=True)
@json_option
@progress_option
def bench_expect(machines: str, collectives: str, out: str, as_json: bool, progress: bool | None) -> None:
    """CPU time of ``optcoll expect`` over 24 sizes per machine and collective (one process each)."""
    from optcoll.bench.expect import run_bench, section
    from optcoll.bench.file import write_bench_report

    names = [m.strip() for m in machines.split(",") if m.strip()]
    kinds = [k.strip() for k in collectives.split(",") if k.strip()]
    echo(f"optcoll bench expect: {len(names) * len(kinds)} cases, one process each (a 128-GPU cluster takes "
         "about half a minute of CPU per collective); a JSON row on stderr as each ends", err=True)
    say_overwrites(out)
    rows = run_bench(names, kinds, _say(progress))
    text = write_bench_report(out, "optcoll expect: speed", [section(rows)], keep_other_sections=True)
    done(as_json, f"{text}\nwrote {out}", rows=rows, out=out)


@bench.command("alltoall")
@click.option("--scale/--no-scale", default=True, show_default=True,
              help="The 512- and 1024-NPU rows (minutes).")
@click.option("--lp/--no-lp", "lps", default=True, show_default=True, help="The LP solver comparison.")
@out_option("The benchmark report to write.", default="reports/bench-alltoall.md", show_default=True)
@json_option
@progress_option
def bench_alltoall(scale: bool, lps: bool, out: str, as_json: bool, progress: bool | None) -> None:
    """AlltoAll and AlltoAllv: the MCF bound and the LP-guided schedules on the suites and at
    512-1024 NPUs, CPU time and memory per case (one process each), and the LP solvers."""
    from optcoll.bench.alltoall import run_bench

    echo("optcoll bench alltoall: the suites' AlltoAll cases" + (", then the 512- and 1024-NPU rows (minutes)"
         if scale else "") + (", then the LP solver comparison" if lps else "") + "; a JSON row on stderr as each "
         "ends (--no-scale and --no-lp shorten it)", err=True)
    say_overwrites(out)
    text = run_bench(out, scale=scale, lps=lps, echo=_say(progress))
    done(as_json, f"{text}\nwrote {out}", report=text, out=out)


@bench.command("compare")
@click.option("--base", required=True, type=click.Path(file_okay=False, exists=True),
              help="The other checkout of optcoll (e.g. main: git archive main | tar -x -C /tmp/main-src).")
@click.option("--algo", default="tacos+", show_default=True, help="The synthesizer to compare.")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Seeds per instance (best of).")
@click.option("--suites", default="quick,standard,frontier,machines,sizes", show_default=True,
              help="Built-in suites, comma-separated.")
@click.option("--only", default=None, metavar="REGEX", help="Only instances whose name matches.")
@json_option
def bench_compare(base: str, algo: str, runs: int, suites: str, only: str | None, as_json: bool) -> None:
    """One synthesizer's verified time per instance, this checkout next to another one; exit 1
    when any instance got slower or changed applicability."""
    from optcoll.bench.compare import compare

    text, rows, worse = compare(base, algo, runs, [s.strip() for s in suites.split(",") if s.strip()], only)
    done(as_json, text, rows=rows, worse=worse)
    if worse:
        raise SystemExit(1)


COMMANDS = [bench]
