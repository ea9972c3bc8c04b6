"""``optcoll check``: a CI gate for any synthesizer. Every schedule it emits for a suite's instances
must pass the shared verifier and come within a threshold of the recorded ground truth.

``run_check(synth, suite, ...) -> CheckReport``; ``junit_xml`` and ``markdown`` render a report
for CI; the pytest plugin (``optcoll.check.pytest_plugin``) wraps ``run_check`` in a fixture.
"""
from optcoll.check.config import DEFAULT_MAX_GAP, CheckConfig, Threshold, load_check_config
from optcoll.check.junit import junit_xml
from optcoll.check.markdown import markdown
from optcoll.check.report import REFERENCE_TEXT, CheckReport
from optcoll.check.run import run_check
from optcoll.check.verdict import AGAINST, FAILURES, STATUSES, Verdict

__all__ = ["AGAINST", "DEFAULT_MAX_GAP", "FAILURES", "REFERENCE_TEXT", "STATUSES", "CheckConfig",
           "CheckReport", "Verdict", "Threshold", "junit_xml", "load_check_config", "markdown",
           "run_check"]
