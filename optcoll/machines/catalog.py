"""Machine models by name: a path to a TOML file, or a built-in model under ``models/``
(``modelpaths`` finds the file). Every built-in model cites the sources of its numbers
(``sources.py``); ``load_model`` returns them with the machine.
"""
from __future__ import annotations

from optcoll.machines.machine import Machine
from optcoll.machines.modelfile import MachineModel, load_model_file
from optcoll.machines.modelpaths import model_path


def load_model(ref: str) -> MachineModel:
    """The model (machine, sources, figures) of a TOML file path or a built-in model name."""
    return load_model_file(model_path(ref))


def load_machine(ref: str) -> Machine:
    """A machine from a TOML file path or a built-in model name (``dgx1``, ``torus4x4``, ...)."""
    return load_model(ref).machine
