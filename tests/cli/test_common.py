"""The commands' shared helpers (wsesim.cli.common)."""

from __future__ import annotations


def test_durations_in_a_unit_for_their_size() -> None:
    from wsesim.cli.common import format_duration

    assert [format_duration(s) for s in (4.2e-5, 0.56552, 1.63147, 11.34, 179.49975, 7200.0, 86400.0)] == [
        "42.00 µs", "565.52 ms", "1,631.47 ms", "11.34 s", "179.50 s", "120.00 min", "24.00 h"]
