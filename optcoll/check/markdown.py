"""A Markdown summary for a CI job summary page (GitHub's ``$GITHUB_STEP_SUMMARY``, GitLab and
Gitea render the same): the verdict, the table, and every failure with its detail folded away.
Built from the shared report blocks (``optcoll.text.document``); control characters (a
synthesizer's output may hold terminal escapes) are written as escapes."""
from __future__ import annotations

from optcoll.check.report import HEADERS, REFERENCE_TEXT, CheckReport
from optcoll.text.document import Block, Bullets, Heading, Item, Paragraph, code_span, table, to_markdown
from optcoll.text.printable import printable


def summary_blocks(report: CheckReport) -> list[Block]:
    icon = ":white_check_mark:" if report.passed else ":x:"
    blocks: list[Block] = [
        Heading(f"{icon} {report.headline()}"),
        Paragraph(f"Synthesizer {code_span(report.synthesizer)} on suite **{report.suite}** "
                  f"({len(report.outcomes)} instances). Ratio = verified time / "
                  f"{REFERENCE_TEXT[report.against]}; an instance passes when its ratio is at most its max."),
        table(HEADERS, report.rows(), align_right=range(2, len(HEADERS)))]
    if report.failures:
        blocks += [Heading("Failures", 3),
                   Bullets(tuple(Item(f"**{o.instance}** ({o.status}): {o.message}", o.detail)
                                 for o in report.failures))]
    return blocks


def markdown(report: CheckReport) -> str:
    return printable(to_markdown(summary_blocks(report)))
