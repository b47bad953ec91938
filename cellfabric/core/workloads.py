"""Traffic patterns as plain data: who sends how much to whom, in which step.

A workload is a list of ``Step``s; every ``Transfer`` of a step runs concurrently, and a step
starts only when every transfer of the one before has completed (all-reduce's "each step
waits for the slowest"). The one-shot patterns (permutation, incast, all-to-all) are one step.

Offered load (``load``, permutation and all-to-all): each sending host is offered that fraction
of its link rate; its messages arrive as a seeded Poisson process (hosts.arrivals), ``count``
per flow, instead of back to back. All-to-all splits a host's load evenly over its N-1 flows.
Incast and all-reduce are synchronized bursts by definition, so they take no load.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple


class WorkloadError(ValueError):
    pass


@dataclass(frozen=True)
class Transfer:
    src: str
    dst: str
    size: int  # bytes per message
    count: int  # messages
    sport: int | None = None  # UDP source port (default: chosen per flow by the runner)
    load: float = 0.0  # fraction of the sender's link rate this flow offers; 0 = back to back
    arrival_seed: int = 0  # seed of this flow's arrival process (with load)
    # collective workloads: the channel (NCCL's ring or tree) the flow belongs to; two
    # channels' sends between one pair of hosts are two flows, each on its own queue pair
    channel: int = 0
    # the NIC ports (indices into the host's leaves) the sender uses; None: all of them
    nics: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Step:
    transfers: tuple[Transfer, ...]


@dataclass(frozen=True)
class Workload:
    name: str
    steps: tuple[Step, ...]
    load: float = 0.0  # offered load per sending host (configured); 0 = back to back

    @property
    def total_bytes(self) -> int:
        return sum(t.size * t.count for s in self.steps for t in s.transfers)

    def flows(self) -> list[Transfer]:
        return [t for s in self.steps for t in s.transfers]


def arrival_seed(seed: int, src: str, dst: str) -> int:
    """A flow's own arrival seed from the run's (stable across processes, unlike hash())."""
    return zlib.crc32(f"{seed}:{src}>{dst}".encode())


def check_load(load: float) -> None:
    if not 0 < load <= 1:
        raise WorkloadError(f"--load {load!r}: expected the fraction of each host's link rate "
                            "offered, 0 < load <= 1 (e.g. 0.3)")


def permutation(hosts: list[str], size: int, count: int, seed: int = 1,
                cross_leaf: dict[str, str] | None = None, load: float = 0.0) -> Workload:
    """Every host sends to exactly one other and receives from exactly one (a derangement).

    With ``cross_leaf`` (host -> leaf), destinations are on another leaf when possible, so
    all traffic crosses the spine layer, where path choice matters."""
    if len(hosts) < 2:
        raise WorkloadError("permutation needs at least 2 hosts")
    rng = random.Random(seed)
    for _ in range(1000):
        dsts = hosts[:]
        rng.shuffle(dsts)
        if any(s == d for s, d in zip(hosts, dsts, strict=True)):
            continue
        if cross_leaf and any(cross_leaf[s] == cross_leaf[d]
                              for s, d in zip(hosts, dsts, strict=True)):
            continue
        break
    else:
        dsts = _cross_group_shift(hosts, cross_leaf) if cross_leaf else None
        # No cross-leaf derangement (e.g. one leaf): a shift is always a derangement.
        dsts = dsts or hosts[1:] + hosts[:1]
    if load:
        check_load(load)
    return Workload("permutation", (Step(tuple(
        Transfer(s, d, size, count, load=load, arrival_seed=arrival_seed(seed, s, d) if load else 0)
        for s, d in zip(hosts, dsts, strict=True))),), load=load)


def _cross_group_shift(hosts: list[str], group_of: dict[str, str]) -> list[str] | None:
    """A derangement sending every host out of its group, found without chance (random
    shuffles rarely find one when groups are large: 16 groups of 8 take ~3,000 tries): hosts
    grouped in a row, each sends m + 1 places on, m the largest group, which leaves its group
    and, when n > 2m, lands past the group's start after wrapping too. The extra place moves
    each host to another position in the next group (on a rail fabric: another rail).
    None when no group-leaving shift exists (n <= 2m)."""
    order = sorted(hosts, key=lambda h: (list(dict.fromkeys(group_of[x] for x in hosts))
                                         .index(group_of[h]), hosts.index(h)))
    sizes: dict[str, int] = {}
    for h in hosts:
        sizes[group_of[h]] = sizes.get(group_of[h], 0) + 1
    m, n = max(sizes.values()), len(hosts)
    if n <= 2 * m:
        return None
    dst_of = {order[i]: order[(i + m + 1) % n] for i in range(n)}
    return [dst_of[h] for h in hosts]


def incast(hosts: list[str], senders: int, size: int, count: int,
           receiver: str | None = None) -> Workload:
    """``senders`` hosts send to one receiver at once (N-to-1)."""
    receiver = receiver or hosts[-1]
    others = [h for h in hosts if h != receiver]
    if not 1 <= senders <= len(others):
        raise WorkloadError(f"incast {senders}:1 needs {senders} senders besides {receiver}, "
                            f"the topology has {len(others)}")
    return Workload(f"incast-{senders}:1", (Step(tuple(
        Transfer(s, receiver, size, count) for s in others[:senders])),))


def all_to_all(hosts: list[str], size: int, count: int, load: float = 0.0,
               seed: int = 1) -> Workload:
    """Every host sends to every other; with ``load``, each of a host's N-1 flows offers
    load / (N-1) of its link, so the host as a whole is offered ``load``."""
    if load:
        check_load(load)
    share = load / max(1, len(hosts) - 1)
    return Workload("all-to-all", (Step(tuple(
        Transfer(s, d, size, count, load=share, arrival_seed=arrival_seed(seed, s, d) if load else 0)
        for s in hosts for d in hosts if s != d)),), load=load)


def ring_allreduce(hosts: list[str], size: int) -> Workload:
    """Ring all-reduce of a ``size``-byte buffer over N hosts: 2(N-1) steps (reduce-scatter,
    then all-gather), in each of which every host sends one chunk of size/N to its right-hand
    neighbour."""
    n = len(hosts)
    if n < 2:
        raise WorkloadError("all-reduce needs at least 2 hosts")
    chunk = max(1, -(-size // n))
    step = Step(tuple(Transfer(hosts[i], hosts[(i + 1) % n], chunk, 1) for i in range(n)))
    return Workload("allreduce", tuple(step for _ in range(2 * (n - 1))))


def ring_order(hosts: list[str], leaf_of: dict[str, str],
               pod_of: dict[str, str] | None = None) -> list[str]:
    """Ranks in the order a collective library lays a ring over a fabric it is told spans
    several leaves: one host of every leaf in turn (leaves taken one per pod in turn), then
    the next host of every leaf, ... So every ring hop leaves its leaf, and its pod when there
    are several: the ring's traffic crosses the fabric, where path choice decides how fast it
    goes, instead of staying under one leaf switch. With one leaf the order is unchanged.

    ``leaf_of``: host -> leaf; ``pod_of``: leaf -> pod (None: one pod). Hosts, leaves and
    pods keep the order they first appear in ``hosts``."""
    by_leaf: dict[str, list[str]] = {}
    for h in hosts:
        by_leaf.setdefault(leaf_of.get(h, h), []).append(h)
    by_pod: dict[str, list[str]] = {}
    for leaf in by_leaf:
        by_pod.setdefault((pod_of or {}).get(leaf, ""), []).append(leaf)
    leaves = _interleave(list(by_pod.values()))
    return _interleave([by_leaf[leaf] for leaf in leaves])


def _interleave(groups: list[list[str]]) -> list[str]:
    """The first of every group, then the second of every group, ..."""
    out: list[str] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out


@dataclass(frozen=True)
class WorkloadRequest:
    """What a workload is built from: the command line's choices and the fabric's layout."""

    hosts: list[str]
    size: int
    count: int
    senders: int | None = None
    leaf_of: dict[str, str] | None = None
    pod_of: dict[str, str] | None = None
    seed: int = 1
    load: float = 0.0
    channels: int = 1  # collective workloads: NCCL-style parallel rings/trees
    chunk_size: int | None = None  # collective workloads: pipelining slice in bytes
    server_of: dict[str, str] | None = None  # host -> server (hierarchical collectives)
    # collective workloads: each channel's rank order (the channel scheduler's; None: rank order)
    order: Callable[[int, list[int]], list[int]] | None = None
    # train:/trace: workloads: a call's rank-order hook from its group's hosts (the channel
    # scheduler's order_over; None: rank order)
    group_order: Callable[[list[str]], Callable[[int, list[int]], list[int]]] | None = None


class WorkloadKind(NamedTuple):
    build: Callable[[WorkloadRequest], Workload]
    takes_load: bool  # messages can arrive as a Poisson process (--load)


# One entry per workload; the CLI's --workload choices and --load's rule derive from it.
REGISTRY: dict[str, WorkloadKind] = {
    "permutation": WorkloadKind(lambda r: permutation(r.hosts, r.size, r.count, seed=r.seed,
                                                      cross_leaf=r.leaf_of, load=r.load), True),
    "incast": WorkloadKind(lambda r: incast(r.hosts, r.senders or len(r.hosts) - 1, r.size,
                                            r.count), False),
    "all-to-all": WorkloadKind(lambda r: all_to_all(r.hosts, r.size, r.count, load=r.load,
                                                    seed=r.seed), True),
    "allreduce": WorkloadKind(lambda r: ring_allreduce(
        ring_order(r.hosts, r.leaf_of, r.pod_of) if r.leaf_of else r.hosts, r.size), False),
}


def _collective(algorithm: str) -> WorkloadKind:
    """A collective library schedule (cellfabric.collectives) lowered to steps; the ranks
    are the hosts in order, servers the hosts' ``server_of`` (default: their leaf)."""
    def build(r: WorkloadRequest) -> Workload:
        from cellfabric.collectives.lower import collective_workload

        return collective_workload(algorithm, r.hosts, r.size, r.channels, r.chunk_size,
                                   r.server_of or r.leaf_of, order=r.order)
    return WorkloadKind(build, False)


def _register_collectives() -> tuple[str, ...]:
    from cellfabric.collectives.registry import ALGORITHMS

    for name, algo in ALGORITHMS.items():
        REGISTRY[algo.workload] = _collective(name)
    return tuple(algo.workload for algo in ALGORITHMS.values())


COLLECTIVE_WORKLOADS = _register_collectives()


def _iteration(kind: str) -> Callable[[str, WorkloadRequest], Workload]:
    """``train:SPEC`` (a model description) and ``trace:FILE`` (a JSON list of collectives):
    a sequence of collectives over the hosts as ranks (cellfabric.collectives.iteration)."""
    def build(arg: str, r: WorkloadRequest) -> Workload:
        from cellfabric.collectives.workload import iteration_workload

        return iteration_workload(kind, arg, r)
    return build


# --workload PREFIX:ARGUMENT
PREFIXED: dict[str, Callable[[str, WorkloadRequest], Workload]] = {
    "train": _iteration("train"), "trace": _iteration("trace")}


class _WorkloadNames(tuple):
    """The registry's names; ``in`` also accepts PREFIX:ARGUMENT (argparse's choices)."""

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or (
            isinstance(name, str) and name.partition(":")[0] in PREFIXED and ":" in name)


WORKLOADS = _WorkloadNames(list(REGISTRY) + [f"{p}:..." for p in PREFIXED])
LOAD_WORKLOADS = tuple(name for name, kind in REGISTRY.items() if kind.takes_load)


def make_workload(name: str, hosts: list[str], size: int, count: int,
                  senders: int | None = None, leaf_of: dict[str, str] | None = None,
                  seed: int = 1, load: float | None = None,
                  pod_of: dict[str, str] | None = None, channels: int | None = None,
                  chunk_size: int | None = None,
                  server_of: dict[str, str] | None = None,
                  order: Callable[[int, list[int]], list[int]] | None = None,
                  group_order: Callable[[list[str]], Callable[[int, list[int]], list[int]]]
                  | None = None) -> Workload:
    prefix, _, argument = name.partition(":")
    if argument and prefix in PREFIXED:
        if load is not None:
            raise WorkloadError(f"--load does not apply to --workload {prefix}:")
        return PREFIXED[prefix](argument, WorkloadRequest(
            hosts, size, count, senders, leaf_of, pod_of, seed, 0.0,
            1 if channels is None else channels, chunk_size, server_of,
            group_order=group_order))
    kind = REGISTRY.get(name)
    if kind is None:
        raise WorkloadError(f"unknown workload '{name}' (expected one of {', '.join(WORKLOADS)})")
    if load is not None and not kind.takes_load:
        raise WorkloadError(f"--load does not apply to --workload {name}: it is a synchronized "
                            f"burst; offered load applies to {' and '.join(LOAD_WORKLOADS)}")
    if (channels is not None or chunk_size is not None) and name not in COLLECTIVE_WORKLOADS:
        raise WorkloadError(f"--channels and --chunk-size apply to the collective workloads "
                            f"({', '.join(COLLECTIVE_WORKLOADS)}), not to {name}")
    if load is not None:
        check_load(load)
        if count < 1:
            raise WorkloadError(f"--load needs --count >= 1 messages per flow (got {count})")
    return kind.build(WorkloadRequest(hosts, size, count, senders, leaf_of, pod_of, seed,
                                      load or 0.0, 1 if channels is None else channels,
                                      chunk_size, server_of, order))
