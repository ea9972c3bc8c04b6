"""What a gap report says, as document blocks: one builder for the files and the terminal."""
from __future__ import annotations

import statistics

from optcoll.producers.registry import NCCL, RANDOMIZED
from optcoll.reports.data import EXACT, InstanceRow, ProducerResult, Report
from optcoll.text.document import Block, Bullets, Figure, Heading, Item, Paragraph, Table
from optcoll.sweeps.jobs import FAILED, NOT_APPLICABLE
from optcoll.truth.record import OPTIMAL
from optcoll.units import format_size, format_time

GREEDIES = ("tacos", "tacos+")


def pct(gap: float | None, bounded: bool = False) -> str:
    if gap is None:
        return "-"
    return ("≤ " if bounded and gap > 0 else "") + f"{100 * gap:.1f} %"


#: Marks a result at NCCL's own chunking (against the bound at that chunking).
OWN = "◊"
#: What the marks of a recorded exact result say about this run (``ProducerResult.mark``).
RECORDED_BETTER = "faster than the schedule this run's exact solve found"
RECORDED_ONLY = "where this run's exact solver gave no schedule (not run, failed, or none found)"


def gap_cell(row: InstanceRow, result: ProducerResult | None) -> str:
    if result is None or result.status == NOT_APPLICABLE:
        return "n/a"
    if result.status == FAILED:
        return "failed"
    if result.time is None:
        return result.status
    if result.own_chunking:
        return pct(result.gap, bounded=True) + f" {OWN}"
    return pct(result.gap, bounded=row.status != OPTIMAL) + (f" {result.mark}" if result.recorded else "")


def seconds(value: float | None) -> str:
    return "-" if value is None else format_time(value)


def _size(row: InstanceRow) -> str:
    return format_size(row.size_bytes)


def _status(row: InstanceRow) -> str:
    return row.status if row.status != "bounded" else f"bounded ({pct(row.gap)})"


def _baselines(report: Report) -> list[str]:
    """The classical algorithms at the instance's C (NCCL's, judged at their own chunking, apart)."""
    return [label for label in report.labels if label not in (EXACT, *GREEDIES, *NCCL)]


def _fastest(row: InstanceRow, labels: list[str] | tuple[str, ...],
             results: dict[str, ProducerResult] | None = None) -> ProducerResult | None:
    """The fastest of ``labels`` that ran, from ``results`` (default: the row's producers)."""
    results = row.producers if results is None else results
    ran = [results[b] for b in labels if b in results and results[b].ran]
    return min(ran, key=lambda r: r.time) if ran else None


def _best_of(row: InstanceRow, labels: list[str] | tuple[str, ...]) -> str:
    best = _fastest(row, labels)
    return "n/a" if best is None else f"{best.label} {gap_cell(row, best)}"


def _over(row: InstanceRow, result: ProducerResult) -> str:
    """'x % over the proven optimum', or '≤ x % over the optimum' (from the lower bound) and how
    far it is from the best schedule known."""
    if result.gap is None:
        return "-"
    if row.status == OPTIMAL:
        return f"{pct(result.gap)} over the proven optimum"
    known = f"; {pct(result.time / row.best - 1)} over the best known" if row.best else ""
    return f"≤ {pct(result.gap)} over the optimum (lower bound {seconds(row.bound)}){known}"


def _own_over(row: InstanceRow, result: ProducerResult) -> str:
    """'≤ x % over the lower bound at its chunking' (0.0 % where it meets the bound)."""
    if result.gap is None:
        return "-"
    return f"{pct(result.gap, bounded=True)} over the lower bound at its chunking"


def _fixed(row: InstanceRow) -> str:
    """The fastest of NCCL's algorithms at the instance's C, and its gap there."""
    best = _fastest(row, NCCL, row.nccl_fixed)
    if best is None:
        return "-"
    return f"{best.label}: {_over(row, best)}"


def nccl_table(report: Report) -> Table:
    """Per instance, the fastest of NCCL's algorithms at NCCL's own chunking for the size, over
    the lower bound at that chunking; at the instance's C where that chunking is not modelled
    (and then over the optimum, or the bound, at that C)."""
    rows = []
    for row in report.rows:
        best = _fastest(row, NCCL)
        if best is None:
            rows.append((row.name, row.collective, str(row.npus), _size(row), "n/a", "-", "-", "-",
                         "none of NCCL's algorithms applies", "-"))
        elif best.own_chunking:
            rows.append((row.name, row.collective, str(row.npus), _size(row), best.label,
                         best.own_chunking, seconds(best.time),
                         f"{seconds(row.nccl_bound)} ({row.nccl_bound_source.split(':')[0]})",
                         _own_over(row, best), _fixed(row)))
        else:
            rows.append((row.name, row.collective, str(row.npus), _size(row), best.label,
                         f"the instance's C = {row.chunks_label} (not modelled for this collective)",
                         seconds(best.time), seconds(row.best) + ("" if row.status == OPTIMAL or row.best is None
                                                                  else " (best known)"),
                         _over(row, best), "-"))
    return Table(("instance", "collective", "N", "size", "best NCCL algorithm", "NCCL's chunking",
                  "its time", "yardstick", "best NCCL algorithm vs yardstick",
                  "at the instance's C instead"), tuple(rows), (2, 6, 7))


def _names(names: tuple[str, ...], limit: int | None) -> str:
    if not names:
        return "-"
    if limit is None or len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f", … (+{len(names) - limit})"


def summary_table(report: Report, limit: int | None = None) -> Table:
    """Per producer; ``limit`` shortens the list of missed instances (terminal)."""
    rows = []
    for s in report.summary:
        misses = f"{len(s.misses)} of {s.optimal_known}" if s.optimal_known else "-"
        rows.append((s.label, str(s.instances), pct(s.mean_gap), pct(s.median_gap), pct(s.max_gap),
                     misses, _names(s.misses, limit), str(s.not_applicable), str(s.failed)))
    return Table(("producer", "instances", "mean gap", "median gap", "max gap",
                  "misses the optimum", "where", "n/a", "failed"), tuple(rows), (1, 2, 3, 4))


def compact_table(report: Report) -> Table:
    baselines = _baselines(report)
    rows = tuple((row.name, str(row.npus), row.collective, _size(row), row.chunks_label,
                  seconds(row.bound), _status(row),
                  *(gap_cell(row, row.producers.get(label)) for label in (EXACT, *GREEDIES)),
                  _best_of(row, NCCL), _best_of(row, baselines)) for row in report.rows)
    return Table(("instance", "N", "collective", "size", "C", "lower bound", "status", EXACT,
                  *GREEDIES, "best NCCL", "best baseline"), rows, (1, 4, 5, 7, 8, 9))


def gap_matrix(report: Report) -> Table:
    rows = tuple((row.name, *(gap_cell(row, row.producers.get(label)) for label in report.labels))
                 for row in report.rows)
    return Table(("instance", *report.labels), rows, tuple(range(1, len(report.labels) + 1)))


def _bytes(row: InstanceRow) -> str:
    """'127 ns (97 %)': what the bytes alone force, and the latency share of the best time."""
    if row.bandwidth_floor is None:
        return "-"
    share = row.latency_share
    return seconds(row.bandwidth_floor) + ("" if share is None else f" ({100 * share:.0f} %)")


def instances_table(report: Report) -> Table:
    rows = tuple((row.name, row.network, str(row.npus), row.collective, _size(row),
                  row.chunks_label, format_size(row.chunk_bytes), row.model,
                  seconds(row.bound), row.bound_source.split(":")[0], seconds(row.best), row.best_source,
                  _status(row), _bytes(row))
                 for row in report.rows)
    return Table(("instance", "network", "N", "collective", "size M", "C", "chunk", "model",
                  "best lower bound", "bound from", "best schedule", "schedule from", "status",
                  "bytes alone (latency share)"), rows, (2, 5, 8, 10, 13))


def size_table(report: Report) -> Table | None:
    """Per network and collective measured at several sizes: the best schedule at each size, the
    C it uses, and the share of its time the bytes alone do not explain (None: one size each)."""
    groups: dict[tuple[str, str], dict[float, InstanceRow]] = {}
    for row in report.rows:
        groups.setdefault((row.network, row.collective), {})[row.size_bytes] = row
    if all(len(group) < 2 for group in groups.values()):
        return None
    sizes = sorted({size for group in groups.values() for size in group})

    def cell(row: InstanceRow | None) -> str:
        if row is None or row.best is None:
            return "-"
        share = row.latency_share
        return (f"{seconds(row.best)}, C={row.chunks_per_rank}"
                + ("" if share is None else f", latency {100 * share:.0f} %"))
    rows = tuple((network, collective, *(cell(group.get(size)) for size in sizes))
                 for (network, collective), group in sorted(groups.items()))
    return Table(("network", "collective", *(format_size(size) for size in sizes)), rows,
                 tuple(range(2, 2 + len(sizes))))


def bounds_table(report: Report) -> Table:
    names: list[str] = []
    for row in report.rows:
        names += [b["name"] for b in row.bounds if b["name"] not in names]
    rows = []
    for row in report.rows:
        values = {b["name"]: b["value"] for b in row.bounds}
        rows.append((row.name, *(seconds(values.get(n)) for n in names),
                     seconds(row.bound), row.bound_source))
    return Table(("instance", *names, "best proven", "its witness"), tuple(rows),
                 tuple(range(1, len(names) + 2)))


def bound_assumptions(report: Report) -> Paragraph | None:
    """Which bounds assume what of the machine (each is applied only where that holds)."""
    needs: dict[str, tuple[str, ...]] = {}
    for row in report.rows:
        needs.update({b["name"]: tuple(b.get("assumptions") or ()) for b in row.bounds if b.get("assumptions")})
    if not needs:
        return None
    return Paragraph("Assumptions, each bound applied only to machines where they hold: "
                     + "; ".join(f"{name} assumes {', '.join(what)}" for name, what in sorted(needs.items()))
                     + ".")


def _seeds(result: ProducerResult | None) -> tuple[str, ...]:
    if result is None or not result.seeds:
        return ("-",) * 4
    times = result.seeds
    return (seconds(min(times)), seconds(statistics.median(times)), seconds(max(times)), str(len(times)))


def greedy_table(report: Report) -> Table:
    rows = []
    for row in report.rows:
        cells = [row.name]
        for label in GREEDIES:
            cells += _seeds(row.producers.get(label))
        rows.append(tuple(cells))
    headers = ["instance"]
    for label in GREEDIES:
        headers += [f"{label} best", f"{label} median", f"{label} worst", "seeds"]
    return Table(tuple(headers), tuple(rows), tuple(range(1, len(headers))))


def _wall(result: ProducerResult | None) -> str:
    if result is None or result.wall_time is None:
        return "-"
    return f"{result.wall_time:.2f} s" + (" (recorded)" if result.recorded else "")


def _exact_cell(result: ProducerResult | None) -> str:
    if result is None:
        return "-"
    if result.time is None:
        return f"{result.status}: {result.reason or ''}".strip(": ")
    return f"{seconds(result.time)} ({result.status})"


def times_table(report: Report) -> Table:
    baselines = _baselines(report)
    rows = []
    for row in report.rows:
        base = [row.producers[b].wall_time for b in baselines
                if b in row.producers and row.producers[b].wall_time is not None
                and row.producers[b].ran]
        rows.append((row.name, _exact_cell(row.producers.get(EXACT)), _wall(row.producers.get(EXACT)),
                     *(_wall(row.producers.get(g)) for g in GREEDIES),
                     f"{sum(base):.2f} s" if base else "-"))
    return Table(("instance", "exact result", "solver wall time", *(f"{g} wall time" for g in GREEDIES),
                  "all baselines wall time"), tuple(rows), (2, 3, 4, 5))


def _pareto_blocks(report: Report) -> list[Block]:
    out: list[Block] = []
    for data in report.pareto:
        if not data.points:
            out.append(Paragraph(f"Pareto front of {data.instance}: {data.status}: {data.reason}"))
            continue
        rows = tuple((str(p["steps"]), str(p["rounds"]), str(p["chunks"]),
                      f"{p['rounds']}/{p['chunks']}", p.get("formula", ""),
                      seconds(p.get("verified_cost")), "yes" if p.get("proven") else "no",
                      "yes" if p.get("bandwidth_optimal") else "no") for p in data.points)
        searched = f"; searched: {data.scope}, and \"proven\" speaks of these schedules only" if data.scope else ""
        out += [Paragraph(f"Step-model Pareto front of {data.instance} (each point's schedule "
                          f"re-verified in the step model{searched}):"),
                Table(("S", "R", "C", "R/C", "cost", "verified cost", "proven", "bandwidth-optimal"),
                      rows, (0, 1, 2, 5))]
    return out


NCCL_TEXT = (
    "The fastest of NCCL's algorithms as NCCL 2.30.7 runs them (ring on its channels, tree, PAT, "
    "NVLS, NVLS-tree, CollNet, whichever apply to the machine and collective), cut the way NCCL "
    "cuts the buffer at this size rather than at the instance's C: C = ⌈M / (N · unit)⌉ with the "
    "pipelining unit of the protocol NCCL's own cost model picks for the algorithm at this size (LL "
    "32 KiB, LL128 576000 B, Simple 1 MiB slices, NVLS steps; optcoll.machines.calibration). Only "
    "that C comes from the calibration; the schedule runs on the physical machine, verified in "
    "the timed model with α pipelined (occupancy = serialization: NCCL keeps 8 slices in flight "
    "per channel, so a slice's latency overlaps the next one's transfer, where link occupancy "
    "would charge α once per slice). Its yardstick is the best proven lower bound at that C in that "
    "model (the least of them where NCCL's algorithms run at different C), which holds for "
    "every schedule so cut, so the gap is an upper bound on NCCL's distance from the best schedule "
    "at its own chunking (≤; marked ◊ in the matrix). The last column is what the same algorithms "
    "score at the instance's C, against that instance's optimum: a C NCCL does not use. "
    "Collectives NCCL's cost model does not cover (Broadcast, Reduce, sub-communicators) stay at the "
    "instance's C, said so in the row.")


def build_blocks(report: Report, figures: dict[str, tuple[str, str]], command: str) -> list[Block]:
    """Every section of the report files. ``figures``: file name -> (caption, SVG text)."""
    runs = ", ".join(str(r) for r in report.settings["runs"])
    blocks: list[Block] = [
        Heading(report.title, 1),
        Paragraph(f"Generated {report.generated} by optcoll {report.environment.get('optcoll')} "
                  f"(Python {report.environment.get('python')}, OR-Tools "
                  f"{report.environment.get('ortools')}) from `{command}`. Suites: "
                  f"{', '.join(report.suites)}. Greedy synthesizers: best of {runs} seeds "
                  + (f"from seed {report.settings['seed']}." if report.settings['seed'] is not None
                     else "from each instance's [budget] seed.")),
        Paragraph("Gap = time / best proven lower bound − 1. Where the instance's optimum is proven "
                  "(status optimal) the bound is the optimum and the gap is exact; otherwise it is an "
                  "upper bound on the gap to the optimum, shown as ≤. Every time is of a schedule that "
                  "passed optcoll's shared verifier in the timed model (docs/model.md §5); "
                  "the exact column is the exact solver's result of this run, or the ground truth "
                  f"recorded in the instance file: {RECORDED_BETTER} (marked †), or {RECORDED_ONLY} "
                  f"(marked ‡). Marked {OWN}: one of NCCL's algorithms at NCCL's own chunking for "
                  "the size, against the lower bound at that chunking (section below)."),
        Heading("Summary per producer"),
        summary_table(report),
        Heading("NCCL's algorithms at their own chunking"),
        Paragraph(NCCL_TEXT),
        nccl_table(report),
        Heading("Gap per instance and producer"),
        gap_matrix(report),
    ]
    if "gaps.svg" in figures:
        caption, svg = figures["gaps.svg"]
        blocks.append(Figure("gaps.svg", caption, svg))
    sizes = size_table(report)
    if sizes is not None:
        blocks += [Heading("Message size: latency and bandwidth"),
                   Paragraph("The best verified schedule at each size, the C it uses, and its latency "
                             "share: the part of its time the bytes alone do not explain, 1 − (best "
                             "lower bound with every link latency α set to 0) / (best time). What is "
                             "left is α, per hop and, with link occupancy, per transfer (and any slack "
                             "of that bound). Near 100 % the size is latency-bound: fewer hops and "
                             "fewer, larger transfers win; near 0 % it is bandwidth-bound and finer "
                             "chunks pipeline."),
                   sizes]
    blocks += [Heading("Instances"), instances_table(report),
               Heading("Lower bounds"), bounds_table(report),
               *[p for p in (bound_assumptions(report),) if p is not None],
               Heading("Greedy synthesizers over seeds"), greedy_table(report),
               Heading("Solver and synthesis times"), times_table(report)]
    plots = [(n, c, s) for n, (c, s) in figures.items() if n != "gaps.svg"]
    if plots or report.pareto:
        blocks.append(Heading("Message size and the step model"))
        blocks += [Figure(n, c, s) for n, c, s in plots]
        blocks += _pareto_blocks(report)
    if report.failures:
        blocks += [Heading("Failures"),
                   Table(("instance", "producer", "reason"),
                         tuple((f["instance"], f["producer"], f["reason"]) for f in report.failures))]
    open_rows = [row for row in report.rows if row.status == "bounded"]
    if open_rows:
        blocks += [Heading("Not proven optimal"),
                   Table(("instance", "gap ≤", "what stopped the proof"),
                         tuple((row.name, pct(row.gap), row.unproven or "no cause recorded (the record of the "
                                f"best schedule, from {row.best_source.split(':')[0]}, names none)") for row in open_rows))]
    families = [(row.name, row.family) for row in report.rows if row.family]
    if families:
        blocks += [Heading("Optimal within a family"),
                   Paragraph("The exact AllReduce is solved as ReduceScatter then AllGather: its "
                             "bound holds within that family only, so it is not a lower bound above."),
                   Table(("instance", "family", "family optimum/bound", "status"),
                         tuple((name, f["family"], seconds(f["bound"]), str(f.get("status")))
                               for name, f in families))]
    return blocks


def seeds_text(report: Report) -> str:
    """Which seeds the randomised synthesizers ran: what makes a report's verdict reproducible."""
    runs = ", ".join(str(r) for r in report.settings["runs"])
    first = report.settings["seed"]
    start = f"seed {first}" if first is not None else "each instance's [budget] seed"
    return f"best of {runs} seeds, {start} and the next ones"


def legend(report: Report) -> Bullets:
    """What the terminal report's marks and summary columns mean."""
    return Bullets(tuple(Item(text) for text in (
        "gap: verified time / best proven lower bound − 1; 0.0 % is the proven optimum",
        "≤ x %: no optimum is proven for the instance, so x % (from the lower bound) is an upper bound "
        "on the gap to the optimum",
        "C: chunks per rank; \"free → 4\": the instance leaves C to the tool (free: 1, 2, 4, 8; or the "
        "listed set), every producer ran at each allowed C and its fastest verified schedule counts, "
        "4 is the C of the best schedule; the lower bound is then the least over the allowed C of "
        "the best bound per C",
        f"†: the ground truth recorded in the instance file, {RECORDED_BETTER}",
        f"‡: the ground truth recorded in the instance file, {RECORDED_ONLY}",
        f"{OWN}: NCCL's algorithm at NCCL's own chunking for this size (its protocol's pipelining unit "
        "sets C), α pipelined, against the best lower bound at that C; not counted in 'misses the "
        "optimum' (no optimum is known at that C); see the NCCL section of the report files",
        "n/a: the producer does not implement this collective on this machine (not run); failed: it "
        "raised or its schedule did not verify (see the failures)",
        "misses the optimum k of n: of the n instances with a proven optimum it ran on, the k where "
        "its schedule is slower; max gap: the largest gap over every instance it ran, those without a "
        "proven optimum included (an upper bound there), so it can be large with 0 misses",
        f"randomised synthesizers ({', '.join(sorted(RANDOMIZED))}): {seeds_text(report)}; `optcoll check --synth "
        "builtin:NAME --runs R` runs seeds the same way")))


def terminal_blocks(report: Report, stats_line: str) -> list[Block]:
    blocks: list[Block] = [Heading(report.title), compact_table(report), summary_table(report, 3)]
    if report.failures:
        blocks.append(Table(("instance", "producer", "failed because"),
                            tuple((f["instance"], f["producer"], f["reason"]) for f in report.failures)))
    blocks += [legend(report), Paragraph(stats_line)]
    return blocks
