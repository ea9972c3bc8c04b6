"""Built-in names resolve to the checkout when optcoll runs inside one, even with a wheel
installed (``pip install .``): the checkout's suite files are read and written, and the command
says which copy it uses. Outside a checkout the installed copy is used."""
import shutil
from pathlib import Path

import pytest

import optcoll
from optcoll import bundled
from optcoll.instances.suite import builtin_suite_origin, find_suite

from cli_paths import REPO


@pytest.fixture
def installed(tmp_path, monkeypatch) -> Path:
    """optcoll as a wheel installs it: the package with _instances/ and _models/ inside."""
    package = tmp_path / "site-packages" / "optcoll"
    shutil.copytree(REPO / "instances" / "quick", package / "_instances" / "quick")
    shutil.copytree(REPO / "models", package / "_models")
    monkeypatch.setattr(optcoll, "__file__", str(package / "__init__.py"))
    bundled._checkout_of.cache_clear()
    yield package
    bundled._checkout_of.cache_clear()


def test_inside_a_checkout_its_copy_wins_over_the_installed_one(installed, monkeypatch, run):
    monkeypatch.chdir(REPO / "examples")
    assert find_suite("quick").directory == REPO / "instances" / "quick"
    assert bundled.bundled_dir("models") == REPO / "models"
    code, _, err = run("truth", "verify", "quick")
    assert code == 0 and f"{REPO / 'instances' / 'quick'} (this checkout's copy)" in err


def test_outside_a_checkout_the_installed_copy_is_used(installed, tmp_path, monkeypatch, run):
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert find_suite("quick").directory == installed / "_instances" / "quick"
    code, _, err = run("truth", "verify", "quick")
    assert code == 0 and "(installed with optcoll)" in err


def test_another_projects_pyproject_is_not_a_checkout(installed, tmp_path, monkeypatch):
    other = tmp_path / "other"
    (other / "optcoll").mkdir(parents=True)
    (other / "instances" / "quick").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "not-optcoll"\n')
    monkeypatch.chdir(other)
    assert bundled.bundled_dir("instances") == installed / "_instances"


def test_a_path_is_not_announced_as_a_built_in_suite(monkeypatch):
    monkeypatch.chdir(REPO)
    assert builtin_suite_origin("instances/quick") is None
    assert builtin_suite_origin("quick").startswith(f"built-in suite quick: {REPO / 'instances' / 'quick'}")


def test_writing_over_a_checkout_file_is_said_first(monkeypatch, tmp_path, capsys):
    from optcoll.cli.output import say_overwrites

    monkeypatch.chdir(REPO / "examples")
    say_overwrites("../reports/standard")
    assert f"this overwrites reports/standard in the checkout {REPO}" in capsys.readouterr().err
    say_overwrites(str(tmp_path / "new-report"))  # outside the checkout, or not there yet: silent
    say_overwrites("../reports/not-written-yet")
    assert capsys.readouterr().err == ""


def test_bench_exact_says_how_long_it_may_take():
    from optcoll.bench.exact import LADDERS, TIMED_CASES, expected_duration

    said = expected_duration(600, 120)
    rungs = sum(len(ladder.rungs) for ladder in LADDERS)
    worst = (len(TIMED_CASES) * 600 + 2 * 120 + rungs * 600) / 3600
    assert said.startswith(f"{len(TIMED_CASES)} timed instances and the DGX-1 front and {len(LADDERS)} ladder "
                           f"families: up to {worst:.1f} h with --time-limit 600 s")
    assert expected_duration(10, 5, only="ladder", families=["ring"]).startswith("1 ladder families: up to")
    assert expected_duration(180, 5, only="coarse").startswith("the 256-port coarse-grid row: about 3 min")
