import sys
from pathlib import Path

# The report tests share the sweep tests' helpers (small suites, record comparison).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sweeps"))
