"""What would most likely tighten a `bounded` result (docs/model.md's *bounded*: a verified schedule
and a proven bound that differ). A large gap is either a schedule the budget could not improve or
a bound the model cannot raise; the hints name the change that addresses the likelier cause,
as a flag or an instance-file field the user can set."""
from __future__ import annotations

from optcoll.results.record import Result

#: Gaps below this are left without advice.
LARGE_GAP = 0.10
#: Chunks per rank below this are worth raising: links then pipeline pieces of the buffer.
FEW_CHUNKS = 4


def tightening_hints(result: Result) -> list[str]:
    """One line per likely cause of a large gap, most likely first (empty when none applies)."""
    if result.status != "bounded" or result.gap is None or result.gap < LARGE_GAP:
        return []
    params, hints = result.params, []
    if params.get("family_optimal"):
        hints.append("both parts are optimal: no ReduceScatter-then-AllGather schedule is faster, so the "
                     "gap is the bound's or needs an AllReduce outside that family")
    chunks = params.get("chunks_per_rank")
    if isinstance(chunks, int) and chunks < FEW_CHUNKS:
        hints.append(f"more chunks: chunks_per_rank = {2 * chunks} in the instance's [instance] lets links "
                     "pipeline pieces of the buffer (each piece pays the links' latency again)")
    if not params.get("family_optimal"):
        why = "it was interrupted" if params.get("interrupted") else f"it stopped at {params.get('time_limit', '?')} s"
        hints.append(f"a longer limit: --time-limit ({why}) or --max-memory where a note says a model "
                     "was refused")
    if result.model == "timed":
        hints.append("the step model (--model step): a different model (synchronous steps, docs/model.md §5.2) "
                     "whose optimum is often proven where the timed model's is not")
    return hints
