"""``--workload train:SPEC`` and ``--workload trace:FILE`` as the harness's workloads.

Ranks are the fabric's hosts in the order given (the first ``tp x pp x dp`` of them for a
model; the others stay idle): on a fabric of AI servers, its servers' GPUs in order
(``topologies.servers.ranks``, chosen by `run_cli.prepare_workload`). A rank's server is the
host's ``server_of`` (its AI server, or ``--gpus-per-server G``: G consecutive hosts per
server), else its leaf. A model's TP groups must each lie inside
one server when servers are given (TP traffic is the intra-server kind).
"""

from __future__ import annotations

from pathlib import Path

from cellfabric.collectives.iteration import IterationWorkload, lower_iteration
from cellfabric.collectives.trace import load_trace
from cellfabric.collectives.train import ModelSpec, iteration_calls, parse_model
from cellfabric.core.workloads import WorkloadError, WorkloadRequest


def _check_tp_in_servers(m: ModelSpec, hosts: list[str], server_of: dict[str, str],
                         where: str) -> None:
    for first in range(0, m.world, m.tp):
        group = hosts[first:first + m.tp]
        servers = {server_of.get(h, h) for h in group}
        if len(servers) > 1:
            raise WorkloadError(f"{where}: tp {m.tp} group {', '.join(group)} spans servers "
                                f"{', '.join(sorted(servers))} (TP stays inside a server: "
                                "tp must divide --gpus-per-server)")


def iteration_workload(kind: str, arg: str, r: WorkloadRequest) -> IterationWorkload:
    where = f"--workload {kind}:{arg}"
    hosts = list(r.hosts)
    if kind == "train":
        model = parse_model(arg)
        if model.world > len(hosts):
            raise WorkloadError(f"{where}: tp x pp x dp = {model.world} ranks, the topology "
                                f"has {len(hosts)} hosts")
        hosts = hosts[:model.world]
        if r.server_of:
            _check_tp_in_servers(model, hosts, r.server_of, where)
        calls = iteration_calls(model)
        if not calls:
            raise WorkloadError(f"{where}: this model sends nothing (tp, pp and dp are all 1)")
    else:
        calls = load_trace(Path(arg), len(hosts))
    servers_of = r.server_of or r.leaf_of
    servers = [servers_of.get(h, h) for h in hosts] if servers_of else None
    return lower_iteration(calls, hosts, kind, r.channels, r.chunk_size, servers,
                           r.group_order)
