"""Bandwidth figures as nccl-tests reports them (its doc/PERFORMANCE.md).

algbw = S / t, with S nccl-tests' size: the buffer for all-reduce and broadcast, the whole
array for reduce-scatter (recvcount x n elements) and all-gather (sendcount x n), and what
each rank sends in all for all-to-all. busbw = algbw x a factor that makes it comparable to
the hardware's per-rank bandwidth whatever n: 2(n-1)/n for all-reduce, (n-1)/n for
reduce-scatter, all-gather and all-to-all, 1 for broadcast. Bandwidths in GB/s (10^9 bytes),
times in microseconds, as nccl-tests prints them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cellfabric.collectives.schedule import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BROADCAST,
    REDUCE_SCATTER,
    ScheduleError,
)

TYPE_BYTES = {"int8": 1, "half": 2, "bfloat16": 2, "float": 4, "int32": 4, "double": 8}


def bus_factor(collective: str, nranks: int) -> float:
    n = nranks
    factors = {ALL_REDUCE: 2 * (n - 1) / n, REDUCE_SCATTER: (n - 1) / n,
               ALL_GATHER: (n - 1) / n, ALL_TO_ALL: (n - 1) / n, BROADCAST: 1.0}
    if collective not in factors:
        raise ScheduleError(f"no bus bandwidth factor for '{collective}' (expected one of "
                            f"{', '.join(factors)})")
    return factors[collective]


def algbw_gbps(size_bytes: int, time_s: float) -> float:
    return size_bytes / time_s / 1e9


def busbw_gbps(collective: str, nranks: int, size_bytes: int, time_s: float) -> float:
    return algbw_gbps(size_bytes, time_s) * bus_factor(collective, nranks)


@dataclass(frozen=True)
class PerfRow:
    collective: str
    algorithm: str
    nranks: int
    size: int  # bytes, nccl-tests' size
    time_s: float
    dtype: str = "float"

    @property
    def count(self) -> int:
        return self.size // TYPE_BYTES[self.dtype]

    @property
    def algbw(self) -> float:
        return algbw_gbps(self.size, self.time_s)

    @property
    def busbw(self) -> float:
        return busbw_gbps(self.collective, self.nranks, self.size, self.time_s)


def format_table(rows: Iterable[PerfRow]) -> str:
    """One nccl-tests-like table per collective (and algorithm), rows by size."""
    groups: dict[tuple[str, str, int], list[PerfRow]] = {}
    for row in rows:
        groups.setdefault((row.collective, row.algorithm, row.nranks), []).append(row)
    out: list[str] = []
    for (collective, algorithm, nranks), group in groups.items():
        out += [f"# {collective} ({algorithm}), {nranks} ranks",
                f"#{'size':>12} {'count':>12} {'type':>8} {'time':>10} {'algbw':>8} "
                f"{'busbw':>8}",
                f"#{'(B)':>12} {'(elements)':>12} {'':>8} {'(us)':>10} {'(GB/s)':>8} "
                f"{'(GB/s)':>8}"]
        for r in sorted(group, key=lambda r: r.size):
            out.append(f" {r.size:>12} {r.count:>12} {r.dtype:>8} {r.time_s * 1e6:>10.2f} "
                       f"{r.algbw:>8.2f} {r.busbw:>8.2f}")
    return "\n".join(out)
