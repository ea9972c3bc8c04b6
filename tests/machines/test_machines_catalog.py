"""load_machine: built-in names, file paths, and a helpful error for unknown names."""
from __future__ import annotations

from pathlib import Path

import pytest

import optcoll
from optcoll.errors import InputError
from optcoll.machines.catalog import load_machine
from optcoll.machines.modelpaths import builtin_model_names, models_dir


def test_models_dir_is_the_repository_models_in_a_checkout():
    assert models_dir() == Path(optcoll.__file__).resolve().parents[1] / "models"


def test_builtin_names_are_sorted_file_stems():
    names = builtin_model_names()
    assert names == sorted(p.stem for p in models_dir().glob("*.toml"))
    assert {"dgx1", "torus4x4", "astra_ring4_switch8"} <= set(names)


def test_load_by_name_and_by_path(tmp_path):
    by_name = load_machine("torus4x4")
    assert by_name.name == "torus4x4" and by_name.num_npus == 16
    copy = tmp_path / "mine.toml"
    copy.write_text((models_dir() / "ring4.toml").read_text(encoding="utf-8").replace('name = "ring4"', ""),
                    encoding="utf-8")
    by_path = load_machine(str(copy))
    assert by_path.name == "mine" and by_path.num_links == 8
    assert load_machine(str(models_dir() / "ring4.toml")).name == "ring4"


def test_unknown_name_lists_known_models():
    with pytest.raises(InputError) as err:
        load_machine("dgx9")
    message = str(err.value)
    assert err.value.field is None  # the caller (an instance file, the CLI) names the field
    assert "no built-in machine model named 'dgx9'" in message
    assert "dgx1" in message and "torus4x4" in message


def test_missing_path_names_the_file(tmp_path):
    with pytest.raises(InputError) as err:
        load_machine(str(tmp_path / "absent.toml"))
    assert err.value.source.endswith("absent.toml") and "file not found" in str(err.value)
