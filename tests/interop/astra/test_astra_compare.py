"""The side-by-side report: ASTRA-sim predictions next to optcoll's bounds and verified schedules."""
from optcoll.analysis.tools.astra import astra_compare
from optcoll.interop.astra.network import parse_network
from optcoll.machines import generators as g


def test_report_rows_and_file(tmp_path):
    ring4 = parse_network({"topology": ["Ring"], "npus_count": [4], "bandwidth": [50], "latency": [500]},
                          name="ring4")
    two_d = g.astra([g.AstraDim("FullyConnected", 2, 100 * 2**30, 2e-7), g.AstraDim("Switch", 2, 25 * 2**30, 1e-6)])
    out = tmp_path / "reports" / "astra.md"
    rows = astra_compare([ring4, two_d], ["allgather", "allreduce"], [2**20], out)
    assert len(rows) == 4 and {r.network for r in rows} == {"ring4", two_d.name}
    for row in rows:
        assert row.astra_comm_size == (2**20 // 4 if row.collective == "allgather" else 2**20)
        assert row.bound_serial_s <= row.bound_link_s <= row.greedy_s  # greedy verified, never below
        for (algo, backend), ns in row.astra_ns.items():
            if ns is not None and backend == "aware":  # one message per link at a time
                assert ns >= row.bound_serial_s * 1e9 * (1 - 1e-12)
        assert row.astra_ns[("doubleBinaryTree", "unaware")] is None or row.collective == "allreduce"
    text = out.read_text()
    assert "## ring4" in text and "below the serialization-occupancy" in text
    assert text.count("| allgather |") == 2 and "n/a (no" not in text
