"""Finding machine models by name: a path to a TOML file, or a built-in model under ``models/``.

Built-in models live in ``optcoll/_models`` in an installed wheel (hatch force-include) and in the
repository's ``models/`` directory in a source checkout.
"""
from __future__ import annotations

from pathlib import Path

from optcoll.bundled import bundled_dir
from optcoll.errors import InputError
from optcoll.machines.machine import Machine
from optcoll.machines.modelfile import load_machine_file


def models_dir() -> Path:
    return bundled_dir("models")


def builtin_model_names() -> list[str]:
    directory = models_dir()
    return sorted(p.stem for p in directory.glob("*.toml")) if directory.is_dir() else []


def _looks_like_path(ref: str) -> bool:
    return ref.endswith(".toml") or "/" in ref or "\\" in ref


def load_machine(ref: str) -> Machine:
    """A machine from a TOML file path or a built-in model name (``dgx1``, ``torus4x4``, ...)."""
    if _looks_like_path(ref):
        return load_machine_file(ref)
    path = models_dir() / f"{ref}.toml"
    if not path.is_file():
        raise InputError(f"no built-in machine model named {ref!r} (and it is not a .toml path); "
                         f"known: {', '.join(builtin_model_names()) or 'none'}")
    return load_machine_file(path)
