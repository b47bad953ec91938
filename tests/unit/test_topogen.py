"""Topology generators: shapes from the fat-tree/Clos definitions, equal-cost path counts,
the hand-written k=4 file reproduced, specs and their one-line errors."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controlplane.fabric_plan import next_hops
from topologies.generators import generate, parse_spec, to_yaml
from topologies.model import TopologyError, load_topology, parse_topology

ROOT = Path(__file__).resolve().parents[2]


def _roles(topo) -> dict[str, int]:
    out: dict[str, int] = {}
    for sw in topo.switches.values():
        out[sw.role] = out.get(sw.role, 0) + 1
    return out


@pytest.mark.parametrize("k", [4, 6, 8])
def test_fat_tree_shape_and_paths(k: int) -> None:
    topo = generate(f"fat-tree:k={k}")
    half = k // 2
    assert _roles(topo) == {"core": half * half, "spine": k * half, "leaf": k * half}
    assert len(topo.hosts) == k ** 3 // 4
    for sw in topo.switches.values():  # every switch uses exactly k ports
        assert len(topo.links_of(sw.name)) == k, sw.name
    hops = next_hops(topo, set())
    # an edge switch reaches a host of another pod over each of its k/2 uplinks, and every
    # aggregation switch over each of its k/2 core uplinks: (k/2)^2 paths between pods
    h_far = next(h for h in topo.hosts.values() if h.ip.startswith(f"10.{k}."))
    assert len(hops["e11"][h_far.name]) == half
    assert len(hops[f"a1{1 if k < 10 else 'x1'}"][h_far.name]) == half


def test_fat_tree_k8_is_the_sim_size() -> None:
    topo = generate("fat-tree:k=8")
    assert len(topo.switches) == 80 and len(topo.hosts) == 128
    assert len({h.ip for h in topo.hosts.values()}) == 128


def test_generated_k4_matches_the_hand_written_file() -> None:
    shipped = load_topology(ROOT / "topologies" / "fat-tree.yaml")
    gen = generate("fat-tree:k=4")
    assert {n: s.role for n, s in gen.switches.items()} == \
        {n: s.role for n, s in shipped.switches.items()}
    assert {(h.name, h.ip, tuple(h.leaves)) for h in gen.hosts.values()} == \
        {(h.name, h.ip, tuple(h.leaves)) for h in shipped.hosts.values()}
    assert {frozenset((lk.a, lk.b)) for lk in gen.links} == \
        {frozenset((lk.a, lk.b)) for lk in shipped.links}


def test_clos_planes() -> None:
    topo = generate("clos:pods=3,leaves=2,aggs=2,cores=4,hosts=1")
    assert _roles(topo) == {"core": 4, "spine": 6, "leaf": 6}
    # aggregation switch i of every pod owns core plane i
    assert sorted(p for lk in topo.links for p in (lk.a, lk.b) if lk.a == "a11" or lk.b == "a11"
                  if p.startswith("c")) == ["c1", "c2"]
    assert sorted(p for lk in topo.links for p in (lk.a, lk.b) if "a32" in (lk.a, lk.b)
                  if p.startswith("c")) == ["c3", "c4"]


def test_wide_names_stay_unambiguous_and_short() -> None:
    topo = generate("clos:pods=12,leaves=2,aggs=1,cores=1,hosts=1")
    assert "e12x2" in topo.switches and "e1x2" in topo.switches
    assert all(len(n) <= 6 for n in itertools.chain(topo.switches, topo.hosts))


def test_leaf_spine_generator() -> None:
    topo = generate("leaf-spine:leaves=3,spines=2,hosts=2,rate=150")
    assert _roles(topo) == {"spine": 2, "leaf": 3} and len(topo.hosts) == 6
    assert {lk.queue.rate_pps for lk in topo.links} == {150}


def test_yaml_round_trip() -> None:
    data = parse_spec("clos:pods=2,leaves=2,aggs=2,cores=2,hosts=2")
    again = parse_topology(yaml.safe_load(to_yaml(data)), "again")
    first = parse_topology(data, "first")
    assert [(lk.a, lk.b, lk.a_port, lk.b_port) for lk in again.links] == \
        [(lk.a, lk.b, lk.a_port, lk.b_port) for lk in first.links]


@pytest.mark.parametrize("spec, words", [
    ("fat-tree:k=5", "even"),
    ("fat-tree:", "missing k"),
    ("fat-tree:k=four", "not an integer"),
    ("clos:pods=2,leaves=2,aggs=2,cores=3,hosts=1", "multiple"),
    ("leaf-spine:leaves=2,spines=2,hosts=2,colour=3", "bad item"),
])
def test_bad_specs(spec: str, words: str) -> None:
    with pytest.raises(TopologyError, match=words):
        generate(spec)


def test_topo_command_writes_loadable_yaml(tmp_path: Path) -> None:
    out = tmp_path / "ft.yaml"
    done = subprocess.run([sys.executable, "-m", "cellfabric.cli", "topo", "fat-tree", "--k", "4",
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert len(load_topology(out).switches) == 20
    bad = subprocess.run([sys.executable, "-m", "cellfabric.cli", "topo", "fat-tree", "--k", "3"],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
