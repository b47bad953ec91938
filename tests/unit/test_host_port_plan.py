"""The control plane binds every host-facing port of every leaf to the host NIC behind it
(p4src/include/isolation.p4 HostPortGuard): that NIC's MAC, the host's IPv4 address and its
tenant, on both leaves of a dual-homed host, and nothing on uplinks or spines."""

from __future__ import annotations

from pathlib import Path

import yaml

from controlplane.entities import TableEntry
from controlplane.fabric_plan import DROP_REASONS, T_HOST_PORT, plan_fabric
from topologies.model import load_topology, parse_topology

TOPO_DIR = Path(__file__).resolve().parents[2] / "topologies"
DEFINES = Path(__file__).resolve().parents[2] / "p4src" / "include" / "defines.p4"


def _bindings(plan) -> dict[int, dict]:
    """port -> bind_host_port params of one switch's plan."""
    out: dict[int, dict] = {}
    for e in plan.entities:
        if isinstance(e, TableEntry) and e.table == T_HOST_PORT:
            assert e.action == "MyIngress.guard.bind_host_port"
            port = e.match["standard_metadata.ingress_port"]
            assert port not in out, f"port {port} bound twice"
            out[port] = dict(e.params)
    return out


def test_dual_homed_hosts_bound_on_both_leaves_with_each_nics_mac() -> None:
    data = yaml.safe_load((TOPO_DIR / "dual-homed.yaml").read_text())
    data["fabric"]["tenants"] = {"blue": ["h1", "h4"], "red": ["h2", "h3"]}
    topo = parse_topology(data)
    plans = plan_fabric(topo)
    tenant = {"h1": 1, "h4": 1, "h2": 2, "h3": 2}  # file order: blue 1, red 2
    for leaf, nic in (("l1", 0), ("l2", 1)):
        bound = _bindings(plans[leaf])
        expected = {}
        for name, host in topo.hosts.items():
            (port,) = topo.port_of(leaf, name)
            # the second NIC port's MAC: first octet 0x06 instead of 0x02 (HostSpec.nic_mac)
            mac = host.mac if nic == 0 else "06" + host.mac[2:]
            expected[port] = {"tenant": tenant[name], "mac": mac, "ip": host.ip}
        assert bound == expected, leaf
    for spine in ("s1", "s2"):
        assert _bindings(plans[spine]) == {}


def test_every_leaf_host_port_bound_and_no_uplink() -> None:
    topo = load_topology(TOPO_DIR / "fat-tree.yaml")
    plans = plan_fabric(topo)
    bound_total = 0
    for name, plan in plans.items():
        bound = _bindings(plan)
        for port, params in bound.items():
            peer, _ = topo.peer(name, port)
            assert peer in topo.hosts, f"{name} port {port} faces {peer}, not a host"
            assert params["ip"] == topo.hosts[peer].ip
            assert params["tenant"] == 0  # the file declares no tenants
        bound_total += len(bound)
    # one NIC port per host in this topology: every one is bound exactly once
    assert bound_total == sum(len(h.leaves) for h in topo.hosts.values())


def test_drop_reason_names_match_defines() -> None:
    """Every DROP_* value of defines.p4 has a name in DROP_REASONS, and the same number."""
    values = {}
    for line in DEFINES.read_text().splitlines():
        parts = line.split()
        if line.startswith("const bit<8> DROP_") and parts[2] != "DROP_NONE":
            values[parts[2].removeprefix("DROP_").lower()] = int(parts[4].rstrip(";"))
    assert {v: k for k, v in values.items()} == DROP_REASONS
