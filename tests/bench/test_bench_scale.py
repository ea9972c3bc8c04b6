"""The scale benchmark's case runs end to end on a small torus (figures, no timed assertion), and
refuses a case whose every schedule cannot fit, saying the size."""
from optcoll.bench import scale
from optcoll.producers import size


def test_a_small_case_is_synthesised_stored_read_back_and_verified():
    figures = scale.measure("allreduce", 64)
    assert figures["valid"] and figures["transfers"] >= figures["floor_transfers"] > 0
    assert figures["file_bytes"] > 0 and figures["engine"] == "events"  # 8064 transfers: the Python loop
    assert figures["verify_peak_bytes"] > 0 and figures["synth_cpu_s"] >= 0


def test_a_case_that_cannot_fit_is_refused_with_its_size(monkeypatch):
    monkeypatch.setattr(size, "default_limit", lambda: 1000)
    figures = scale.measure("alltoall", 64)
    assert "transfers" not in figures
    assert f"has at least {figures['floor_transfers']:,} transfers" in figures["refused"]
