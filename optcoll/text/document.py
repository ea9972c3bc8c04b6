"""A report as a list of blocks, rendered once each to Markdown, HTML and terminal text.

Every Markdown or HTML file optcoll writes (gap reports, check summaries, benchmark files, the
AxoNN and ASTRA comparisons) is built from these blocks: headings, paragraphs, tables, bullet
lists (an item may fold away a preformatted detail) and figures. A content builder decides *what*
to show; the renderers below decide only how, with one escaping rule each: in Markdown, table
cells and list items escape pipes and fold line breaks (``md_text``); HTML escapes everything. Text in paragraphs, headings and items may carry `code` and **bold** spans.
HTML is self-contained: figures are inlined SVG, the style sheet is inline, nothing is fetched.
"""
from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from optcoll.text.table import table as text_table


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str  # plain text; `code` spans allowed


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align_right: tuple[int, ...] = ()  # numeric columns


@dataclass(frozen=True)
class Item:
    text: str
    detail: str = ""  # preformatted, folded away (a traceback, a command's output)


@dataclass(frozen=True)
class Bullets:
    items: tuple[Item, ...]


@dataclass(frozen=True)
class Figure:
    name: str  # file name of the SVG, e.g. "gaps.svg"
    caption: str
    svg: str


Block = Heading | Paragraph | Table | Bullets | Figure


def table(headers: Sequence[object], rows: Sequence[Sequence[object]], align_right: Sequence[int] = ()) -> Table:
    """A ``Table`` of any printable cells."""
    return Table(tuple(str(h) for h in headers), tuple(tuple(str(c) for c in row) for row in rows),
                 tuple(align_right))


def bullets(*texts: str) -> Bullets:
    return Bullets(tuple(Item(t) for t in texts))


def md_text(text: str) -> str:
    """The one Markdown escaping rule, for table cells and list items: pipes escaped (also inside
    code spans, as GitHub's tables need), line breaks folded into spaces."""
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def code_span(text: str) -> str:
    """Inline code that survives any backticks inside it (its fence is one longer than the
    longest run of them)."""
    if "`" not in text:
        return f"`{text}`"
    fence = "`" * (max(len(run) for run in re.findall(r"`+", text)) + 1)
    return f"{fence} {text} {fence}"


def to_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, Paragraph):
            out += [block.text, ""]
        elif isinstance(block, Table):
            marks = ["---:" if i in block.align_right else "---" for i in range(len(block.headers))]
            out += ["| " + " | ".join(md_text(h) for h in block.headers) + " |",
                    "|" + "|".join(marks) + "|"]
            out += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in block.rows]
            out.append("")
        elif isinstance(block, Bullets):
            for item in block.items:
                out.append(f"- {md_text(item.text)}")
                if item.detail:
                    out += ["  <details><summary>detail</summary>", "", "  ```text"]
                    out += [f"  {line.replace('```', '` ` `')}" for line in item.detail.splitlines()]
                    out += ["  ```", "  </details>"]
            out.append("")
        else:
            out += [f"![{block.caption}]({block.name})", "", f"*{block.caption}*", ""]
    return "\n".join(out).rstrip() + "\n"


def _inline(text: str) -> str:
    """Escapes text and turns `code` spans into <code> and **bold** ones into <b>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else _bold(p) for i, p in enumerate(parts))


def _bold(text: str) -> str:
    parts = text.split("**")
    if len(parts) % 2 == 0:  # an unpaired ** is left as it is
        return text
    return "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))


_STYLE = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:78em;
padding:0 1em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .5em;vertical-align:top}th{background:#f3f3f3}
td.r{text-align:right;font-variant-numeric:tabular-nums}figure{margin:1em 0}
figcaption{font-style:italic;color:#555}code{background:#f5f5f5;padding:0 .2em}
svg{max-width:100%;height:auto}"""


def to_html(blocks: Sequence[Block], title: str) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"]
    for block in blocks:
        if isinstance(block, Heading):
            level = min(block.level, 6)
            out.append(f"<h{level}>{html.escape(block.text)}</h{level}>")
        elif isinstance(block, Paragraph):
            out.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Table):
            out.append("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
                       + "</tr></thead><tbody>")
            for row in block.rows:
                cells = "".join(f'<td class="r">{_inline(c)}</td>' if i in block.align_right
                                else f"<td>{_inline(c)}</td>" for i, c in enumerate(row))
                out.append(f"<tr>{cells}</tr>")
            out.append("</tbody></table>")
        elif isinstance(block, Bullets):
            out.append("<ul>")
            for item in block.items:
                detail = (f"<details><summary>detail</summary><pre>{html.escape(item.detail)}</pre></details>"
                          if item.detail else "")
                out.append(f"<li>{_inline(item.text)}{detail}</li>")
            out.append("</ul>")
        else:
            svg = block.svg[block.svg.find("<svg"):]  # drop the XML prologue inside HTML
            out.append(f"<figure>{svg}<figcaption>{html.escape(block.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _plain(text: str) -> str:
    return text.replace("`", "").replace("**", "")


def to_text(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out += [block.text, ""]
        elif isinstance(block, Paragraph):
            out += [_plain(block.text), ""]
        elif isinstance(block, Table):
            out += [text_table(block.headers, block.rows), ""]
        elif isinstance(block, Bullets):
            for item in block.items:
                out.append(f"- {_plain(item.text)}")
                out += [f"    {line}" for line in item.detail.splitlines()]
            out.append("")
        else:
            out += [f"[figure {block.name}: {block.caption}]", ""]
    return "\n".join(out).rstrip() + "\n"
