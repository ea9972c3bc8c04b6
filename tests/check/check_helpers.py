"""What the check tests share: the quick suite, the deliberately broken synthesizer's specs, and
copying instances with their recorded truth (a module with its own name, so imports are unambiguous)."""
import shlex
import shutil
import sys
from pathlib import Path

from optcoll.instances.suite import instances_dir

QUICK = instances_dir() / "quick"
CHAOS = Path(__file__).resolve().parent / "chaos.py"
PY_CHAOS = f"py:{CHAOS}:synthesize"
CMD_CHAOS = f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(CHAOS))} {{name}} {{instance}} {{out}}"


def copy_instance(suite: Path, source: str, stem: str, results: bool = True) -> Path:
    """Copies quick/<source>.toml to suite/<stem>.toml with its stored schedule (under both
    names: the recorded [results] point at the original, the chaos synthesizer at the copy).
    The content hash ignores file names, so the recorded truth stays valid."""
    text = (QUICK / f"{source}.toml").read_text()
    if not results:
        text = text.split("\n[results]")[0] + "\n"
    path = suite / f"{stem}.toml"
    path.write_text(text)
    (suite / "schedules").mkdir(exist_ok=True)
    for name in {source, stem}:
        shutil.copy(QUICK / "schedules" / f"{source}.json.gz", suite / "schedules" / f"{name}.json.gz")
    return path
