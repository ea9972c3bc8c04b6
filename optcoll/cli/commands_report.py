"""``optcoll report`` (optimality-gap reports over suites) and ``optcoll truth`` (recorded ground
truth: update by re-solving, verify without solving). A contradiction exits 1: it means a bug."""
from __future__ import annotations

import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import click


from optcoll.cli.limits import (jobs_option, max_memory_option, out_option, progress_option, runs_option,
                                seed_option, threads_option, time_limit_option)
from optcoll.cli.output import WholeHelpGroup, echo, emit_json, json_option, say_overwrites, say_suite_origin
from optcoll.errors import InputError

EXIT_CONTRADICTION = EXIT_JOBS_FAILED = 1
DEFAULT_SUITE = "quick"


def _cluster_address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A malformed --cluster is refused before anything runs, even when every job is cached."""
    from optcoll.sweeps.cluster import check_address

    if value is None:
        return None
    try:
        return check_address(value)
    except InputError as exc:
        raise click.BadParameter(exc.detail) from None


def sweep_options(command: Callable) -> Callable:
    """The options every sweeping command shares."""
    options = [
        jobs_option,
        click.option("--cluster", metavar="ADDRESS", default=None, callback=_cluster_address,
                     help="Run on this Dask scheduler (tcp://host:8786) instead of locally."),
        runs_option,
        seed_option,
        time_limit_option(default_text="Exact-solver time limit per instance (default: each instance's [budget])"),
        threads_option,
        click.option("--solver", type=click.Choice(["cpsat", "highs", "scip"]), default="cpsat",
                     show_default=True, help="Exact solver for timed instances."),
        max_memory_option,
        click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
                     help="Result cache (default: $OPTCOLL_CACHE or .optcoll-cache)."),
        click.option("--no-cache", is_flag=True, help="Compute everything afresh, store nothing."),
        click.option("--retry-failed", is_flag=True, help="Run failed jobs again instead of "
                     "reusing their cached failure."),
        progress_option,
    ]
    for option in reversed(options):
        command = option(command)
    return command


@contextlib.contextmanager
def _cache(cache_dir: str | None, no_cache: bool) -> Iterator[Any]:
    from optcoll.sweeps.cache import ResultCache

    if no_cache:
        with tempfile.TemporaryDirectory(prefix="optcoll-nocache-") as tmp:
            yield ResultCache(tmp)
    else:
        yield ResultCache(cache_dir)


def _settings(runs, seed, time_limit, threads, solver, max_memory):
    from optcoll.sweeps.plan import Settings

    return Settings(runs=runs, seed=seed, solver=solver, time_limit=time_limit, threads=threads,
                    max_memory=max_memory)


def _suites(refs: tuple[str, ...]):
    from optcoll.instances.suite import find_suite

    suites = [find_suite(ref) for ref in (refs or (DEFAULT_SUITE,))]
    for ref in refs or (DEFAULT_SUITE,):
        say_suite_origin(ref)
    return suites


def _only(suites: list, names: str | None) -> list:
    """The suites with only the named instances (each name must be in one of them)."""
    if names is None:
        return suites
    from dataclasses import replace

    wanted = {name.strip() for name in names.split(",") if name.strip()}
    known = {spec.name for suite in suites for spec in suite.specs}
    missing = sorted(wanted - known)
    if missing:
        raise InputError(f"no instance named {missing[0]!r} in {', '.join(s.name for s in suites)}", field="only")
    return [replace(suite, specs=tuple(s for s in suite.specs if s.name in wanted))
            for suite in suites if any(s.name in wanted for s in suite.specs)]


def _contradiction(exc: Exception) -> None:
    echo(f"optcoll: CONTRADICTION: {exc}", err=True)
    sys.exit(EXIT_CONTRADICTION)


def _exit_if_failed(failures: list[str]) -> None:
    """Exit 1 after the output when any job failed: a CI job must not pass on a sweep that did
    not run (a lost scheduler, a crashing producer); each line says how many and why."""
    for line in failures:
        echo(f"optcoll: {line}", err=True)
    if failures:
        sys.exit(EXIT_JOBS_FAILED)


def _workers(jobs: int | None) -> int:
    return (os.cpu_count() or 1) if jobs is None else jobs


def _command_line(ctx: click.Context) -> str:
    """The command as a person would retype it (options that differ from their defaults)."""
    words = ["optcoll", ctx.command.name or "report", *ctx.params.get("suites", ())]
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name == "suites" or value is None or value is False or value == param.default:
            continue
        flag = param.opts[0]
        words += [flag] if value is True else [flag, str(value)]
    return shlex.join(words)


@click.command()
@click.pass_context
@click.argument("suites", nargs=-1)
@out_option("Write README.md, report.html, results.csv, report.json and SVG figures into this folder.",
            type=click.Path(file_okay=False), default=None)
@click.option("--resolve", is_flag=True,
              help="Run the exact solver even where the instance records a proven optimum.")
@sweep_options
@json_option
def report(ctx: click.Context, suites: tuple[str, ...], out: str | None, resolve: bool, jobs: int | None,
           cluster: str | None, runs: int | None, seed: int | None, time_limit: float | None,
           threads: int | None, solver: str, max_memory: int | None, cache_dir: str | None,
           no_cache: bool, retry_failed: bool, progress: bool | None, as_json: bool) -> None:
    """How far from optimal is each synthesizer? Gap report over SUITES (default: quick).

    A SUITE is a built-in suite name (quick, standard, frontier, machines, sizes), a directory of
    instance files, or one instance file. Results are cached by content hash: an interrupted run
    continues where it stopped.
    """
    from optcoll.reports.build import assemble, plan_report, run_plan
    from optcoll.reports.content import terminal_blocks
    from optcoll.text.document import to_text
    from optcoll.truth.record import TruthContradiction

    chosen = _suites(suites)
    if out is not None:
        say_overwrites(out)
    settings = _settings(runs, seed, time_limit, threads, solver, max_memory)
    try:
        plan = plan_report(chosen, settings, plots=out is not None, resolve=resolve)
        with _cache(cache_dir, no_cache) as cache:
            records, stats = run_plan(plan, cache, workers=_workers(jobs), cluster=cluster,
                                      progress=progress, retry_failed=retry_failed)
        title = f"optcoll gap report: {', '.join(s.name for s in chosen)}"
        result = assemble(plan, records, title)
    except TruthContradiction as exc:
        _contradiction(exc)
    written = []
    if out is not None:
        from optcoll.reports.files import write_report

        written = write_report(result, out, _command_line(ctx))
    if as_json:
        emit_json({**result.to_dict(), "written": [str(p) for p in written]})
    else:
        echo(to_text(terminal_blocks(result, stats.line())), nl=False)
        if written:
            echo(f"wrote {len(written)} files to {out}/ (open {out}/README.md or {out}/report.html)")
    _exit_if_failed([line] if (line := stats.failure_line()) else [])


@click.group(cls=WholeHelpGroup)
def truth() -> None:
    """Recorded ground truth of suite instances: update (re-solve), verify (no solving)."""


@truth.command("update")
@click.argument("suites", nargs=-1, required=True)
@click.option("--only", default=None, metavar="NAMES",
              help="Update only these instances of the suites (comma-separated names).")
@sweep_options
@json_option
def truth_update(suites: tuple[str, ...], only: str | None, jobs: int | None, cluster: str | None,
                 runs: int | None, seed: int | None, time_limit: float | None, threads: int | None,
                 solver: str, max_memory: int | None, cache_dir: str | None, no_cache: bool,
                 retry_failed: bool, progress: bool | None, as_json: bool) -> None:
    """Re-solve SUITES and record the best bound and schedule in each instance file.

    A proven optimum is never replaced by a worse value; a verified schedule below a proven bound
    stops everything with exit code 1 (a bug somewhere).
    """
    from optcoll.text.table import percent, table
    from optcoll.truth.record import TruthContradiction
    from optcoll.truth.update import update_suite
    from optcoll.units import format_time

    settings = _settings(runs, seed, time_limit, threads, solver, max_memory)
    summary, failures = [], []
    for suite in _only(_suites(suites), only):
        try:
            with _cache(cache_dir, no_cache) as cache:
                updated, stats = update_suite(suite, settings, cache, workers=_workers(jobs),
                                              cluster=cluster, progress=progress,
                                              retry_failed=retry_failed)
        except TruthContradiction as exc:
            _contradiction(exc)
        rows = [[u.instance, u.after.status, format_time(u.after.best.value) if u.after.best else "-",
                 format_time(u.after.lower_bound.value) if u.after.lower_bound else "-",
                 percent(u.after.gap), "changed" if u.changed else "same",
                 "; ".join(u.notes) or ""] for u in updated]
        summary += [{"suite": suite.name, "instance": u.instance, "status": u.after.status,
                     "best": u.after.best.value if u.after.best else None,
                     "lower_bound": u.after.lower_bound.value if u.after.lower_bound else None,
                     "gap": u.after.gap, "changed": u.changed, "notes": list(u.notes)} for u in updated]
        if not as_json:
            echo(f"{suite.name}: {stats.line()}")
            echo(table(["instance", "status", "best", "lower bound", "gap", "record", "notes"], rows))
        if stats.failure_line():
            failures.append(f"{suite.name}: {stats.failure_line()}")
    if as_json:
        emit_json(summary)
    _exit_if_failed(failures)


@truth.command("verify")
@click.argument("suites", nargs=-1, required=True)
@click.option("--require-all", is_flag=True, help="Fail when an instance has no recorded truth.")
@json_option
def truth_verify(suites: tuple[str, ...], require_all: bool, as_json: bool) -> None:
    """Re-verify stored schedules and check recorded bounds ≤ recorded times (no solving)."""
    from optcoll.text.table import table
    from optcoll.truth.check import verify_suite

    bad = 0
    summary = []
    for suite in _suites(suites):
        findings = verify_suite(suite)
        rows = []
        for f in findings:
            ok = f.ok and not (require_all and f.status == "missing")
            bad += not ok
            rows.append([f.instance, "ok" if ok else "FAIL", f.status, f.message])
            summary.append({"suite": suite.name, "instance": f.instance, "ok": ok, "status": f.status,
                            "detail": f.message})
        if not as_json:
            echo(f"{suite.name}:")
            echo(table(["instance", "check", "status", "detail"], rows))
    if as_json:
        emit_json(summary)
    if bad:
        echo(f"optcoll: {bad} recorded result(s) do not hold", err=True)
        sys.exit(EXIT_CONTRADICTION)


COMMANDS = [report, truth]
