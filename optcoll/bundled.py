"""Data shipped with optcoll (machine models, instance suites): the checkout's copy when optcoll
runs inside a checkout of its repository, else the installed wheel's (``optcoll/_<name>``, hatch
force-include), else the folder beside the package (an editable install).

Inside a checkout the checkout's files win even when a wheel is installed (``pip install .``):
edits to ``instances/quick/*.toml`` are what ``report quick`` reads and ``truth update quick``
writes, never a second, installed copy. ``bundled_origin`` says which copy a name resolves to."""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import optcoll

PROJECT = "optcoll"


@functools.lru_cache(maxsize=16)
def _checkout_of(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        project = candidate / "pyproject.toml"
        if project.is_file():
            try:
                name = tomllib.loads(project.read_text(encoding="utf-8")).get("project", {}).get("name")
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                name = None
            if name == PROJECT and (candidate / PROJECT).is_dir():
                return candidate
    return None


def checkout_root() -> Path | None:
    """The optcoll checkout holding the current directory, if any."""
    try:
        return _checkout_of(Path.cwd().resolve())
    except OSError:  # the current directory was removed
        return None


def bundled_dir(name: str) -> Path:
    checkout = checkout_root()
    if checkout is not None and (checkout / name).is_dir():
        return checkout / name
    package = Path(optcoll.__file__).resolve().parent
    installed = package / f"_{name}"
    return installed if installed.is_dir() else package.parent / name


def bundled_origin(name: str) -> str:
    """Which copy the built-in ``name`` files are, for a user to read."""
    path = bundled_dir(name)
    if path.parent == checkout_root():
        return "this checkout's copy"
    return "installed with optcoll" if path.name.startswith("_") else "beside the package"
