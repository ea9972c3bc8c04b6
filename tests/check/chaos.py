"""Deliberately broken synthesizers for the ``optcoll check`` tests.

What goes wrong depends on the instance's name (its file stem) up to the first "-": ``good``
returns the stored optimal schedule beside the instance file, ``slow`` the same with every start
delayed by the last start, ``causality`` moves the last transfer to t = 0 (before its sender has
the chunk), ``overlap`` duplicates the first transfer (two transfers on one link at once),
``missing`` drops the last transfer (its destination never gets the chunk), ``double`` repeats the
first reduce long after the end (a contribution reduced twice), ``raises``, ``hangs``, ``crash``
(kills its own process) and ``malformed`` (not a schedule).

Two ways in, one behaviour: ``synthesize(instance)`` for ``py:`` specs, and run as a script
(``python chaos.py {name} {instance} {out}``) for ``cmd:`` specs. Mutations work on optcoll's
JSON form with the standard library only, so the script starts fast.
"""
from __future__ import annotations

import copy
import gzip
import json
import os
import signal
import sys
import time
from pathlib import Path


def stored(instance_file: str | os.PathLike) -> dict:
    path = Path(instance_file).parent / "schedules" / f"{Path(instance_file).stem}.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def _append_copy(columns: dict, k: int, **changes) -> None:
    for name, column in columns.items():
        column.append(changes.get(name, column[k]))


def behave(mode: str, data: dict) -> dict:
    """The schedule (JSON form) that ``mode`` makes of the stored optimum ``data``."""
    data = copy.deepcopy(data)
    columns = data["transfers"]
    start = columns["start"]
    last = max(range(len(start)), key=lambda j: (start[j], j))
    if mode in ("good", "malformed"):
        pass
    elif mode == "slow":
        shift = max(start)
        columns["start"] = [s + shift for s in start]
    elif mode == "causality":
        start[last] = 0.0
    elif mode == "overlap":
        _append_copy(columns, 0)
    elif mode == "missing":
        for column in columns.values():
            del column[last]
    elif mode == "double":
        k = columns["op"].index("reduce")
        _append_copy(columns, k, start=max(start) + 1.0)
    elif mode == "raises":
        raise RuntimeError(f"chaos: deliberate failure in mode {mode!r}")
    elif mode == "hangs":
        while True:
            time.sleep(60)
    elif mode == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        raise ValueError(f"unknown chaos mode {mode!r}")
    return data


def mode_of(name: str) -> str:
    return name.partition("-")[0]


def synthesize(instance):
    """``py:`` entry point: an Instance in, a Schedule out (a dict when malformed)."""
    from optcoll.schedules.jsonfile import schedule_from_dict

    mode = mode_of(instance.name)
    data = behave(mode, stored(instance.source))
    return data if mode == "malformed" else schedule_from_dict(data, instance.machine)


def main(name: str, instance_file: str, out: str) -> None:
    """``cmd:`` entry point: writes ``{out}.json`` (garbage when malformed)."""
    mode = mode_of(name)
    data = behave(mode, stored(instance_file))
    text = "{ this is not JSON" if mode == "malformed" else json.dumps(data)
    Path(out + ".json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
