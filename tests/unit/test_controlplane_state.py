"""The intended-state store that re-syncs a restarted switch (controlplane.state)."""

from __future__ import annotations

from pathlib import Path

from p4.v1 import p4runtime_pb2

from controlplane.codec import Codec
from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CounterEntry,
    GroupMember,
    MulticastGroup,
    Replica,
    TableEntry,
)
from controlplane.p4info import P4InfoIndex
from controlplane.state import IntendedState

Update = p4runtime_pb2.Update
CODEC = Codec(P4InfoIndex.from_file(Path(__file__).parent / "cp_fixtures" /
                                    "basic.p4info.txtpb"))


def upd(kind: int, entity) -> p4runtime_pb2.Update:
    return Update(type=kind, entity=CODEC.to_proto(entity, for_delete=kind == Update.DELETE))


def route(prefix: str, port: int) -> TableEntry:
    return TableEntry("ipv4_lpm", match={"dstAddr": prefix}, action="set_nhop",
                      params={"dmac": 1, "port": port})


def test_replay_is_in_dependency_order_with_latest_values() -> None:
    st = IntendedState()
    # Written in an order a switch would reject on replay (entry before its group/member).
    st.apply(upd(Update.INSERT, TableEntry("ecmp_group", match={"group_id": 1}, group=5)))
    st.apply(upd(Update.INSERT, MulticastGroup(2, [Replica(1)])))
    st.apply(upd(Update.INSERT, ActionProfileGroup("ecmp_selector", 5, [GroupMember(9)])))
    st.apply(upd(Update.INSERT, ActionProfileMember("ecmp_selector", 9, "drop")))
    st.apply(upd(Update.INSERT, route("10.0.0.0/8", 1)))
    st.apply(upd(Update.MODIFY, route("10.0.0.0/8", 2)))  # replaces, same key
    st.apply(upd(Update.INSERT, route("11.0.0.0/8", 3)))
    st.apply(upd(Update.DELETE, route("11.0.0.0/8", 0)))
    st.apply(upd(Update.MODIFY, TableEntry("ipv4_lpm", is_default=True, action="drop")))
    st.apply(upd(Update.MODIFY, CounterEntry("port_pkts", 1, 5, 5)))  # data, not intent
    replay = list(st.replay_updates())
    kinds = [u.entity.WhichOneof("entity") for u in replay]
    assert kinds == ["action_profile_member", "action_profile_group", "table_entry",
                     "table_entry", "table_entry", "packet_replication_engine_entry"]
    entries = [CODEC.from_proto(u.entity) for u, k in zip(replay, kinds) if k == "table_entry"]
    assert [(e.table, e.is_default) for e in entries] == [
        ("MyIngress.ecmp_group", False), ("MyIngress.ipv4_lpm", False),
        ("MyIngress.ipv4_lpm", True)]
    assert entries[1].params["port"] == 2
    # Defaults are modified on replay (they always exist), the rest inserted.
    assert [Update.Type.Name(u.type) for u in replay] == [
        "INSERT", "INSERT", "INSERT", "INSERT", "MODIFY", "INSERT"]
    assert len(st) == 6
    st.clear()
    assert list(st.replay_updates()) == []
