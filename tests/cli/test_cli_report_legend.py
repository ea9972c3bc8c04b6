"""The terminal report ends with a legend of its marks and summary columns, naming the seeds the
randomised synthesizers ran."""
from cli_paths import REPO


def test_the_terminal_report_explains_its_marks_and_seeds(run):
    code, out, _ = run("report", REPO / "examples" / "shift.toml", "--jobs", "0", "--no-cache", "--runs", "2",
                       "--seed", "3", "--no-progress")
    assert code == 0
    legend = out[out.index("- gap: "):]
    for mark in ("≤ x %:", "†:", "n/a:", "misses the optimum k of n:", "max gap:"):
        assert mark in legend
    assert "best of 2 seeds, seed 3 and the next ones" in legend and "tacos+" in legend
