"""The pytest plugin, run the way a user's suite runs it (pytester: a fresh pytest session)."""
from check_helpers import PY_CHAOS

RING = "ring8-allgather-c1"
PLUGIN = ("-p", "optcoll.check.pytest_plugin")


def test_the_fixture_passes_fails_with_the_precise_report_and_rejects_bad_input(pytester, make_suite,
                                                                                 tmp_path):
    good = make_suite({"good-ring8": RING, "good-dgx1": "dgx1-allgather-c1"}, name="goodsuite")
    bad = make_suite({"good": RING, "causality": RING, "slow": RING}, name="badsuite")
    junit = tmp_path / "user" / "junit.xml"
    pytester.makepyfile(test_user_synth=f"""
        def test_my_synth_is_within_5_percent(optcoll_check):
            report = optcoll_check({PY_CHAOS!r}, suite={str(good)!r}, max_gap=1.05, jobs=1,
                                   junit={str(junit)!r})
            assert report.passed and [o.status for o in report.outcomes] == ["pass", "pass"]

        def test_a_broken_synth(optcoll_check):
            optcoll_check({PY_CHAOS!r}, suite={str(bad)!r}, max_gap=1.05)

        def test_a_typo(optcoll_check):
            optcoll_check("builtin:tacoss", suite={str(good)!r})
    """)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "*optcoll check FAILED: 2 of 3 instances (pass 1, invalid 1, gap 1;*",
        "*- causality: invalid schedule [[]causality[]]: npu0 sends chunk 3 on link 15*",
        "*- slow: time * is 1.7500× the recorded optimum 627 us (+75.00 %), over the threshold "
        "1.05× (--max-gap)*",
        "*optcoll check: bad input: --synth: unknown built-in synthesizer 'tacoss'*",
    ])
    assert "Traceback" not in result.stdout.str()  # the report, not optcoll's internals
    assert junit.read_text().count("<testcase ") == 2


def test_the_entry_point_loads_the_fixture_and_p_does_not_load_it_twice(pytester, monkeypatch):
    """The pytest11 entry point to declare is named after the module, so ``-p`` (as above) and the
    entry point register one plugin: a distribution declaring it, on PYTHONPATH."""
    site = pytester.path / "site"
    dist = site / "optcoll_entry_probe-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: optcoll-entry-probe\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[pytest11]\n{PLUGIN[1]} = {PLUGIN[1]}\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    pytester.makepyfile(test_entry="def test_fixture(optcoll_check):\n    assert callable(optcoll_check)\n")
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
    pytester.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=1)
