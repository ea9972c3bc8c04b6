"""pytest plugin (entry point ``pytest11``): the ``optcoll_check`` fixture.

    def test_my_synth_is_within_5_percent(optcoll_check):
        optcoll_check("py:mypkg.synth:run", suite="quick", max_gap=1.05)

The fixture runs ``optcoll.check.run_check`` and fails the test with the precise report (each
failing instance and what was wrong) unless every instance passes; it returns the
``CheckReport`` so a test can assert more. ``junit=``/``summary=`` also write the JUnit XML and
Markdown files. Bad input (unknown suite, bad spec) fails the test with the one-line error.
This module stays light: pytest imports it in every session of a project that installs optcoll.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from optcoll.check.report import CheckReport


@pytest.fixture
def optcoll_check() -> Callable[..., "CheckReport"]:
    def check(synth: str, suite: str | os.PathLike = "quick", *, max_gap: float | None = None,
              timeout: float | None = None, jobs: int | None = None, against: str = "best",
              junit: str | os.PathLike | None = None, summary: str | os.PathLike | None = None
              ) -> "CheckReport":
        from optcoll.check import junit_xml, markdown, run_check
        from optcoll.errors import InputError
        from optcoll.fileio import write_text_atomic

        try:
            report = run_check(synth, suite, max_gap=max_gap, timeout=timeout, jobs=jobs,
                               against=against)
        except InputError as exc:
            pytest.fail(f"optcoll check: bad input: {exc.one_line()}", pytrace=False)
        for path, render in ((junit, junit_xml), (summary, markdown)):
            if path is not None:
                write_text_atomic(path, render(report))
        if not report.passed:
            pytest.fail(report.failure_text(), pytrace=False)
        return report
    return check
