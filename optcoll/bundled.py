"""Data shipped with optcoll (machine models, instance suites): found in the installed wheel
(``optcoll/_<name>``, hatch force-include) or, in a checkout, beside the package."""
from __future__ import annotations

from pathlib import Path

import optcoll


def bundled_dir(name: str) -> Path:
    package = Path(optcoll.__file__).resolve().parent
    installed = package / f"_{name}"
    return installed if installed.is_dir() else package.parent / name
