"""Fixtures for the check tests: small suites in tmp dirs and the CLI invoked in-process."""
from pathlib import Path

import pytest
from click.testing import CliRunner

from check_helpers import copy_instance
from optcoll.cli.commands_check import check
from optcoll.cli.main import OptcollGroup


def pytest_configure(config):
    """pytester for the plugin tests. ``pytest_plugins`` in a conftest below the rootdir is an
    error in pytest ≥ 8 when the whole suite runs, so the plugin is registered here instead."""
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")


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
