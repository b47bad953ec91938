"""The controller's part under --routing bgp: everything but routes and next-hop groups.

Routes, groups, spray modes and the selector belong to each switch's route agent (its own
P4Runtime role, controlplane.route_entries.ROUTE_AGENT_ENTITIES); the controller still writes
what the topology fixes and no routing protocol learns: router MACs, MAC rewrites, host ports,
ARP answers, tenants, INT, ECN, feedback priority, queue settings. Its reads and its diff
leave the agents' entities alone, also on a target without roles (real BMv2 returns every
entry to every client).
"""

from __future__ import annotations

from typing import Any

from p4.v1 import p4runtime_pb2

from controlplane.fabric_controller import (
    FABRIC_ROLE_ENTITIES,
    FabricController,
    Identity,
    fabric_role_config,
)
from controlplane.fabric_plan import SwitchPlan
from controlplane.route_entries import ROUTE_AGENT_ENTITIES, ROUTE_TABLES

BASE_ENTITIES = tuple(e for e in FABRIC_ROLE_ENTITIES if e not in ROUTE_AGENT_ENTITIES)


def base_role_config() -> Any:
    return fabric_role_config(BASE_ENTITIES)


def _agent_owned(conn: Any, proto: p4runtime_pb2.Entity) -> bool:
    index = conn.index
    which = proto.WhichOneof("entity")
    if which == "table_entry":
        return proto.table_entry.table_id in {index.id("table", t) for t in ROUTE_TABLES}
    selector = {index.id("action_profile", p) for p in ROUTE_AGENT_ENTITIES
                if p not in ROUTE_TABLES}
    if which == "action_profile_member":
        return proto.action_profile_member.action_profile_id in selector
    if which == "action_profile_group":
        return proto.action_profile_group.action_profile_id in selector
    return False


class BaseController(FabricController):
    """A FabricController that plans, reads and diffs everything but the agents' entities."""

    def _desired(self, conn: Any, plan: SwitchPlan) -> dict[Identity, p4runtime_pb2.Entity]:
        return {k: v for k, v in super()._desired(conn, plan).items()
                if not _agent_owned(conn, v)}

    def _actual(self, conn: Any) -> dict[Identity, p4runtime_pb2.Entity]:
        return {k: v for k, v in super()._actual(conn).items() if not _agent_owned(conn, v)}
