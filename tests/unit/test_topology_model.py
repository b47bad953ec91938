"""Topology files: the shipped ones load with the shapes they claim; bad ones get one line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from topologies.model import TopologyError, load_topology, parse_topology

TOPO_DIR = Path(__file__).resolve().parents[2] / "topologies"


def test_leaf_spine_every_leaf_pair_has_one_path_per_spine() -> None:
    topo = load_topology(TOPO_DIR / "leaf-spine.yaml")
    spines = [s for s in topo.switches.values() if s.role == "spine"]
    leaves = [s for s in topo.switches.values() if s.role == "leaf"]
    assert len(spines) == 2 and 2 <= len(leaves) <= 4
    for leaf in leaves:
        for spine in spines:
            assert len(topo.port_of(leaf.name, spine.name)) == 1
        attached = [h for h in topo.hosts.values() if leaf.name in h.leaves]
        assert 2 <= len(attached) <= 4


def test_fat_tree_k4_shape() -> None:
    topo = load_topology(TOPO_DIR / "fat-tree.yaml")
    by_role = {r: [s for s in topo.switches.values() if s.role == r]
               for r in ("core", "spine", "leaf")}
    assert (len(by_role["core"]), len(by_role["spine"]), len(by_role["leaf"])) == (4, 8, 8)
    assert len(topo.hosts) == 16
    # k=4: every switch has exactly k ports in use.
    for sw in topo.switches.values():
        assert len(topo.links_of(sw.name)) == 4, sw.name


def test_dual_homed_hosts_have_two_ports_on_different_leaves() -> None:
    topo = load_topology(TOPO_DIR / "dual-homed.yaml")
    for host in topo.hosts.values():
        assert len(host.leaves) == 2 and host.leaves[0] != host.leaves[1]
        assert sorted(lk.b_port for lk in topo.links_of(host.name)) == [1, 2]


def test_ports_numbered_from_one_in_link_order_and_peer_lookup() -> None:
    topo = parse_topology({
        "switches": [{"name": "s1", "role": "spine"}, {"name": "l1", "role": "leaf"},
                     {"name": "l2", "role": "leaf"}],
        "hosts": [{"name": "h1", "ip": "10.0.0.1", "leaf": "l1"}],
        "links": [["l1", "s1"], ["l2", "s1"]],
    })
    assert topo.port_of("s1", "l1") == [1] and topo.port_of("s1", "l2") == [2]
    assert topo.port_of("l1", "h1") == [2]  # after its spine link
    assert topo.peer("s1", 2) == ("l2", 1)
    assert topo.link("s1-l2") is topo.link("l2-s1")


BASE = {
    "switches": [{"name": "s1", "role": "spine"}, {"name": "l1", "role": "leaf"}],
    "hosts": [{"name": "h1", "ip": "10.0.0.1", "leaf": "l1"}],
    "links": [["l1", "s1"]],
}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"fabric": {"spray": "random"}},
         "fabric.spray: 'random' is not one of ecmp, spray, round-robin, adaptive"),
        ({"fabric": {"ecn": {"kmin": 30, "kmax": 10}}}, "fabric.ecn: kmax (10) must be >= kmin (30)"),
        ({"fabric": {"queue": {"rate_pps": -1}}}, "fabric.queue.rate_pps: -1 out of range"),
        ({"fabric": {"cel_size": 512}}, "top level"),
        ({"hosts": [{"name": "h1", "ip": "10.0.0.300", "leaf": "l1"}]},
         "hosts[0].ip: not an IPv4 address: '10.0.0.300'"),
        ({"hosts": [{"name": "h1", "ip": "10.0.0.1", "leaf": "s1"}]},
         "hosts[0].leaves: 's1' is not a leaf switch"),
        ({"links": [["l1", "x9"]]}, "links[0].b: unknown switch 'x9'"),
        ({"switches": [{"name": "s1", "role": "spine"}, {"name": "s1", "role": "leaf"}]},
         "switches[1].name: duplicate name 's1'"),
        ({"switches": [{"name": "Spine-Number-1", "role": "spine"}]}, "switches[0].name: bad name"),
        ({"fabric": {"tenants": {"red": ["h1", "h7"]}}}, "fabric.tenants.red: unknown host 'h7'"),
    ],
)
def test_bad_topologies_one_line_error_naming_the_field(patch: dict, message: str) -> None:
    data = {**BASE, **patch}
    if patch.get("fabric", {}).get("cel_size"):
        message = "fabric: unknown field 'cel_size'"
    with pytest.raises(TopologyError) as err:
        parse_topology(data, "t.yaml")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("t.yaml: ")
    assert message in text


def test_yaml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("switches:\n  - {name: s1, role: spine\n")
    with pytest.raises(TopologyError) as err:
        load_topology(bad)
    assert str(err.value).startswith(f"{bad}:3:1:") or str(err.value).startswith(f"{bad}:2:")


def test_tenant_numbers_follow_file_order(tmp_path: Path) -> None:
    data = yaml.safe_load((TOPO_DIR / "leaf-spine.yaml").read_text())
    data["fabric"]["tenants"] = {"blue": ["h1", "h3"], "red": ["h2", "h4"]}
    topo = parse_topology(data)
    assert [topo.tenant_of(h) for h in ("h1", "h2", "h3", "h4")] == [1, 2, 1, 2]


def test_adjacency_kept_between_searches_follows_added_links_and_down_links() -> None:
    topo = load_topology(TOPO_DIR / "leaf-spine.yaml")
    first = topo.adjacency()
    assert topo.adjacency() is first  # kept: a set-up searches from every host
    spine = next(s for s in topo.switches if topo.switches[s].role == "spine")
    leaf = next(s for s in topo.switches if topo.switches[s].role == "leaf")
    host = next(h for h in topo.hosts if leaf in topo.hosts[h].leaves)
    far = next(h for h in topo.hosts if leaf not in topo.hosts[h].leaves)
    assert topo.distances(host)[far] == 4
    # a link added later (host to spine directly) is in the next map and the next search
    lk = topo.links[0]
    topo.links.append(type(lk)(spine, host, 99, 9, lk.queue))
    assert host in topo.adjacency()[spine]
    assert topo.distances(far)[host] == 3
    # links down are left out, and leave the map with nothing down as it was
    down = {frozenset((spine, host))}
    assert host not in topo.adjacency(down)[spine]
    assert topo.distances(far, down)[host] == 4
    assert host in topo.adjacency()[spine]


def test_kept_indexes_answer_as_a_scan_and_follow_added_links() -> None:
    """links_of, nvlink_port and distances keep what they build; a link added later is in
    the next answer, and every answer is the one a scan of the lists gives."""
    from topologies.generators import parse_spec

    topo = parse_topology(parse_spec("rail:servers=2,gpus=2"))

    def scanned_links(node: str) -> list:
        return [lk for lk in topo.links if node in (lk.a, lk.b)]

    for node in [*topo.switches, *topo.hosts]:
        assert topo.links_of(node) == scanned_links(node)
    for h in topo.hosts:
        assert topo.host_ports(h) == len(topo.hosts[h].leaves) + sum(
            h in (nv.a, nv.b) for nv in topo.nvlinks)
    for nv in topo.nvlinks:
        assert topo.nvlink_port(nv.a, nv.b) == nv.a_port
        assert topo.nvlink_port(nv.b, nv.a) == nv.b_port
    with pytest.raises(KeyError, match="no NVLink"):
        topo.nvlink_port(topo.nvlinks[0].a, topo.nvlinks[0].a)
    host, other = next(iter(topo.hosts)), list(topo.hosts)[-1]
    far = max(topo.distances(host).values())
    spine = next(s for s, sw in topo.switches.items() if sw.role == "spine")
    before = topo.distances(host)
    assert topo.distances(host) is before  # kept
    # a host-to-spine link added later: in the next answers of all three
    lk = topo.links[0]
    topo.links.append(type(lk)(spine, host, 99, 9, lk.queue))
    assert topo.links_of(host) == scanned_links(host) and topo.links_of(host)[-1].a == spine
    assert topo.distances(host)[spine] == 1 and topo.distances(host) is not before
    assert topo.distances(host)[other] <= far
    # an NVLink added later (a pair that had none): its ports in the next answer
    pair = next((a, b) for a in topo.hosts for b in topo.hosts
                if a != b and not any({nv.a, nv.b} == {a, b} for nv in topo.nvlinks))
    with pytest.raises(KeyError):
        topo.nvlink_port(*pair)
    topo.nvlinks.append(replace(topo.nvlinks[0], a=pair[0], b=pair[1], a_port=7, b_port=8))
    assert (topo.nvlink_port(*pair), topo.nvlink_port(pair[1], pair[0])) == (7, 8)
    assert topo.host_ports(pair[0]) == len(topo.hosts[pair[0]].leaves) + sum(
        pair[0] in (nv.a, nv.b) for nv in topo.nvlinks)
