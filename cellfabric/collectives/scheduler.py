"""The channel scheduler: which rank order each channel's ring takes, and which path (UDP
source port, NIC ports) each channel's send of a step takes through the fabric.

Three policies, one registry entry each (``--channel-policy``):

- ``static``: as NCCL: every channel in rank order, paths left to the fabric's hashing; each
  channel's flow has its own queue pair, so its own source port by the harness's fixed rule
  (core.hostplan.flow_sport). The plain lowering, unchanged.
- ``topology``: rank orders that respect rails (a ring's hop from one server to the next
  stays on one GPU index, so on one rail; channel c's rings use rails c-1 and c) or, without
  servers, alternate direction per channel; then per step each fabric send gets the source
  port whose ECMP path (fabricpaths.PathModel: the topology, the controller's next hops and
  the switches' hash) shares the fewest switch links with the sends placed before it.
- ``dynamic``: ``topology``'s orders and placement, re-planned before every step over the
  links that are up then (a failed link or NIC port moves the sends that used it) and away
  from the queues the run's telemetry saw deep in the step before (the sampled queue depths,
  and INT hop records when the run has a collector).

Placement only matters under ECMP: sprayed cells take every path whatever the port.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from cellfabric.collectives.fabricpaths import Hop, LinkSet, PathModel
from cellfabric.collectives.schedule import OrderFn
from cellfabric.core.workloads import Step, Transfer, WorkloadError
from topologies.model import Topology

CANDIDATE_PORTS = 64  # source ports tried per send (the first without overlap ends the search)
HOT_FRACTION = 0.5  # a queue is hot when its depth reached half of the deepest one seen


@dataclass
class FabricView:
    """What the scheduler knows of a run before a step: the links down (pairs of node names,
    host links for NIC ports) and, per directed switch link, how deep its queue got in the
    step before (packets; empty: no telemetry)."""

    down: LinkSet = frozenset()
    queue_depth: dict[Hop, float] = field(default_factory=dict)


class Policy(NamedTuple):
    name: str
    help: str
    orders: bool  # lays out rank orders (rails / alternating directions)
    places: bool  # picks each send's source port
    live: bool  # re-plans over the run's live links and telemetry


POLICIES: dict[str, Policy] = {p.name: p for p in (
    Policy("static", "as NCCL: rank order, paths by the fabric's hash", False, False, False),
    Policy("topology", "rails respected, sends on disjoint uplinks", True, True, False),
    Policy("dynamic", "topology's, re-planned each step around failures and deep queues",
           True, True, True),
)}


def candidate_port(src: str, dst: str, channel: int, k: int) -> int:
    """The k-th source port tried for a channel's send (spread over the RoCEv2 range as
    hostplan.flow_sport spreads its ports: CRC hashes are linear, consecutive ports are not
    independent draws)."""
    digest = zlib.crc32(f"{src}>{dst}/c{channel}/{k}".encode()) * 2654435761
    return 49152 + (digest >> 7) % 16384


class ChannelScheduler:
    """One run's scheduler: ``order`` is the collective's rank-order hook, ``place`` the
    runners' hook before each step (plans are cached per step shape, links down and hot
    links, so a ring's identical steps are planned once)."""

    def __init__(self, policy: str, topo: Topology, hosts: Sequence[str]) -> None:
        if policy not in POLICIES:
            raise WorkloadError(f"--channel-policy {policy}: expected one of "
                                f"{', '.join(POLICIES)}")
        self.policy = POLICIES[policy]
        self.topo = topo
        self.hosts = list(hosts)
        self._models: dict[LinkSet, PathModel] = {}
        self._cache: dict[tuple, tuple[Step, dict]] = {}
        self._last: dict[tuple[str, str, int], list[Hop]] = {}
        self.decisions: list[dict] = []  # per step placed: what the scheduler did

    # -- rank orders (the collective's CollectiveSpec.order hook) --------------------------------
    def order(self, channel: int, ranks: list[int]) -> list[int]:
        return self.order_over(self.hosts)(channel, ranks)

    def order_over(self, hosts: Sequence[str]) -> OrderFn:
        """The rank-order hook of a collective over ``hosts`` (its rank -> host; a training
        iteration's call is over a group of the run's hosts): a ring or tree over all of
        them laid out by the policy, any other subset (a hierarchical algorithm's leaders)
        in rank order."""
        group = list(hosts)

        def order(channel: int, ranks: list[int]) -> list[int]:
            if not self.policy.orders or sorted(ranks) != list(range(len(group))):
                return list(ranks)
            rail = rail_ring(self.topo, [group[r] for r in ranks], channel)
            if rail is not None:
                index = {h: r for r, h in enumerate(group)}
                return [index[h] for h in rail]
            return list(ranks) if channel % 2 == 0 else list(reversed(ranks))
        return order

    # -- paths (the runners call this before each step) -----------------------------------------
    def place(self, index: int, step: Step, view: FabricView | None = None) -> Step:
        if not self.policy.places:
            return step
        view = view if view is not None and self.policy.live else FabricView()
        hot = hot_links(view.queue_depth)
        key = (tuple((t.src, t.dst, t.channel) for t in step.transfers), view.down, hot)
        if key not in self._cache:
            self._cache[key] = self._plan(step, self._model(view.down), hot)
        placed, info = self._cache[key]
        moved = self._moved(info["paths"], view.down)
        self.decisions.append({"step": index, **info, "moved": moved,
                               "down": sorted("-".join(sorted(k)) for k in view.down)})
        return placed

    def _model(self, down: LinkSet) -> PathModel:
        if down not in self._models:
            self._models[down] = PathModel(self.topo, down)
        return self._models[down]

    def _plan(self, step: Step, model: PathModel, hot: frozenset[Hop]) -> tuple[Step, dict]:
        load: Counter[Hop] = Counter()
        ups: Counter[Hop] = Counter()
        out: list[Transfer] = []
        paths: dict[tuple[str, str, int], list[Hop]] = {}
        for t in step.transfers:
            best = _best_port(model, t, load, hot)
            if best is None:  # NVLink or no fabric path: nothing to place
                out.append(t)
                continue
            sport, links = best
            load.update(model.fabric_links(links))
            ups.update(set(model.uplinks(links)))
            paths[(t.src, t.dst, t.channel)] = links
            live = model.live_leaves(t.src)
            leaves = self.topo.hosts[t.src].leaves
            nics = tuple(i for i, leaf in enumerate(leaves) if leaf in live)
            out.append(replace(t, sport=sport, nics=nics if len(nics) < len(leaves) else None))
        shared = sum(1 for n in ups.values() if n > 1)
        return Step(tuple(out)), {"paths": paths, "shared_uplinks": shared}

    def _moved(self, paths: dict[tuple[str, str, int], list[Hop]], down: LinkSet) -> int:
        """Sends whose path in the step before used a link that is down now."""
        moved = sum(1 for key in paths
                    if any(frozenset(h) in down for h in self._last.get(key, ())))
        self._last.update(paths)
        return moved

    def summary(self) -> dict:
        """For the run's metrics: the policy and, per step placed, the uplinks two sends
        share by the scheduler's own model and the sends it moved off failed links."""
        return {"policy": self.policy.name,
                "steps": [{k: v for k, v in d.items() if k != "paths"} for d in self.decisions]}


def _best_port(model: PathModel, t: Transfer, load: Counter[Hop],
               hot: frozenset[Hop]) -> tuple[int, list[Hop]] | None:
    best: tuple[tuple[int, int, int, int], int, list[Hop]] | None = None
    for k in range(CANDIDATE_PORTS):
        sport = candidate_port(t.src, t.dst, t.channel, k)
        links = model.path(t.src, t.dst, sport)
        fabric = model.fabric_links(links)
        if not links:
            return None
        if not fabric:
            return sport, links  # one leaf: no switch link to choose
        # uplinks first (the links the brief's "no two on one uplink" is about; a fat-tree's
        # downlinks follow from the core the uplinks chose), then every switch link, then
        # the queues telemetry saw deep, then the total overlap
        cost = (max((load[h] for h in model.uplinks(links)), default=0),
                max(load[h] for h in fabric), sum(h in hot for h in fabric),
                sum(load[h] for h in fabric))
        if best is None or cost < best[0]:
            best = (cost, sport, links)
            if cost == (0, 0, 0, 0):
                break
    assert best is not None
    return best[1], best[2]


def hot_links(depths: dict[Hop, float]) -> frozenset[Hop]:
    """The directed links whose queue got at least HOT_FRACTION of the deepest one's depth
    (a set, so that steps with the same hot links share one plan)."""
    deepest = max(depths.values(), default=0.0)
    if deepest <= 1:
        return frozenset()
    return frozenset(h for h, d in depths.items() if d >= HOT_FRACTION * deepest)


def rail_ring(topo: Topology, hosts: list[str], channel: int) -> list[str] | None:
    """A ring over GPUs of equal servers (each holding GPUs of the same indices: every GPU,
    or a data-parallel group's few) whose hops between servers stay on one rail: servers in
    the order their GPUs come in ``hosts``; with the indices i_0 < ... < i_m-1, the even
    servers' GPUs from i_c up to i_c-1, the odd ones' back down from i_c-1 to i_c, so
    server j leaves on the rail server j + 1 enters on (with an odd number of servers the
    wrap to the first changes rail). None when the hosts are not such GPUs."""
    servers: dict[str, dict[int, str]] = {}
    for h in hosts:
        spec = topo.hosts[h]
        if spec.server is None or spec.gpu is None:
            return None
        servers.setdefault(spec.server, {})[spec.gpu] = h
    indices = {tuple(sorted(g)) for g in servers.values()}
    if len(indices) != 1 or len(servers) < 2:
        return None
    (idx,) = indices
    m, c = len(idx), channel % len(idx)
    up = [idx[(c + i) % m] for i in range(m)]
    down = [idx[(c - 1 - i) % m] for i in range(m)]
    ring: list[str] = []
    for j, gpu_hosts in enumerate(servers.values()):
        ring += [gpu_hosts[g] for g in (up if j % 2 == 0 else down)]
    return ring
