"""Under --routing bgp the controller's diff leaves the route agents' entities alone: routes,
groups, spray modes, adaptive candidates and the selector's members and groups are not its
own; everything else it writes (router MACs, rewrites, ECN, INT, host ports) still is."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from p4.v1 import p4runtime_pb2

from cellfabric.nos.base_controller import BASE_ENTITIES, _agent_owned
from controlplane.p4info import P4InfoIndex
from netlab.targets import compile_p4

ROOT = Path(__file__).resolve().parents[2]


def _table_entry(index: P4InfoIndex, table: str) -> p4runtime_pb2.Entity:
    ent = p4runtime_pb2.Entity()
    ent.table_entry.table_id = index.id("table", table)
    return ent


def test_agent_entities_are_left_out_and_the_rest_kept(tmp_path: Path) -> None:
    _json, p4info = compile_p4(ROOT / "p4src" / "fabric.p4", tmp_path, target="embedded")
    index = P4InfoIndex.from_file(p4info)
    conn = SimpleNamespace(index=index)
    for table in ("MyIngress.forwarding.ipv4_lpm", "MyIngress.spray.group_select",
                  "MyIngress.spray.group_mode", "MyIngress.spray.adaptive_candidates"):
        assert _agent_owned(conn, _table_entry(index, table)), table
    for table in ("MyIngress.forwarding.my_station", "MyEgress.rewrite.egress_rewrite",
                  "MyIngress.forwarding.arp_responder", "MyEgress.ecn.ecn_profile"):
        assert not _agent_owned(conn, _table_entry(index, table)), table
    selector = index.id("action_profile", "MyIngress.spray.group_selector")
    member = p4runtime_pb2.Entity()
    member.action_profile_member.action_profile_id = selector
    group = p4runtime_pb2.Entity()
    group.action_profile_group.action_profile_id = selector
    assert _agent_owned(conn, member) and _agent_owned(conn, group)
    clone = p4runtime_pb2.Entity()
    clone.packet_replication_engine_entry.clone_session_entry.session_id = 100
    assert not _agent_owned(conn, clone)
    # the controller's role may still write its own tables, and none of the agent's
    assert "MyIngress.forwarding.my_station" in BASE_ENTITIES
    assert "MyIngress.forwarding.ipv4_lpm" not in BASE_ENTITIES
    assert "MyIngress.spray.group_selector" not in BASE_ENTITIES
