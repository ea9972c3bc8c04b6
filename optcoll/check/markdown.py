"""A Markdown summary for a CI job summary page (GitHub's ``$GITHUB_STEP_SUMMARY``, GitLab and
Gitea render the same): the verdict, the table, and every failure with its detail folded away.
Control characters (a synthesizer's output may hold terminal escapes) are written as escapes."""
from __future__ import annotations

from optcoll.check.report import HEADERS, REFERENCE_TEXT, CheckReport
from optcoll.text.printable import printable


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """Inline code that survives single backticks inside."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def markdown(report: CheckReport) -> str:
    icon = ":white_check_mark:" if report.passed else ":x:"
    lines = [f"## {icon} {_cell(report.headline())}", "",
             f"Synthesizer {_code(report.synthesizer)} on suite **{_cell(report.suite)}** "
             f"({len(report.outcomes)} instances). Ratio = verified time / "
             f"{REFERENCE_TEXT[report.against]}; an instance passes "
             f"when its ratio is at most its max.", "",
             "| " + " | ".join(HEADERS) + " |",
             "|" + "|".join(["---"] * 2 + ["--:"] * (len(HEADERS) - 2)) + "|"]
    for row in report.rows():
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    if report.failures:
        lines += ["", "### Failures", ""]
        for o in report.failures:
            lines.append(f"- **{_cell(o.instance)}** ({o.status}): {_cell(o.message)}")
            if o.detail:
                lines += ["  <details><summary>detail</summary>", "", "  ```text"]
                lines += [f"  {d.replace('```', '` ` `')}" for d in o.detail.splitlines()]
                lines += ["  ```", "  </details>"]
    return printable("\n".join(lines) + "\n")
