"""Finding machine models by name: a path to a TOML file, or a built-in model under ``models/``.

Built-in models live in ``optcoll/_models`` in an installed wheel (hatch force-include) and in the
repository's ``models/`` directory in a source checkout. Every built-in model cites the sources of
its numbers (``sources.py``); ``load_model`` returns them with the machine.
"""
from __future__ import annotations

from pathlib import Path

from optcoll.bundled import bundled_dir
from optcoll.errors import InputError
from optcoll.machines.machine import Machine
from optcoll.machines.modelfile import MachineModel, load_model_file


def models_dir() -> Path:
    return bundled_dir("models")


def builtin_model_names() -> list[str]:
    directory = models_dir()
    return sorted(p.stem for p in directory.glob("*.toml")) if directory.is_dir() else []


def _looks_like_path(ref: str) -> bool:
    return ref.endswith(".toml") or "/" in ref or "\\" in ref


def model_path(ref: str, base_dir: Path | None = None) -> Path:
    """The file of a model reference: a path (relative to ``base_dir`` when given) or the name of a
    built-in model (``dgx1``, ``dgxh100-rail-4x8``, ...)."""
    if _looks_like_path(ref):
        path = Path(ref)
        return base_dir / path if base_dir is not None and not path.is_absolute() else path
    path = models_dir() / f"{ref}.toml"
    if not path.is_file():
        raise InputError(f"no built-in machine model named {ref!r} (and it is not a .toml path); "
                         f"known: {', '.join(builtin_model_names()) or 'none'}")
    return path


def load_model(ref: str) -> MachineModel:
    """The model (machine, sources, figures) of a TOML file path or a built-in model name."""
    return load_model_file(model_path(ref))


def load_machine(ref: str) -> Machine:
    """A machine from a TOML file path or a built-in model name (``dgx1``, ``torus4x4``, ...)."""
    return load_model(ref).machine
