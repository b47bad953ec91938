"""AI servers and rail fabrics in the topology model: the generator's shapes (counted by hand
from the rail design), rails, dual-homed NICs, non-blocking leaves, reachability and hop
counts, the YAML servers section and its errors, ranks, and the spec and CLI forms."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from controlplane.fabric_plan import next_hops
from topologies.catalog import resolve_topology
from topologies.generators import generate, parse_spec, to_yaml
from topologies.model import Topology, TopologyError, parse_topology
from topologies.servers import ranks

ROOT = Path(__file__).resolve().parents[2]

# (spec, servers, gpus, leaves, spines, cores): counts worked out from the design by hand,
# e.g. 16x8 in 3 tiers: 2 pods of 8 servers; per pod 8 rails x 2 leaves of 8 GPU ports each,
# so 8 spines per pod; a spine then has 16 leaf links, so 16 cores.
SHAPES = [
    ("rail:servers=2,gpus=4", 2, 4, 8, 2, 0),
    ("rail:servers=3,gpus=3", 3, 3, 6, 3, 0),
    ("rail:servers=5,gpus=3,leaves-per-rail=3", 5, 3, 9, 4, 0),
    # pods of 1 and 2 servers: 1 + 2 spines, each with 4 leaf links, so 4 cores
    ("rail:servers=3,gpus=2,tiers=3", 3, 2, 8, 3, 4),
    ("rail:servers=16,gpus=8,tiers=3", 16, 8, 32, 16, 16),
    ("rail:servers=3,gpus=3,planes=2", 3, 3, 6, 6, 0),
    # pods of 2 and 3 servers, one leaf per rail and plane: 2 + 3 spines per plane, each
    # with 2 leaf links, so 2 cores per plane
    ("rail:servers=5,gpus=2,tiers=3,planes=2", 5, 2, 8, 10, 4),
]


def _roles(topo: Topology) -> Counter[str]:
    return Counter(sw.role for sw in topo.switches.values())


def _downlinks(topo: Topology, name: str) -> int:
    """Links to the tier below (hosts for a leaf)."""
    tier = topo.switches[name].tier
    peers = [lk.b if lk.a == name else lk.a for lk in topo.links_of(name)]
    return sum(1 for p in peers if p in topo.hosts or topo.switches[p].tier < tier)


def _uplinks(topo: Topology, name: str) -> int:
    tier = topo.switches[name].tier
    peers = [lk.b if lk.a == name else lk.a for lk in topo.links_of(name)]
    return sum(1 for p in peers if p in topo.switches and topo.switches[p].tier > tier)


def _plane_of(topo: Topology) -> dict[str, int]:
    """Switch -> connected component of the switch graph (hosts removed): its plane."""
    adj = topo.adjacency()
    plane: dict[str, int] = {}
    for start in topo.switches:
        if start in plane:
            continue
        todo = [start]
        plane[start] = len(set(plane.values()))
        while todo:
            for peer in adj.get(todo.pop(), []):
                if peer in topo.switches and peer not in plane:
                    plane[peer] = plane[start]
                    todo.append(peer)
    return plane


@pytest.mark.parametrize(("spec", "servers", "gpus", "leaves", "spines", "cores"), SHAPES)
def test_rail_shapes(spec: str, servers: int, gpus: int, leaves: int, spines: int,
                     cores: int) -> None:
    topo = generate(spec)
    assert len(topo.hosts) == servers * gpus
    assert len(topo.servers) == servers
    expected = {"leaf": leaves, "spine": spines} | ({"core": cores} if cores else {})
    assert _roles(topo) == expected
    # every pair of a server's GPUs has its NVLink
    assert len(topo.nvlinks) == servers * gpus * (gpus - 1) // 2


@pytest.mark.parametrize("spec", [s[0] for s in SHAPES])
def test_every_gpu_on_its_rail_with_two_ports_apart(spec: str) -> None:
    topo = generate(spec)
    planes = _plane_of(topo)
    two_planes = "planes=2" in spec
    rail_of_leaf: dict[str, set[int]] = {}
    for h in topo.hosts.values():
        assert h.gpu is not None and h.server in topo.servers
        assert topo.servers[h.server].gpus[h.gpu] == h.name
        assert len(h.leaves) == 2 and h.leaves[0] != h.leaves[1]
        if two_planes:
            assert planes[h.leaves[0]] != planes[h.leaves[1]]
        for leaf in h.leaves:
            rail_of_leaf.setdefault(leaf, set()).add(h.gpu)
    # GPU i of every server, and nothing else, on rail i's leaves
    assert all(len(rails) == 1 for rails in rail_of_leaf.values())
    assert set(rail_of_leaf) == {n for n, sw in topo.switches.items() if sw.role == "leaf"}
    assert len(set(planes.values())) == (2 if two_planes else 1)


@pytest.mark.parametrize("spec", [s[0] for s in SHAPES])
def test_non_blocking_uplinks(spec: str) -> None:
    topo = generate(spec)
    for name, sw in topo.switches.items():
        if sw.role == "leaf" or (sw.role == "spine" and "tiers=3" in spec):
            assert _uplinks(topo, name) == _downlinks(topo, name) > 0, name


@pytest.mark.parametrize("spec", ["rail:servers=16,gpus=8,tiers=3",
                                  "rail:servers=5,gpus=2,tiers=3,planes=2",
                                  "rail:servers=7,gpus=3,tiers=3,pods=3"])
def test_three_tiers_reach_every_rank(spec: str) -> None:
    topo = generate(spec)
    adj = topo.adjacency()
    for h in topo.hosts:
        reached = topo.distances(h, adj=adj)
        assert set(topo.hosts) <= set(reached), h


def test_hop_counts_same_rail_and_cross_rail() -> None:
    # two tiers, two leaves per rail: port q of every server on leaf q of its rail, so
    # same-rail GPUs share a leaf (host-leaf-host: 2 links) and cross-rail ones go up to a
    # spine (host-leaf-spine-leaf-host: 4), wherever their servers are
    topo = generate("rail:servers=3,gpus=4")
    by = {(h.server, h.gpu): h.name for h in topo.hosts.values()}
    d = topo.distances(by[("sv1", 2)])
    assert d[by[("sv3", 2)]] == 2
    assert d[by[("sv3", 1)]] == 4
    assert d[by[("sv1", 0)]] == 4  # same server, other rail: through the fabric, 4
    # three tiers, two pods: same rail in the same pod 2, across pods 6 (leaf-spine-core)
    topo = generate("rail:servers=4,gpus=2,tiers=3")
    by = {(h.server, h.gpu): h.name for h in topo.hosts.values()}
    d = topo.distances(by[("sv1", 0)])
    assert d[by[("sv2", 0)]] == 2
    assert d[by[("sv2", 1)]] == 4
    assert d[by[("sv3", 0)]] == 6
    assert d[by[("sv4", 1)]] == 6


def test_equal_cost_paths_cross_rail() -> None:
    # 4 servers per rail leaf: 4 uplinks, one to each of the 4 spines -> 4 next hops
    topo = generate("rail:servers=4,gpus=2")
    hops = next_hops(topo, set())
    src = next(h for h in topo.hosts.values() if (h.server, h.gpu) == ("sv1", 0))
    dst = next(h for h in topo.hosts.values() if (h.server, h.gpu) == ("sv2", 1))
    assert len(hops[src.leaves[0]][dst.name]) == 4


@pytest.mark.parametrize(("spec", "words"), [
    ("rail:servers=0", "servers=0"),
    ("rail:servers=2,gpus=0", "gpus=0"),
    ("rail:servers=2,tiers=4", "tiers=4"),
    ("rail:servers=2,planes=3", "planes=3"),
    ("rail:servers=2,leaves-per-rail=1", "two different leaves"),
    ("rail:servers=2,leaves-per-rail=5", "no GPU"),
    ("rail:servers=2,planes=2,leaves-per-rail=3", "no GPU"),
    ("rail:servers=3,tiers=3,pods=4", "pods=4"),
    ("rail:servers=3,pods=2", "pods=2"),
    ("rail:servers=2,cores=4", "tiers=3"),
    ("rail:servers=2,nvlink-rate=fast", "not a bit rate"),
    ("rail:servers=2,gpus=x", "not an integer"),
    ("rail:gpus=2", "missing servers"),
])
def test_impossible_sizes_one_line_errors(spec: str, words: str) -> None:
    with pytest.raises(TopologyError) as err:
        generate(spec)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_yaml_round_trip_keeps_servers_and_rates() -> None:
    data = parse_spec("rail:servers=3,gpus=2,tiers=3,nvlink-rate=900G,link-rate=200G")
    text = to_yaml(data)
    assert "servers: {nvlink_rate: 900G, nic_rate: 200G}" in text
    topo = parse_topology(__import__("yaml").safe_load(text), "rt.yaml")
    assert topo.server_settings.nvlink_rate_bps == 900 * 10**9
    assert topo.server_settings.nvlink_ratio == 4.5
    assert [topo.hosts[h].gpu for h in topo.servers["sv2"].gpus] == [0, 1]


def _tiny(hosts: list[dict], servers: object = None) -> dict:
    data = {"switches": [{"name": "l1", "role": "leaf"}, {"name": "l2", "role": "leaf"}],
            "hosts": hosts, "links": []}
    if servers is not None:
        data["servers"] = servers
    return data


def test_old_files_load_without_servers() -> None:
    topo = resolve_topology("dual-homed")
    assert topo.servers == {} and topo.nvlinks == []
    assert all(h.server is None and h.gpu is None for h in topo.hosts.values())
    assert [lk.b_port for lk in topo.links if lk.b == "h1"] == [1, 2]


@pytest.mark.parametrize(("hosts", "servers", "words"), [
    ([{"name": "h1", "ip": "10.0.0.1", "leaf": "l1", "server": "sv1"}], None,
     "hosts[0]: a GPU host names both"),
    ([{"name": "h1", "ip": "10.0.0.1", "leaf": "l1", "server": "sv1", "gpu": 0},
      {"name": "h2", "ip": "10.0.0.2", "leaf": "l1", "server": "sv1", "gpu": 0}], None,
     "has GPU 0 twice"),
    ([{"name": "h1", "ip": "10.0.0.1", "leaf": "l1", "server": "sv1", "gpu": 1}], None,
     "GPU 0 is missing"),
    ([{"name": "h1", "ip": "10.0.0.1", "leaf": "l1", "server": "sv1", "gpu": 64}], None,
     "hosts[0].gpu: 64 out of range"),
    ([{"name": "h1", "ip": "10.0.0.1", "leaf": "l1", "server": "SV", "gpu": 0}], None,
     "hosts[0].server: bad server name"),
    ([{"name": "h1", "ip": "10.0.0.1", "leaf": "l1"}], {"nvlink_rate": "lots"},
     "servers.nvlink_rate: 'lots' is not a bit rate"),
    ([{"name": "h1", "ip": "10.0.0.1", "leaf": "l1"}], {"nvlink": "400G"},
     "servers: unknown field 'nvlink'"),
])
def test_bad_server_fields(hosts: list[dict], servers: object, words: str) -> None:
    with pytest.raises(TopologyError) as err:
        parse_topology(_tiny(hosts, servers), "t.yaml")
    assert str(err.value).startswith("t.yaml: ") and words in str(err.value)


def test_nvlink_ports_follow_the_fabric_ports() -> None:
    topo = generate("rail:servers=2,gpus=4")
    g = topo.servers["sv1"].gpus
    # GPU 1's ports: 1-2 its NIC, then NVLinks to GPUs 0, 2, 3 in that order
    assert [topo.nvlink_port(g[1], g[j]) for j in (0, 2, 3)] == [3, 4, 5]
    assert topo.nvlink_port(g[0], g[1]) == 3 and topo.host_ports(g[1]) == 5
    assert topo.same_server(g[0], g[3]) and not topo.same_server(g[0], topo.servers["sv2"].gpus[0])
    macs = {topo.hosts[g[1]].nic_mac(i) for i in range(5)}
    assert len(macs) == 5 and all(int(m[:2], 16) & 0x03 == 0x02 for m in macs)


def test_ranks_name_server_gpu_and_nic_leaves() -> None:
    topo = generate("rail:servers=2,gpus=3,planes=2")
    rs = ranks(topo)
    assert [(r.server, r.gpu) for r in rs] == [("sv1", 0), ("sv1", 1), ("sv1", 2),
                                              ("sv2", 0), ("sv2", 1), ("sv2", 2)]
    assert all(r.leaves == tuple(topo.hosts[r.host].leaves) for r in rs)
    plain = ranks(resolve_topology("leaf-spine"))
    assert [(r.host, r.server, r.gpu) for r in plain][:2] == [("h1", "h1", 0), ("h2", "h2", 0)]


def test_topo_rail_command_writes_loadable_yaml(tmp_path: Path) -> None:
    out = tmp_path / "rail.yaml"
    cmd = [sys.executable, "-m", "cellfabric.cli", "topo", "rail", "--servers", "3", "--gpus",
           "2", "--tiers", "3", "--leaves-per-rail", "2", "--nvlink-rate", "800G", "-o", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT)
    topo = resolve_topology(str(out))
    assert len(topo.hosts) == 6 and topo.server_settings.nvlink_rate_bps == 800 * 10**9
    bad = subprocess.run([*cmd[:6], "0"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "servers=0" in bad.stderr and "Traceback" not in bad.stderr


def test_shipped_rail_file_is_the_generators() -> None:
    shipped = resolve_topology("rail-2x4")
    made = generate("rail:servers=2,gpus=4")
    assert shipped.servers == made.servers and shipped.nvlinks == made.nvlinks
    assert [(lk.a, lk.b, lk.a_port, lk.b_port) for lk in shipped.links] == \
        [(lk.a, lk.b, lk.a_port, lk.b_port) for lk in made.links]
    assert shipped.hosts == made.hosts
