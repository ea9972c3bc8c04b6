"""``optcoll check``: the CI gate for a synthesizer. Exit 0 when every instance passes, 1 when any
schedule is invalid, over its gap threshold, missing or malformed, or its synthesizer errs,
crashes or times out; 2 on bad input (unknown suite, bad spec, bad suite.toml)."""
from __future__ import annotations

import math
import sys

import click

from optcoll.cli.limits import jobs_option, progress_option, runs_option, time_limit_option
from optcoll.cli.output import echo, say_suite_origin

EXIT_FAILED = 1


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """FloatRange lets nan through (no comparison holds for it): refused here, before anything
    else is said or done."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"must be a ratio ≥ 1 (1.10 = within 10 % of the reference), got {value!r}")
    return value


@click.command("check")
@click.option("--synth", "synth", required=True, metavar="SPEC",
              help="The synthesizer: py:MODULE:FUNCTION (MODULE dotted or a .py file), "
                   "cmd:'PROGRAM ARGS {instance} {out}.json ...', dir:PATH (files named "
                   "<instance>.json/.json.gz/.xml) or builtin:NAME.")
@click.option("--suite", default="quick", show_default=True, metavar="SUITE",
              help="A suite directory, an instance file, or a built-in suite name.")
@click.option("--max-gap", type=click.FloatRange(min=1.0), default=None, metavar="RATIO", callback=_finite,
              help="Pass when time / reference <= RATIO (1.10 = within 10 %); suite.toml "
                   "[check.instances] entries win over it [default: suite.toml [check] "
                   "max_gap, else 1.10].")
@click.option("--against", type=click.Choice(["best", "bound"]), default="best", show_default=True,
              help="Reference: the recorded optimum/best known schedule, or the proven lower bound.")
@time_limit_option(default_text="Time limit per instance [default: each instance's [budget] time_limit]")
@runs_option
@jobs_option
@click.option("--junit", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write JUnit XML (one testcase per instance).")
@click.option("--summary", type=click.Path(dir_okay=False), default=None, metavar="FILE.md",
              help="Write a Markdown summary (e.g. \"$GITHUB_STEP_SUMMARY\").")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of a table.")
@progress_option
def check(synth: str, suite: str, max_gap: float | None, against: str, time_limit: float | None,
          runs: int | None, jobs: int | None, junit: str | None, summary: str | None, as_json: bool,
          progress: bool | None) -> None:
    """Check a synthesizer against recorded ground truth: every instance of SUITE is run (in
    parallel, each with its time limit), every schedule verified, every time compared."""
    from optcoll.check import junit_xml, markdown, run_check
    from optcoll.cli.output import emit_json
    from optcoll.fileio import write_text_atomic

    say_suite_origin(suite)
    report = run_check(synth, suite, max_gap=max_gap, timeout=time_limit, jobs=None if jobs is None else max(jobs, 1), against=against,
                       progress=progress, runs=runs or 1)
    if junit:
        write_text_atomic(junit, junit_xml(report))
    if summary:
        write_text_atomic(summary, markdown(report))
    if as_json:
        emit_json(report.to_dict())
    else:
        echo(report.text())
    if not report.passed:
        sys.exit(EXIT_FAILED)


COMMANDS = [check]
