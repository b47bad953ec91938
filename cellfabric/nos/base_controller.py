"""The controller's part under --routing bgp: everything but routes and next-hop groups.

Routes, groups, spray modes and the selector belong to each switch's route agent (its own
P4Runtime role, controlplane.route_entries.ROUTE_AGENT_ENTITIES); the controller still writes
what the topology fixes and no routing protocol learns: router MACs, MAC rewrites, host ports,
ARP answers, tenants, INT, ECN, feedback priority, queue settings, and the priority of the
NOS's own in-band frames (control_priority). Its reads and its diff
leave the agents' entities alone, also on a target without roles (real BMv2 returns every
entry to every client).
"""

from __future__ import annotations

from typing import Any

from p4.v1 import p4runtime_pb2

from controlplane import fabric_plan as fp
from controlplane.entities import TableEntry
from controlplane.fabric_controller import (
    FABRIC_ROLE_ENTITIES,
    FabricController,
    Identity,
    desired_protos,
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


def control_priority(plan: SwitchPlan, cpu_port: int = fp.CPU_PORT) -> list[TableEntry]:
    """The NOS's in-band frames (PacketOuts from the CPU port) on the control queue, ahead of
    the data cells a congested port holds, so BFD and BGP keepalives are not held back past
    their timers, and off the emulated line rate (fp.CONTROL_PRIORITY); only on a switch with
    priority queues (its plan maps feedback to one), which a NOS's run starts with
    fp.CONTROL_QUEUES."""
    if not any(isinstance(e, TableEntry) and e.table == fp.T_FEEDBACK for e in plan.entities):
        return []
    return [TableEntry(table=fp.T_CONTROL_PRIO,
                       match={"standard_metadata.ingress_port": cpu_port},
                       action="MyIngress.cpu_out.set_priority",
                       params={"prio": fp.CONTROL_PRIORITY})]


class BaseController(FabricController):
    """A FabricController that plans, reads and diffs everything but the agents' entities."""

    def _desired(self, conn: Any, plan: SwitchPlan) -> dict[Identity, p4runtime_pb2.Entity]:
        desired = {k: v for k, v in super()._desired(conn, plan).items()
                   if not _agent_owned(conn, v)}
        desired.update(desired_protos(conn, control_priority(plan)))
        return desired

    def _actual(self, conn: Any) -> dict[Identity, p4runtime_pb2.Entity]:
        return {k: v for k, v in super()._actual(conn).items() if not _agent_owned(conn, v)}
