"""The README's tour, followed as a new user would: its setup line copies ``examples/`` into an
empty folder, then every command of the tour block runs there in order, in this process. A
command fails the test when it exits non-zero, when a file it is told to write is not there
afterwards, or when its comment says it prints "TEXT" and it does not. So the README cannot
name a file, an option or an output that is not what optcoll does."""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli

from cli_paths import REPO

TOUR_MARK = "<!-- tour:"
SETUP = "cp -r examples first-hour && cd first-hour"
#: Options whose value is a file (or a file prefix) the command writes.
OUTPUT_OPTIONS = ("-o", "--out", "--gantt", "--export-model", "--junit", "--summary")


@dataclass(frozen=True)
class Step:
    line: str
    args: tuple[str, ...]
    prints: tuple[str, ...]

    def outputs(self) -> list[str]:
        return [self.args[i + 1] for i, word in enumerate(self.args[:-1]) if word in OUTPUT_OPTIONS]


def _code_blocks(text: str) -> list[tuple[int, list[str]]]:
    """Fenced blocks as (index of the line before the opening fence, lines inside)."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            blocks.append((i - 1, lines[i + 1:end]))
            i = end
        i += 1
    return blocks


def tour_steps(readme: str) -> list[Step]:
    lines = readme.splitlines()
    blocks = _code_blocks(readme)
    tour = [body for before, body in blocks if before >= 0 and lines[before].startswith(TOUR_MARK)]
    assert len(tour) == 1, f"README.md must have exactly one block after a {TOUR_MARK!r} line"
    setup = [body for _, body in blocks if body == [SETUP]]
    assert setup, f"README.md must show the tour's setup line {SETUP!r}"
    steps = []
    for line in tour[0]:
        if not line.strip():
            continue
        words = shlex.split(line, comments=True)
        assert words[0] == "optcoll", f"the tour runs optcoll commands only: {line!r}"
        comment = line.split("#", 1)[1] if "#" in line else ""
        steps.append(Step(line, tuple(words[1:]), tuple(re.findall(r'prints "([^"]+)"', comment))))
    return steps


STEPS = tour_steps((REPO / "README.md").read_text())


@contextlib.contextmanager
def _inside(folder: Path):
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


class Tour:
    """Runs the tour's steps in order, each once, up to the one a test asks for."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.results: list[tuple[int, str, str]] = []

    def upto(self, index: int) -> tuple[int, str, str]:
        runner = CliRunner()
        with _inside(self.folder):
            while len(self.results) <= index:
                step = STEPS[len(self.results)]
                result = runner.invoke(cli, list(step.args), catch_exceptions=False)
                self.results.append((result.exit_code, result.stdout, result.stderr))
        return self.results[index]


@pytest.fixture(scope="module")
def tour(tmp_path_factory) -> Tour:
    folder = tmp_path_factory.mktemp("tour") / "first-hour"
    shutil.copytree(REPO / "examples", folder)
    return Tour(folder)


def test_the_tour_uses_only_what_examples_hold_or_it_writes():
    """Every file a step reads is in examples/, written by an earlier step, or built in."""
    written = set()
    for step in STEPS:
        written.update(step.outputs())
        for word in step.args:
            if re.fullmatch(r"[\w.-]+\.(toml|json|xml|yml|txt)", word) and word not in written:
                assert (REPO / "examples" / word).is_file(), f"{step.line!r} reads {word}, which nothing made"


@pytest.mark.parametrize("index", range(len(STEPS)), ids=[" ".join(s.args[:2]) for s in STEPS])
def test_tour_step(tour: Tour, index: int):
    step = STEPS[index]
    code, out, err = tour.upto(index)
    assert code == 0, f"{step.line!r} exited {code}:\n{out}\n{err}"
    for text in step.prints:
        assert text in out, f"{step.line!r} should print {text!r}; it printed:\n{out}"
    for path in step.outputs():
        target = tour.folder / path
        assert target.exists() or any(target.parent.glob(target.name + ".*")), \
            f"{step.line!r} should have written {path}"
