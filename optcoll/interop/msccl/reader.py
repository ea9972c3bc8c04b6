"""The MSCCL runtimes' own XML reader, character for character, to tell which files they load.

Both runtimes read MSCCL-IR with the same hand-written reader, not an XML library
(Azure/msccl-executor-nccl c6f6b36 ``src/misc/msccl/msccl_parser.cc``: ``mscclXmlGetValue``,
``mscclXmlGetToken``, ``mscclXmlGetNode``, ``mscclXmlLoadSub``; microsoft/msccl b23e9cd
``src/graph/xml.cc``, the same functions named ``xml*``; limits in ``msccl_parser.h`` / ``xml.h``).
What follows from it, and what this module reproduces:

- Between elements only space, newline and carriage return may appear: a tab, text or an
  ``<?xml ...?>`` declaration stops it ("expecting '<'" / "expected >, got '?'").
- Inside a tag, an element name ends at space, ``>``, ``/``, newline or return, and only a space
  may separate attributes: an attribute on the next line, or a tab, stops it.
- A value opens with ``"`` or ``'`` but always ends at the next ``"``: single-quoted values run on
  into the rest of the file. No entity is decoded. ``key ="v"`` gives ``key`` an empty value.
- Names have at most 254 characters; values are copied unchecked into 256-byte buffers (longer is
  an overflow); attributes past the 16th are dropped; at most 4096 elements are kept per rank
  (the algo, every gpu, and that rank's tbs and steps) and 1024 children per element (unchecked).
- Comments ``<!-- ... -->`` are skipped; unknown elements and their contents are ignored.

Integers are read with ``strtol(value, NULL, 0)``: leading spaces, a sign, ``0x`` hex and
leading-``0`` octal; it stops at the first other character and reads "" or "abc" as 0.
``read_like_runtime`` returns the document as ``xml.etree.ElementTree`` elements (so the one
structural parser in ``ir.py`` reads it) or raises ``ReaderError`` naming line and column.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

MAX_STR_LEN = 255
MAX_ATTR_COUNT = 16
MAX_SUBS = 1024
MAX_NODES = 4096
_SPACE = " \n\r"
_TOKEN_END = " >/\n\r"
_STRTOL = re.compile(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)?")


class ReaderError(Exception):
    """Where and why the runtime's reader stops (its own WARN text where it has one)."""

    def __init__(self, text: str, pos: int, message: str):
        self.line = text.count("\n", 0, pos) + 1
        self.column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"line {self.line} column {self.column}: {message}")


def strtol(value: str) -> int:
    """C's ``strtol(value, NULL, 0)`` (overflow aside): the integer the runtime reads."""
    match = _STRTOL.match(value)
    sign, digits = match.group(1), match.group(2)
    if not digits:
        return 0
    base = 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") and len(digits) > 1 else 10
    number = int(digits, base)
    return -number if sign == "-" else number


def _show(c: str) -> str:
    return {"\t": "a tab", "\n": "a line break", "\r": "a carriage return"}.get(c, repr(c))


@dataclass(frozen=True)
class _Node:
    name: str
    kind: str  # "open" | "close" | "single" | "none"
    attrs: list[tuple[str, str]]
    pos: int


class _Reader:
    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def char(self) -> str:
        if self.pos >= len(self.text):
            raise ReaderError(self.text, self.pos, "Unexpected EOF")
        c = self.text[self.pos]
        self.pos += 1
        return c

    def value(self) -> tuple[str, str]:
        start = self.pos
        if self.char() not in "\"'":
            raise ReaderError(self.text, start, "Expected (double) quote.")
        out = []
        while (c := self.char()) != '"':
            out.append(c)
        if len(out) > MAX_STR_LEN:
            raise ReaderError(self.text, start, f"a value of {len(out)} characters overflows the reader's "
                                                f"{MAX_STR_LEN + 1}-byte buffer")
        return "".join(out), self.char()

    def token(self, want_value: bool) -> tuple[str, str | None, str]:
        """(name, value or None, the character after it)."""
        start, out = self.pos, []
        while True:
            c = self.char()
            if c == "=":
                if not want_value:
                    raise ReaderError(self.text, self.pos - 1, f"Unexpected value with name {''.join(out)}")
                value, last = self.value()
                return "".join(out), value, last
            if len(out) == MAX_STR_LEN - 1:
                raise ReaderError(self.text, start, f"name {''.join(out)} too long (max {MAX_STR_LEN})")
            if c in _TOKEN_END:
                return "".join(out), None, c
            out.append(c)

    def skip_comment(self, seen: str) -> None:
        tail = "..." + seen
        while not tail.endswith("-->"):
            if self.pos >= len(self.text):
                raise ReaderError(self.text, self.pos, "unterminated comment")
            tail = tail[-2:] + self.text[self.pos]
            self.pos += 1

    def node(self) -> _Node:
        c = " "
        while c in _SPACE:
            if self.pos >= len(self.text):
                return _Node("", "none", [], self.pos)
            c = self.text[self.pos]
            self.pos += 1
        start = self.pos - 1
        if c != "<":
            raise ReaderError(self.text, start, f"expecting '<', got {_show(c)}")
        name, _, c = self.token(False)
        if name.startswith("!--"):
            self.skip_comment(name[3:] + c)
            return self.node()
        if name == "" and c == "/":
            name, _, c = self.token(False)
            if c != ">":
                raise ReaderError(self.text, self.pos - 1, f"unexpected trailing {_show(c)} in closing tag {name}")
            return _Node(name, "close", [], start)
        attrs: list[tuple[str, str]] = []
        while c == " ":
            key, value, c = self.token(True)
            if len(attrs) < MAX_ATTR_COUNT:
                attrs.append((key, value or ""))
        kind = "open"
        if c == "/":
            kind = "single"
            _, _, c = self.token(False)
        if c != ">":
            raise ReaderError(self.text, self.pos - 1, f"expected >, got {_show(c)}")
        return _Node(name, kind, attrs, start)


#: Which children each element's handler keeps (the others are read and ignored).
_HANDLERS = {None: "algo", "algo": "gpu", "gpu": "tb", "tb": "step", "step": None}


def read_like_runtime(text: str) -> ET.Element:
    """The ``<algo>`` element as the runtimes' reader sees ``text`` (module docstring).

    Attribute lists keep the reader's view: dropped extras are gone, ``key ="v"`` leaves ``key``
    empty and files an extra attribute named "". Every rank's tbs are kept (the runtime keeps its
    own only); the element limit is checked for the rank that keeps the most.
    """
    reader = _Reader(text)
    root: ET.Element | None = None

    def load(head: ET.Element | None, head_name: str | None, keep: bool) -> None:
        count = 0
        while True:
            node = reader.node()
            if node.kind == "none":
                if head is not None:
                    raise ReaderError(text, node.pos, f"unterminated {head_name}")
                return
            if node.kind == "close" and head_name is not None:
                if node.name != head_name:
                    raise ReaderError(text, node.pos, f"XML Mismatch : {head_name} / {node.name}")
                return
            handled = keep and node.name == _HANDLERS.get(head_name)
            if head_name == "step":
                raise ReaderError(text, node.pos, f"<{node.name}> inside a <step>: the runtime's step "
                                                  "handler has no child handlers and crashes")
            element = ET.Element(node.name, dict(node.attrs)) if handled else None
            if element is not None:
                count += 1
                if count > MAX_SUBS:
                    raise ReaderError(text, node.pos, f"more than {MAX_SUBS} <{node.name}> children of "
                                                      f"<{head_name}> overflow the reader's table")
                if head is not None:
                    head.append(element)
                else:
                    nonlocal root
                    root = root if root is not None else element
            if node.kind == "open":
                load(element, node.name, handled)

    load(None, None, True)
    if root is None:
        raise ReaderError(text, len(text), "no <algo> element: the runtime dereferences a missing node")
    busiest = max((sum(1 + len(tb) for tb in gpu) for gpu in root), default=0)
    if 1 + len(root) + busiest > MAX_NODES:
        raise ReaderError(text, 0, f"{1 + len(root) + busiest} elements for one rank; the reader keeps "
                                   f"at most {MAX_NODES}")
    return root
