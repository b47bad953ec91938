"""nccl-tests' bandwidth definitions (doc/PERFORMANCE.md) and its table's layout."""

from __future__ import annotations

import pytest

from cellfabric.collectives import ScheduleError
from cellfabric.collectives.perf import PerfRow, bus_factor, busbw_gbps, format_table


@pytest.mark.parametrize(("collective", "n", "factor"), [
    ("all-reduce", 8, 1.75), ("all-reduce", 2, 1.0), ("reduce-scatter", 4, 0.75),
    ("all-gather", 5, 0.8), ("all-to-all", 16, 0.9375), ("broadcast", 8, 1.0),
])
def test_bus_factors(collective: str, n: int, factor: float) -> None:
    assert bus_factor(collective, n) == pytest.approx(factor)


def test_busbw_of_an_all_reduce() -> None:
    """1 GB in 10 ms over 8 ranks: algbw 100 GB/s, busbw 175 GB/s."""
    assert busbw_gbps("all-reduce", 8, 10**9, 0.01) == pytest.approx(175.0)
    with pytest.raises(ScheduleError, match="no bus bandwidth factor for 'gather'"):
        bus_factor("gather", 8)


def test_table_has_nccl_tests_columns_per_collective() -> None:
    rows = [PerfRow("all-reduce", "ring", 8, 1 << 20, 100e-6),
            PerfRow("all-reduce", "ring", 8, 1024, 5e-6),
            PerfRow("all-gather", "ring", 8, 4096, 2e-6)]
    lines = format_table(rows).splitlines()
    assert lines[0] == "# all-reduce (ring), 8 ranks"
    assert lines[1].split() == ["#", "size", "count", "type", "time", "algbw", "busbw"]
    assert lines[3].split() == ["1024", "256", "float", "5.00", "0.20", "0.36"]
    assert lines[4].split() == ["1048576", "262144", "float", "100.00", "10.49", "18.35"]
    assert lines[5] == "# all-gather (ring), 8 ranks"
    assert lines[8].split() == ["4096", "1024", "float", "2.00", "2.05", "1.79"]
