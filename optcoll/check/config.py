"""Gap thresholds of ``optcoll check``: the ``[check]`` section of a suite's ``suite.toml``.

    [check]
    max_gap = 1.10                       # this suite's default threshold

    [check.instances.torus4x4-allgather-c1]
    max_gap = 1.30                       # this instance only (key: the instance file's stem)

A threshold is a ratio: a schedule passes when time / reference ≤ max_gap (1.10 = within 10 %;
``inf`` checks validity only). Which one applies to an instance, most specific first: its
``[check.instances.NAME]`` entry, then ``--max-gap`` (or the pytest fixture's ``max_gap``), then
the suite's ``[check] max_gap``, then ``DEFAULT_MAX_GAP``. Per-instance thresholds live in the
suite, not in instance files: an instance file's content keys its recorded ground truth, and a
CI threshold is not part of the problem.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optcoll.errors import InputError
from optcoll.inputfiles import known_keys
from optcoll.instances.suite import SUITE_FILE, Suite

DEFAULT_MAX_GAP = 1.10
_KEYS = {"max_gap", "instances"}


@dataclass(frozen=True)
class Threshold:
    """A max gap ratio and where it was set (shown beside every verdict)."""

    value: float
    source: str


@dataclass(frozen=True)
class CheckConfig:
    max_gap: float | None = None
    instances: Mapping[str, float] = field(default_factory=dict)

    def threshold(self, stem: str, cli: float | None) -> Threshold:
        if stem in self.instances:
            return Threshold(self.instances[stem], f"{SUITE_FILE} [check.instances.{stem}]")
        if cli is not None:
            return Threshold(cli, "--max-gap")
        if self.max_gap is not None:
            return Threshold(self.max_gap, f"{SUITE_FILE} [check]")
        return Threshold(DEFAULT_MAX_GAP, "default")


def check_ratio(value: Any, source: str | None, field_name: str) -> float:
    """A max gap ratio ≥ 1, else ``InputError`` naming where it was written."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 1:
        raise InputError(f"must be a ratio ≥ 1 (1.10 = within 10 % of the reference), got {value!r}",
                         source=source, field=field_name)
    return float(value)


def load_check_config(suite: Suite) -> CheckConfig:
    from optcoll.instances.instancefile import read_toml

    path = suite.directory / SUITE_FILE
    if not path.is_file():
        return CheckConfig()
    source = str(path)
    table = known_keys(read_toml(path).get("check", {}), "check", sorted(_KEYS), source)
    default = check_ratio(table["max_gap"], source, "check.max_gap") if "max_gap" in table else None
    entries = table.get("instances", {})
    if not isinstance(entries, dict):
        raise InputError("must be a table of instance names", source=source, field="check.instances")
    names = {p.stem for p in suite.directory.glob("*.toml") if p.name != SUITE_FILE}
    instances = {}
    for name, entry in entries.items():
        where = f"check.instances.{name}"
        if name not in names:
            raise InputError(f"no instance file {name}.toml in {suite.directory}", source=source,
                             field=where)
        if not isinstance(entry, dict) or set(entry) != {"max_gap"}:
            raise InputError("must be a table with max_gap (and nothing else)", source=source,
                             field=where)
        instances[name] = check_ratio(entry["max_gap"], source, f"{where}.max_gap")
    return CheckConfig(default, instances)
