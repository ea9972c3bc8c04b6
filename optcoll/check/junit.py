"""JUnit XML for CI systems: one testcase per instance.

The de-facto schema CI tools read (Jenkins, GitLab, GitHub test reporters): a ``<testsuites>``
root holding one ``<testsuite>``; each ``<testcase>`` has ``classname`` (``optcoll.check.SUITE``),
``name`` (the instance) and ``time`` (synthesis seconds). A schedule that is wrong (invalid, over
the gap, contradicting a bound, missing, malformed, no truth to compare with) is a ``<failure>``;
a synthesizer that could not finish (error, crash, timeout) is an ``<error>``; not applicable is
``<skipped>``. ``type`` is the status (the violation kind for an invalid schedule), ``message``
the one-line verdict naming the instance, and the element's text adds numbers and any detail.
Control characters anywhere (instance names, a synthesizer's output) are written as escapes.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import optcoll
from optcoll.check.report import REFERENCE_TEXT, CheckReport
from optcoll.check.verdict import SKIPPED, Verdict
from optcoll.text.printable import printable

ERRORS = frozenset({"error", "crash", "timeout"})


def _add(parent: ET.Element, tag: str, attributes: dict[str, str], text: str | None = None) -> ET.Element:
    """A child element whose every attribute and text shows control characters as escapes: XML
    1.0 cannot carry them at all (an instance name, a command's stderr may hold them)."""
    element = ET.SubElement(parent, tag, {k: printable(v) for k, v in attributes.items()})
    if text is not None:
        element.text = printable(text)
    return element


def _body(o: Verdict) -> str:
    lines = [o.line(), f"instance file: {o.file}", f"problem: {o.problem}"]
    if o.source:
        lines.append(f"schedule: {o.source}")
    if o.ratio is not None:
        lines.append(f"time {o.time!r} s, reference {o.reference!r} s ({o.reference_kind}), "
                     f"ratio {o.ratio:.6f}, threshold {o.threshold:g} ({o.threshold_source})")
    if o.violation:
        where = ", ".join(f"{k} {v}" for k, v in o.violation.items()
                          if k not in ("kind", "message") and v is not None)
        lines.append(f"violation: {o.violation['kind']}" + (f" ({where})" if where else ""))
    if o.detail:
        lines += ["", o.detail]
    return "\n".join(lines)


def junit_xml(report: CheckReport) -> str:
    outcomes = report.outcomes
    failures = sum(o.failed and o.status not in ERRORS for o in outcomes)
    errors = sum(o.status in ERRORS for o in outcomes)
    skipped = sum(o.status == SKIPPED for o in outcomes)
    counts = {"tests": str(len(outcomes)), "failures": str(failures), "errors": str(errors),
              "skipped": str(skipped), "time": f"{report.wall_time:.3f}"}
    root = ET.Element("testsuites", {"name": "optcoll check", **counts})
    suite = _add(root, "testsuite", {
        "name": f"optcoll check {report.suite}", **counts,
        "timestamp": datetime.now(timezone.utc).replace(microsecond=0).isoformat()})
    properties = _add(suite, "properties", {})
    for name, value in (("synthesizer", report.synthesizer), ("suite", report.directory),
                        ("reference", REFERENCE_TEXT[report.against]),
                        ("optcoll", optcoll.__version__)):
        _add(properties, "property", {"name": name, "value": value})
    for o in outcomes:
        case = _add(suite, "testcase", {"classname": f"optcoll.check.{report.suite}", "name": o.instance,
                                        "file": o.file, "time": f"{o.seconds or 0.0:.3f}"})
        if o.status == SKIPPED:
            _add(case, "skipped", {"message": o.line()})
        elif o.failed:
            tag = "error" if o.status in ERRORS else "failure"
            kind = o.violation["kind"] if o.violation else o.status
            _add(case, tag, {"type": kind, "message": o.line()}, _body(o))
        else:
            _add(case, "system-out", {}, _body(o))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
