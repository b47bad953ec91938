"""A sequence of collectives (a training iteration's, or a user's trace) as one workload.

Each ``Call`` is one collective over a group of ranks, and waits for the calls it lists in
``after``. Calls are placed in phases by that DAG (a call's phase is one more than its
deepest dependency's), and the calls of one phase run concurrently: phase by phase, each
call is built with its algorithm (cellfabric.collectives), lowered to one step per DAG level
(lower.py), and step k of a phase is the union of step k of its calls' sends. Like lower.py's
barrier per level, a phase waits for the whole phase before it, not only for its calls'
dependencies, so the run's time is an upper bound of the DAG's.

A point-to-point send (pipeline parallelism) is the ``send`` op over a group [src, dst]: a
broadcast from the group's first rank, which the checker verifies like any collective.

The run's ``iteration`` section (``iteration_section``): communication time (the sum of the
steps' times), per call its op, group size, bytes, time (the sum of the times of the steps it
spans; a step shared with concurrent calls counts for each), nccl-tests' algbw and busbw
(perf.py; a send's busbw is its algbw, as sendrecv's), and the slowest rank (the largest sum,
over steps, of the latest completion among the messages it sends or receives in the step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cellfabric.collectives.lower import lower
from cellfabric.collectives.perf import algbw_gbps, busbw_gbps
from cellfabric.collectives.registry import ALGORITHMS, build
from cellfabric.collectives.schedule import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BROADCAST,
    REDUCE_SCATTER,
    CollectiveSpec,
    OrderFn,
    Schedule,
    ScheduleError,
    rank_order,
)
from cellfabric.core.workloads import Step, Transfer, Workload, WorkloadError

SEND = "send"
# op -> (the collective it computes, its default algorithm)
OPS: dict[str, tuple[str, str]] = {
    "all-reduce": (ALL_REDUCE, "allreduce-ring"),
    "reduce-scatter": (REDUCE_SCATTER, "reduce-scatter-ring"),
    "all-gather": (ALL_GATHER, "all-gather-ring"),
    "all-to-all": (ALL_TO_ALL, "all-to-all-pairwise"),
    "broadcast": (BROADCAST, "broadcast-chain"),
    SEND: (BROADCAST, "broadcast-chain"),
}


@dataclass(frozen=True)
class Call:
    op: str
    size: int  # nccl-tests' size of the collective (a send: its bytes)
    group: tuple[int, ...]  # ranks; a send: (src, dst)
    after: tuple[int, ...] = ()  # indices of the calls it waits for
    algorithm: str | None = None  # None: the op's default
    label: str = ""  # what it is in the iteration (e.g. "tp fwd mb0 layer1")

    @property
    def algorithm_name(self) -> str:
        return self.algorithm or OPS[self.op][1]


@dataclass(frozen=True)
class PlacedCall:
    call: Call
    phase: int
    first_step: int  # its first step in the workload
    steps: int  # how many steps it spans (0: it moves nothing)


@dataclass(frozen=True)
class IterationWorkload(Workload):
    """A workload that knows which of its steps each call spans."""

    calls: tuple[PlacedCall, ...] = ()
    hosts: tuple[str, ...] = ()  # rank -> host
    schedules: tuple[Schedule, ...] = field(default=(), repr=False, compare=False)


def check_calls(calls: Sequence[Call], nranks: int, where: str) -> None:
    """One-line errors naming the entry, the field and its value."""
    for i, c in enumerate(calls):
        at = f"{where} entry {i}"
        if c.op not in OPS:
            raise WorkloadError(f"{at}: op '{c.op}' is not one of {', '.join(OPS)}")
        if c.size < 1:
            raise WorkloadError(f"{at}: size {c.size} is not positive")
        bad = [r for r in c.group if not 0 <= r < nranks]
        if bad:
            raise WorkloadError(f"{at}: group rank {bad[0]} is out of range 0..{nranks - 1}")
        if len(set(c.group)) != len(c.group) or len(c.group) < 2:
            raise WorkloadError(f"{at}: group {list(c.group)} needs at least 2 distinct ranks")
        if c.op == SEND and len(c.group) != 2:
            raise WorkloadError(f"{at}: a send's group is [src, dst], got {list(c.group)}")
        for dep in c.after:
            if not 0 <= dep < i:
                raise WorkloadError(f"{at}: after {dep} is not an earlier entry (0..{i - 1})")
        algo = ALGORITHMS.get(c.algorithm_name)
        if algo is None or algo.collective != OPS[c.op][0]:
            fits = [a for a, x in ALGORITHMS.items() if x.collective == OPS[c.op][0]]
            raise WorkloadError(f"{at}: algorithm '{c.algorithm}' does not compute "
                                f"{c.op} (expected one of {', '.join(fits)})")


def phases(calls: Sequence[Call]) -> list[int]:
    depth: list[int] = []
    for c in calls:
        depth.append(1 + max((depth[d] for d in c.after), default=-1))
    return depth


def _schedule(c: Call, index: int, servers: Sequence[str] | None, channels: int,
              chunk_size: int | None, order: OrderFn) -> Schedule:
    group_servers = tuple(servers[r] for r in c.group) if servers else None
    try:
        return build(c.algorithm_name, CollectiveSpec(len(c.group), c.size, channels,
                                                      chunk_size, servers=group_servers,
                                                      order=order))
    except ScheduleError as exc:
        raise WorkloadError(f"collective {index} ({c.op} over {list(c.group)}): {exc}") from None


def _merge(steps: Sequence[Step]) -> Step:
    """Concurrent steps as one: the harness keys a step's flows by (source, destination,
    channel), so each channel's sends stay a flow of their own (the channel scheduler
    places them apart)."""
    sizes: dict[tuple[str, str, int], list[int]] = {}
    for st in steps:
        for t in st.transfers:
            sizes.setdefault((t.src, t.dst, t.channel), []).extend([t.size] * t.count)
    return Step(tuple(Transfer(s, d, got[0], len(got), channel=ch) if len(set(got)) == 1
                      else Transfer(s, d, sum(got), 1, channel=ch)
                      for (s, d, ch), got in sizes.items()))


def lower_iteration(calls: Sequence[Call], hosts: Sequence[str], name: str,
                    channels: int = 1, chunk_size: int | None = None,
                    servers: Sequence[str] | None = None,
                    group_order: Callable[[list[str]], OrderFn] | None = None,
                    ) -> IterationWorkload:
    """``hosts``: rank -> host; ``servers``: rank -> server (hierarchical algorithms);
    ``group_order``: a call's rank-order hook from its group's hosts (the channel
    scheduler's; default rank order)."""
    check_calls(calls, len(hosts), name)
    depth = phases(calls)
    by_phase: dict[int, list[int]] = {}
    for i, d in enumerate(depth):
        by_phase.setdefault(d, []).append(i)
    schedules = [_schedule(c, i, servers, channels, chunk_size,
                           group_order([hosts[r] for r in c.group]) if group_order
                           else rank_order)
                 for i, c in enumerate(calls)]
    steps: list[Step] = []
    placed: dict[int, PlacedCall] = {}
    for d in sorted(by_phase):
        lowered = {i: lower(schedules[i], [hosts[r] for r in calls[i].group], name).steps
                   for i in by_phase[d]}
        start, width = len(steps), max((len(s) for s in lowered.values()), default=0)
        for k in range(width):
            steps.append(_merge([s[k] for s in lowered.values() if k < len(s)]))
        for i, own in lowered.items():
            placed[i] = PlacedCall(calls[i], d, start, len(own))
    return IterationWorkload(name, tuple(steps), calls=tuple(placed[i] for i in range(len(calls))),
                             hosts=tuple(hosts), schedules=tuple(schedules))


def _step_times(metrics: dict[str, Any], nsteps: int) -> list[float | None]:
    """Each step's time: the simulator's virtual step time, else its slowest message."""
    rows = {st["step"]: st.get("sim_s", st.get("duration_s")) for st in metrics.get("steps") or []}
    if not rows:  # a one-step run has no step list: its slowest message
        fcts = [m.get("fct_s") for m in metrics.get("messages", [])]
        rows = {0: None if None in fcts else max(fcts, default=None)}
    return [rows.get(k) for k in range(nsteps)]


def _slowest_rank(w: IterationWorkload, metrics: dict[str, Any]) -> dict[str, Any] | None:
    latest: dict[tuple[int, str], float] = {}
    for m in metrics.get("messages", []):
        if m.get("fct_s") is None:
            return None
        for host in (m["src"], m["dst"]):
            key = (m["step"], host)
            latest[key] = max(latest.get(key, 0.0), float(m["fct_s"]))
    per_host: dict[str, float] = {}
    for (_, host), t in latest.items():
        per_host[host] = per_host.get(host, 0.0) + t
    if not per_host:
        return None
    host = max(per_host, key=lambda h: (per_host[h], h))
    return {"rank": w.hosts.index(host), "host": host, "time_s": per_host[host]}


def iteration_section(w: Workload, metrics: dict[str, Any]) -> dict[str, Any]:
    """The ``iteration`` section of a run's metrics.json ({} for other workloads)."""
    if not isinstance(w, IterationWorkload):
        return {}
    times = _step_times(metrics, len(w.steps))
    complete = None not in times
    rows = []
    for i, pc in enumerate(w.calls):
        own = times[pc.first_step:pc.first_step + pc.steps]
        t = float(sum(own)) if own and None not in own else None  # type: ignore[arg-type]
        c = pc.call
        collective, n = OPS[c.op][0], len(c.group)
        rows.append({"index": i, "op": c.op, "algorithm": c.algorithm_name, "label": c.label,
                     "group_size": n, "group": list(c.group), "bytes": c.size,
                     "phase": pc.phase, "first_step": pc.first_step, "steps": pc.steps,
                     "time_s": t,
                     "algbw_gbps": algbw_gbps(c.size, t) if t else None,
                     "busbw_gbps": busbw_gbps(collective, n, c.size, t) if t else None})
    return {"communication_time_s": float(sum(times)) if complete else None,  # type: ignore[arg-type]
            "steps": len(w.steps), "phases": 1 + max((pc.phase for pc in w.calls), default=-1),
            "collectives": rows, "slowest_rank": _slowest_rank(w, metrics)}


def format_iteration(section: dict[str, Any], limit: int = 12) -> str:
    """The report's lines: the total, the slowest rank, the slowest collectives (times in
    us in the simulator's microsecond runs, in ms in the emulation's)."""
    total, slow = section.get("communication_time_s"), section.get("slowest_rank")
    rows = section.get("collectives", [])
    unit, scale = ("ms", 1e3) if (total or 0.0) >= 1e-2 else ("us", 1e6)
    lines = [f"  iteration: {len(rows)} collectives in {section.get('phases')} phases, "
             f"{section.get('steps')} steps, communication "
             + (f"{scale * total:.2f} {unit}" if total is not None else "incomplete")]
    if slow:
        lines.append(f"  slowest rank {slow['rank']} ({slow['host']}): "
                     f"{scale * slow['time_s']:.2f} {unit} communicating")
    timed = sorted((r for r in rows if r["time_s"]), key=lambda r: -r["time_s"])[:limit]
    if timed:
        lines.append(f"  {'#':>4} {'op':<15} {'ranks':>5} {'bytes':>10} {'time ' + unit:>10} "
                     f"{'algbw':>7} {'busbw':>7}  (GB/s) what")
    for r in timed:
        lines.append(f"  {r['index']:>4} {r['op']:<15} {r['group_size']:>5} {r['bytes']:>10} "
                     f"{scale * r['time_s']:>10.2f} {r['algbw_gbps']:>7.3f} "
                     f"{r['busbw_gbps']:>7.3f}  {r['label']}")
    return "\n".join(lines)
