"""Where a machine model is: a path to a TOML file, or a built-in model's name (docs/model.md §3).

Built-in models live in ``optcoll/_models`` in an installed wheel (hatch force-include) and in the
repository's ``models/`` directory in a source checkout. Below both readers of model files: the
catalog (a model by name) and the model file itself (a cluster names its node models).
"""
from __future__ import annotations

from pathlib import Path

from optcoll.bundled import bundled_dir
from optcoll.errors import InputError


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
