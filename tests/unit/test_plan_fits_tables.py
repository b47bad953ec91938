"""The controller's plan for a fabric of many hosts fits fabric.p4's tables: every table and
action profile holds at most its declared size of entries (a switch refuses the rest with
RESOURCE_EXHAUSTED / "table is full", which stopped a k=16 fat-tree's bring-up: every leaf
answers ARP for every host of the fabric, 1024 entries against a size of 256)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from controlplane.entities import ActionProfileMember, TableEntry
from controlplane.fabric_plan import T_ARP, plan_fabric
from controlplane.p4info import load_p4info
from netlab.targets import compile_p4
from topologies.generators import generate

ROOT = Path(__file__).resolve().parents[2]
HOSTS_PER_LEAF = 150  # two leaves: 300 hosts, past the 256 the ARP table once held


@pytest.fixture(scope="module")
def sizes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    _, p4info_path = compile_p4(ROOT / "p4src" / "fabric.p4",
                                tmp_path_factory.mktemp("fabric"), target="embedded")
    info = load_p4info(p4info_path)
    out = {t.preamble.name: t.size for t in info.tables}
    out.update({p.preamble.name: p.size for p in info.action_profiles})
    return out


def test_every_switch_plan_fits_the_programs_table_sizes(sizes: dict[str, int]) -> None:
    topo = generate(f"leaf-spine:leaves=2,spines=1,hosts={HOSTS_PER_LEAF}")
    plans = plan_fabric(topo)
    for name, plan in plans.items():
        used: Counter[str] = Counter()
        for e in plan.entities:
            if isinstance(e, TableEntry) and not e.is_default:
                used[e.table or ""] += 1
            elif isinstance(e, ActionProfileMember):
                used[e.profile or ""] += 1
        over = {t: (n, sizes[t]) for t, n in used.items() if n > sizes[t]}
        assert not over, f"{name}: entries > size: {over}"
    # the case that broke: a leaf answers ARP for each of the fabric's 300 hosts
    arp = sum(isinstance(e, TableEntry) and e.table == T_ARP for e in plans["l1"].entities)
    assert arp == 2 * HOSTS_PER_LEAF
