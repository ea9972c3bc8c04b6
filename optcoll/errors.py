"""Errors a user can act on.

Every problem with input a person wrote (a model file, an instance, a schedule) is an
``InputError`` that names the file and the field; the CLI prints it as one line and exits 2.
"""
from __future__ import annotations

import re


class InputError(ValueError):
    """Bad user input: carries where it came from so the message can name file and field."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.source = source
        self.field = field
        self.detail = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """``source: field: detail`` on one line, whatever line breaks a wrapped library
        message carried (YAML and XML parsers write several)."""
        where = ": ".join(part for part in (self.source, self.field) if part)
        text = f"{where}: {self.detail}" if where else self.detail
        return re.sub(r"\s*[\r\n]+\s*", " ", text.strip())

    def located(self, source: str | None = None, field: str | None = None) -> "InputError":
        """The same error with a source/field filled in where it was missing."""
        return InputError(self.detail, source=self.source or source, field=self.field or field)


class ScheduleRejected(Exception):
    """Raised by ``require_valid`` when the shared verifier rejects a schedule."""
