"""Small suites in tmp dirs (instances copied from the quick suite with their recorded truth and
stored schedules), the deliberately broken synthesizer's specs, and the CLI invoked in-process."""
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from optcoll.cli.commands_check import check
from optcoll.cli.main import OptcollGroup
from optcoll.sweeps.suite import instances_dir

QUICK = instances_dir() / "quick"
CHAOS = Path(__file__).resolve().parent / "chaos.py"
PY_CHAOS = f"py:{CHAOS}:synthesize"
CMD_CHAOS = f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(CHAOS))} {{name}} {{instance}} {{out}}"


def pytest_configure(config):
    """pytester for the plugin tests. ``pytest_plugins`` in a conftest below the rootdir is an
    error in pytest ≥ 8 when the whole suite runs, so the plugin is registered here instead."""
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")


def copy_instance(suite: Path, source: str, stem: str, results: bool = True) -> Path:
    """Copies quick/<source>.toml to suite/<stem>.toml with its stored schedule (under both
    names: the recorded [results] point at the original, the chaos synthesizer at the copy).
    The content hash ignores file names, so the recorded truth stays valid."""
    text = (QUICK / f"{source}.toml").read_text()
    if not results:
        text = text.split("\n[results]")[0] + "\n"
    path = suite / f"{stem}.toml"
    path.write_text(text)
    (suite / "schedules").mkdir(exist_ok=True)
    for name in {source, stem}:
        shutil.copy(QUICK / "schedules" / f"{source}.json.gz", suite / "schedules" / f"{name}.json.gz")
    return path


@pytest.fixture
def make_suite(tmp_path):
    """make_suite({stem: quick instance}, suite_toml="") -> the suite directory."""
    def make(instances: dict[str, str], suite_toml: str = "", name: str = "suite") -> Path:
        suite = tmp_path / name
        suite.mkdir()
        for stem, source in instances.items():
            copy_instance(suite, source, stem)
        if suite_toml:
            (suite / "suite.toml").write_text(suite_toml)
        return suite
    return make


@pytest.fixture
def run_cli():
    """``optcoll check ...`` in-process under optcoll's own error handling: (exit, stdout, stderr)."""
    cli = OptcollGroup(name="optcoll", commands={"check": check})
    runner = CliRunner()

    def invoke(*args):
        result = runner.invoke(cli, ["check", *map(str, args)], catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr
    return invoke
