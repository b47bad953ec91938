"""fabricctl resolves --topology as `cellfabric run` does: a file, a shipped name or a
generator spec (topologies.catalog), so `fabricctl --topology fat-tree` reaches a run's
switches."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.addresses import GRPC_BASE, topology_addresses
from controlplane.cli import main
from topologies.catalog import locate_topology, resolve_topology

SHIPPED = Path(__file__).parents[2] / "topologies"


@pytest.mark.parametrize("name", ["fat-tree", "fat-tree.yaml", str(SHIPPED / "fat-tree.yaml"),
                                  "fat-tree:k=4", "clos:pods=2,leaves=2,aggs=2,cores=2,hosts=1"])
def test_addresses_of_names_specs_and_files(name: str) -> None:
    topo = resolve_topology(name)
    addrs = topology_addresses(name)
    assert list(addrs) == list(topo.switches)
    for sw_name, sw in topo.switches.items():
        assert addrs[sw_name].device_id == sw.device_id
        assert addrs[sw_name].grpc_addr == f"127.0.0.1:{GRPC_BASE + sw.device_id}"


def test_a_spec_has_no_file_and_a_name_its_shipped_file() -> None:
    assert locate_topology("fat-tree:k=4") is None
    assert locate_topology("fat-tree") == SHIPPED / "fat-tree.yaml"
    assert len(topology_addresses("fat-tree:k=4")) == 20


def test_fabricctl_names_the_switches_of_a_shipped_topology(capsys) -> None:
    assert main(["--topology", "fat-tree", "--switch", "zz9", "tables"]) == 2
    err = capsys.readouterr().err
    assert "no switch named 'zz9'" in err and "c1, c2" in err and "e42" in err
    assert len(err.strip().splitlines()) == 1


def test_fabricctl_unknown_topology_is_one_line(capsys) -> None:
    assert main(["--topology", "no-such-fabric", "--switch", "l1", "tables"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-fabric: no such topology file" in err
