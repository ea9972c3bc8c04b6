"""The bad-input corpus manifest (corpus/cases.toml) as data, for the corpus test and the report."""
from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"


@dataclass(frozen=True)
class Case:
    """One bad input: the file, the command that reads it, what it tries and what the one-line
    message must say (``field``: the field it names; ``says``: a fragment it contains)."""

    file: str
    run: str
    tried: str
    field: str | None = None
    says: str | None = None
    names: str = "{file}"
    absent: bool = False

    @property
    def id(self) -> str:
        return self.file

    @property
    def form(self) -> str:
        return self.file.split("/")[0]

    def places(self, corpus: Path, out: Path) -> dict[str, str]:
        file = corpus / self.file
        return {"file": str(file), "dir": str(file.parent), "corpus": str(corpus), "out": str(out)}

    def argv(self, corpus: Path, out: Path) -> list[str]:
        """The command's arguments with the placeholders filled in (paths quoted)."""
        quoted = {k: shlex.quote(v) for k, v in self.places(corpus, out).items()}
        return shlex.split(self.run.format(**quoted))

    def named_file(self, corpus: Path, out: Path) -> str:
        return self.names.format(**self.places(corpus, out))

    def fragment(self, corpus: Path, out: Path) -> str | None:
        return self.says.format(**self.places(corpus, out)) if self.says else None


def load_cases() -> list[Case]:
    with open(CORPUS / "cases.toml", "rb") as handle:
        return [Case(**entry) for entry in tomllib.load(handle)["case"]]
