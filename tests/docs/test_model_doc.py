"""The semantics live in the repository: every ``docs/model.md §N`` the code and the README cite
names a section that exists in that file, so a reader following a reference lands on the rule."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "docs" / "model.md"
CITATION = re.compile(r"docs/model\.md\s+§(\d+(?:\.\d+)?)")


def _sections() -> set[str]:
    heads = re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", MODEL.read_text(encoding="utf-8"), flags=re.M)
    return set(heads)


def _citations() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    paths = [*sorted((REPO / "optcoll").rglob("*.py")), *sorted((REPO / "tests").rglob("*.py")),
             REPO / "README.md"]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for number in CITATION.findall(re.sub(r"\s+", " ", text)):
            found.setdefault(number, []).append(str(path.relative_to(REPO)))
    return found


def test_every_cited_section_exists():
    sections, cited = _sections(), _citations()
    assert cited, "no file cites docs/model.md: the pattern is wrong"
    missing = {n: files[:3] for n, files in cited.items() if n not in sections}
    assert not missing, f"cited sections not in docs/model.md: {missing}"


def test_the_time_model_rules_are_written_down():
    text = MODEL.read_text(encoding="utf-8")
    for rule in ("occupancy = \"link\"", "occupancy = \"serialization\"", "send_ports",
                 "plain", "multicast", "reducing", "Physical", "Calibrated", "optimal", "bounded"):
        assert rule in text, rule


def test_no_reference_points_outside_the_repository():
    """The design contract the project started from is not shipped; code cites docs/model.md."""
    stale = [str(p.relative_to(REPO)) for p in sorted((REPO / "optcoll").rglob("*.py"))
             if "DESIGN.md" in p.read_text(encoding="utf-8")]
    assert not stale, f"cite docs/model.md instead of DESIGN.md in: {stale}"
