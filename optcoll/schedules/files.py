"""A schedule file by its name: the compact form for ``.npz``, JSON (``.json``, ``.json.gz``) else.

The one place that chooses between the two forms, so every command that reads or writes a
schedule (``verify``, ``synth -o``, ``truth``, the sweep cache) takes both alike.
"""
from __future__ import annotations

import os
from pathlib import Path

from optcoll.machines.machine import Machine
from optcoll.schedules import jsonfile, npzfile
from optcoll.schedules.schedule import Schedule


def is_compact(path: str | os.PathLike) -> bool:
    return Path(path).suffix == npzfile.SUFFIX


def load_schedule(path: str | os.PathLike, machine: Machine) -> Schedule:
    return (npzfile.load_npz if is_compact(path) else jsonfile.load_schedule)(path, machine)


def save_schedule(path: str | os.PathLike, schedule: Schedule, machine: Machine) -> None:
    (npzfile.save_npz if is_compact(path) else jsonfile.save_schedule)(path, schedule, machine)
