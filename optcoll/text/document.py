"""A report as a list of blocks, rendered once each to Markdown, HTML and terminal text.

Blocks are headings, paragraphs, tables and figures; one content builder produces them and the
renderers below never decide *what* to show, only how. HTML is self-contained: figures are
inlined SVG, the style sheet is inline, nothing is fetched.
"""
from __future__ import annotations

import html
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
class Figure:
    name: str  # file name of the SVG, e.g. "gaps.svg"
    caption: str
    svg: str


Block = Heading | Paragraph | Table | Figure


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, Paragraph):
            out += [block.text, ""]
        elif isinstance(block, Table):
            marks = ["---:" if i in block.align_right else "---" for i in range(len(block.headers))]
            out += ["| " + " | ".join(_md_cell(h) for h in block.headers) + " |",
                    "|" + "|".join(marks) + "|"]
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
            out.append("")
        else:
            out += [f"![{block.caption}]({block.name})", "", f"*{block.caption}*", ""]
    return "\n".join(out).rstrip() + "\n"


def _inline(text: str) -> str:
    """Escapes text and turns `code` spans into <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


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
        else:
            svg = block.svg[block.svg.find("<svg"):]  # drop the XML prologue inside HTML
            out.append(f"<figure>{svg}<figcaption>{html.escape(block.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def to_text(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out += [block.text, ""]
        elif isinstance(block, Paragraph):
            out += [block.text.replace("`", ""), ""]
        elif isinstance(block, Table):
            out += [text_table(block.headers, block.rows), ""]
        else:
            out += [f"[figure {block.name}: {block.caption}]", ""]
    return "\n".join(out).rstrip() + "\n"
