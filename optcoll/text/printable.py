"""Text from input files shown to people, with its control characters made visible.

Why: a model description or an instance name is text someone else wrote. Printed raw, an escape
sequence in it can rewrite the terminal (move the cursor, hide a line, set the window title), a
carriage return can overprint a warning, a bidirectional override can reorder what is read, and
XML 1.0 (JUnit reports) cannot carry most control characters at all. Every such character is
shown as its escape (``\\x1b``, ``\\u202e``) instead; line feeds and tabs stay.
"""
from __future__ import annotations

import re

#: C0 and C1 controls and DEL (except tab and line feed), bidirectional formatting characters,
#: lone surrogates and the two noncharacters XML forbids.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every unsafe character (module docstring) written as its escape."""
    return _UNSAFE.sub(_escape, text)
