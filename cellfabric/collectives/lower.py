"""A schedule as the harness's workload: one Step per DAG level (a send runs once every send
it waits for has: the level before it has ended), its sends as concurrent Transfers, a
chunk's bytes as a message's size. The harness's barrier per step is stricter than the DAG
(a send waits for its whole level, not only for its own dependencies), so a run's time is
an upper bound of the schedule's on that fabric.

A step's flows are keyed by (source, destination, channel): sends of one level and one
channel between the same two ranks become one Transfer of that many messages (one message
of their total when their sizes differ); another channel's sends between that pair are a
Transfer of their own (its own queue pair and UDP source port, so the fabric can hash it
elsewhere, and the channel scheduler can place it). Sends of 0 bytes (chunks of a buffer
smaller than the chunk count) move nothing and are left out, and so are levels left empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from cellfabric.collectives.registry import ALGORITHMS, build
from cellfabric.collectives.schedule import (
    CollectiveSpec,
    OrderFn,
    Schedule,
    ScheduleError,
    rank_order,
)
from cellfabric.core.workloads import Step, Transfer, Workload, WorkloadError


def lower(schedule: Schedule, hosts: Sequence[str], name: str) -> Workload:
    if len(hosts) != schedule.nranks:
        raise WorkloadError(f"{name}: {len(hosts)} hosts for a schedule of "
                            f"{schedule.nranks} ranks")
    steps: list[Step] = []
    for level in schedule.levels():
        sizes: dict[tuple[str, str, int], list[int]] = {}
        for send in level:
            if send.nbytes:
                key = (hosts[send.src], hosts[send.dst], send.channel)
                sizes.setdefault(key, []).append(send.nbytes)
        transfers = tuple(Transfer(src, dst, got[0], len(got), channel=ch)
                          if len(set(got)) == 1 else Transfer(src, dst, sum(got), 1, channel=ch)
                          for (src, dst, ch), got in sizes.items())
        if transfers:
            steps.append(Step(transfers))
    return Workload(name, tuple(steps))


def collective_workload(algorithm: str, hosts: Sequence[str], size: int, channels: int = 1,
                        chunk_size: int | None = None,
                        server_of: dict[str, str] | None = None,
                        order: OrderFn | None = None) -> Workload:
    """``hosts`` are the ranks in order; ``size`` nccl-tests' size of the collective;
    ``server_of`` host -> server (hierarchical algorithms); ``order`` each channel's rank
    order (the channel scheduler's; default rank order)."""
    algo = ALGORITHMS[algorithm]
    if len(hosts) < 2:
        raise WorkloadError(f"{algo.workload} needs at least 2 hosts")
    servers = tuple(server_of.get(h, h) for h in hosts) if server_of else None
    try:
        schedule = build(algorithm, CollectiveSpec(len(hosts), size, channels, chunk_size,
                                                   servers=servers, order=order or rank_order))
    except ScheduleError as exc:
        raise WorkloadError(f"--workload {algo.workload}: {exc}") from None
    return lower(schedule, hosts, algo.workload)


def collective_time_s(metrics: dict) -> float:
    """A collective's time in a run's metrics.json: its steps' times, summed (each step
    starts when the one before has ended); the simulator's step time is virtual, from the
    step's start to its last sender's end. A one-step workload has no step list: its
    slowest message."""
    steps = metrics.get("steps") or []
    if steps:
        times = [st.get("sim_s", st.get("duration_s")) for st in steps]
    else:
        times = [max((m.get("fct_s") for m in metrics.get("messages", [])), default=None)]
    if not times or None in times:
        raise WorkloadError("the run's metrics do not time every step of the collective")
    return float(sum(times))
