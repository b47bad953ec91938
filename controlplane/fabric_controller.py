"""FabricController: makes every switch hold exactly what the topology's plan says.

It compares each switch's actual state (read over P4Runtime) with the plan and writes only the
difference: a second run writes nothing, a changed topology or policy the minimal set of
inserts, modifies and deletes, in an order the switch accepts (members before the groups that
use them, groups before the entries that point at them; deletes the other way round). A link
going down or up re-plans the paths without it and writes what changed. Queue settings are not
P4Runtime: they go through a ``QueueSetter`` the runner provides for the target.

Real BMv2 cannot shrink a group in place (its PI fails a group MODIFY that drops a member
watching a port with UNKNOWN, having applied it or not: controlplane.route_entries). For such a
switch (``modify_groups=False``, or learnt from that error, after which the switch is read
again and the diff retried) a changed member set becomes a new group: the plan keeps the ids
of the groups the switch holds and gives a new set an id none of them uses, so the write is
insert the group, repoint the routes, delete the old group, and no route ever names a group
that is not there (make-before-break).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import any_pb2
from p4.v1 import p4runtime_pb2
from p4.v1.p4runtime_pb2 import Update

from controlplane import fabric_plan as fp
from controlplane.channel import SwitchChannels
from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSession,
    Entity,
    TableEntry,
)
from controlplane.errors import P4RuntimeError
from controlplane.fabric_plan import P_SELECTOR, QueuePlan, SwitchPlan
from controlplane.roles import role_config
from controlplane.state import identity
from topologies.model import Topology

QueueSetter = Callable[[str, QueuePlan], None]  # (switch, its port's queue plan)

# The P4Runtime role a FabricController may run under (``Fabric(..., role=FABRIC_ROLE,
# role_config=fabric_role_config())``), and the entities its plans write: every fabric.p4
# table but the operator's ACL and L2 tables, the spray selector, clone sessions, the pipeline.
FABRIC_ROLE = "fabric-controller"
FABRIC_ROLE_ENTITIES = (
    fp.T_MY_STATION, fp.T_ARP, fp.T_LPM, fp.T_GROUP_MODE, fp.T_CELL_LENGTH, fp.T_ADAPTIVE,
    fp.T_GROUP_SELECT, fp.P_SELECTOR, fp.T_HOST_PORT, fp.T_TENANT_SRC, fp.T_TENANT_DST,
    fp.T_INT_WATCH, fp.T_INT_SINK, fp.T_FEEDBACK, fp.T_CONTROL_PRIO, fp.T_REWRITE, fp.T_ECN,
    fp.T_INT_TRANSIT, fp.T_REPORT,
    # the counters and the register the harness reads through the controller's connection
    # (a role's reads return only its entities)
    fp.C_PORT_TX, fp.C_PORT_TX_DATA, fp.C_PORT_TX_CONTROL, fp.C_PORT_RX, fp.C_DROPS, fp.C_ECN_MARKS, fp.R_QDEPTH)


def fabric_role_config(entities: tuple[str, ...] = FABRIC_ROLE_ENTITIES) -> any_pb2.Any:
    """p4sim's role config (p4sim.v1.RoleConfig) for a controller that writes ``entities``,
    pushes the pipeline, does packet I/O and owns clone sessions. Other targets ignore it
    (BMv2's PI has no roles)."""
    return role_config(entities, packet_replication=True, receives_packet_ins=True,
                           can_send_packet_outs=True, can_push_pipeline=True)

# Insert order; deletes run in reverse.
_KIND_ORDER = ["action_profile_member", "action_profile_group", "table_entry",
               "packet_replication_engine_entry"]


@dataclass
class SwitchDiff:
    switch: str
    inserts: list[p4runtime_pb2.Entity] = field(default_factory=list)
    modifies: list[p4runtime_pb2.Entity] = field(default_factory=list)
    deletes: list[p4runtime_pb2.Entity] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return len(self.inserts) + len(self.modifies) + len(self.deletes)

    def describe(self) -> str:
        return (f"{self.switch}: {len(self.inserts)} insert, {len(self.modifies)} modify, "
                f"{len(self.deletes)} delete")


def _normalize(entity: p4runtime_pb2.Entity) -> bytes:
    """The part of an entity that is intent (no counter data, no read-only fields)."""
    e = p4runtime_pb2.Entity()
    e.CopyFrom(entity)
    if e.WhichOneof("entity") == "table_entry":
        e.table_entry.ClearField("counter_data")
        e.table_entry.ClearField("meter_config")
        e.table_entry.ClearField("time_since_last_hit")
        e.table_entry.match.sort(key=lambda fm: fm.field_id)
    elif e.WhichOneof("entity") == "action_profile_group":
        e.action_profile_group.members.sort(key=lambda m: m.member_id)
        e.action_profile_group.max_size = 0
    return e.SerializeToString(deterministic=True)


def _kind(entity: p4runtime_pb2.Entity) -> str:
    return entity.WhichOneof("entity")


class FabricController:
    def __init__(self, topo: Topology, fabric: SwitchChannels, p4info: str | Path, bmv2_json: str | Path,
                 queue_setter: QueueSetter | None = None, priority_queues: bool = True,
                 log: Callable[[str], None] = print, modify_groups: bool = True) -> None:
        self.topo = topo
        self.fabric = fabric
        self.p4info = Path(p4info)
        self.bmv2_json = Path(bmv2_json)
        self.queue_setter = queue_setter
        self.priority_queues = priority_queues
        self.log = log
        self.down: set[frozenset[str]] = set()
        self._lock = threading.Lock()
        self.plans: dict[str, SwitchPlan] = {}
        # modify_groups=False: no switch's groups are modified (real BMv2); else the switches
        # found unable to, by their error
        self.modify_groups = modify_groups
        self.new_groups_on: set[str] = set()
        self._hops: dict[str, dict[str, list[int]]] = {}

    # -- whole fabric --------------------------------------------------------------------------
    def up(self, push_pipeline: bool = True) -> dict[str, SwitchDiff]:
        """Bring every switch to the plan; returns what was written per switch."""
        if push_pipeline:
            self.fabric.run(lambda c: self._ensure_pipeline(c), "pipeline push")
        diffs = self.sync()
        if self.queue_setter:
            for name, plan in self.plans.items():
                for _, queue in sorted(plan.queues.items()):
                    self.queue_setter(name, queue)
        return diffs

    def diff(self) -> dict[str, SwitchDiff]:
        """What ``sync`` would write, without writing it."""
        with self._lock:
            self.plans = self._plan_all()
            return self.fabric.run(lambda c: self._diff_switch(c.name, c), "read")

    def sync(self) -> dict[str, SwitchDiff]:
        diffs = self.diff()
        return self.fabric.run(lambda c: self._apply(c, diffs[c.name]), "write")

    def _plan_all(self) -> dict[str, SwitchPlan]:
        """Plan every switch; one that gets new groups keeps its current plan's group ids
        (so an unchanged switch plans as before, and a changed one avoids the ids in use)."""
        self._hops = fp.next_hops(self.topo, self.down)
        return {name: fp.plan_switch(self.topo, name, self._hops, self.priority_queues,
                                     self._kept_group_ids(name))
                for name in self.topo.switches}

    def _kept_group_ids(self, name: str) -> dict[tuple[int, ...], int] | None:
        if not self._new_groups(name):
            return None
        plan = self.plans.get(name)
        return dict(plan.groups) if plan else {}

    def _new_groups(self, name: str) -> bool:
        """Whether ``name``'s changed member sets become new groups (no group modify)."""
        return not self.modify_groups or name in self.new_groups_on

    def _sync_replanned(self) -> dict[str, SwitchDiff]:
        """Re-plan, then read and write only the switches whose plan changed: a reroute must
        not wait for every switch of the fabric to be read (``sync`` still checks them all)."""
        with self._lock:
            before = self.plans
            self.plans = self._plan_all()
            changed = {n for n, plan in self.plans.items() if before.get(n) != plan}
            diffs = self.fabric.run(lambda c: self._diff_switch(c.name, c)
                                    if c.name in changed else SwitchDiff(c.name), "read")
        return self.fabric.run(lambda c: self._apply(c, diffs[c.name]), "write")

    def set_link(self, link: str, up: bool) -> dict[str, SwitchDiff]:
        """A link (``a-b``) went down or came back: re-plan paths and write the changes."""
        return self.set_links([link], up)

    def set_links(self, links: list[str], up: bool) -> dict[str, SwitchDiff]:
        """Several links at once (a switch failure takes all of its links): one re-plan."""
        for link in links:
            lk = self.topo.link(link)
            key = frozenset((lk.a, lk.b))
            if up:
                self.down.discard(key)
            else:
                self.down.add(key)
        diffs = self._sync_replanned()
        changed = [d.describe() for d in diffs.values() if d.writes]
        self.log(f"link {','.join(links)} {'up' if up else 'down'}: "
                 + ("; ".join(changed) or "no change"))
        return diffs

    # -- one switch ---------------------------------------------------------------------------
    def _ensure_pipeline(self, conn) -> None:
        current = None
        try:
            current = conn.get_pipeline()
        except Exception:
            current = None
        wanted = self.bmv2_json.read_bytes()
        if current is None or current.device_config != wanted:
            conn.set_pipeline(self.p4info, self.bmv2_json)

    def _desired(self, conn, plan: SwitchPlan) -> dict[tuple[str, object], p4runtime_pb2.Entity]:
        return desired_protos(conn, plan.entities)

    def _actual(self, conn) -> dict[tuple[str, object], p4runtime_pb2.Entity]:
        return read_actual(conn, [TableEntry(table=None), ActionProfileMember(profile=P_SELECTOR),
                                  ActionProfileGroup(profile=P_SELECTOR),
                                  CloneSession(session_id=None)])

    def _diff_switch(self, name: str, conn) -> SwitchDiff:
        actual = self._actual(conn)
        if self._new_groups(name):
            # the ids the switch holds win over the plan's: the diff then never modifies a
            # group's members (a switch restored or written by an earlier controller too)
            self.plans[name] = fp.plan_switch(self.topo, name, self._hops,
                                              self.priority_queues, groups_held(actual))
        return diff_switch(name, self._desired(conn, self.plans[name]), actual)

    def _apply(self, conn, diff: SwitchDiff) -> SwitchDiff:
        """Write ``diff``; returns what was written (another diff if the switch refused to
        modify a group and the write was redone with new groups)."""
        try:
            apply_diff(conn, diff)
        except P4RuntimeError as err:
            if not self._cannot_modify_groups(diff, err):
                raise
            retry = self._diff_switch(diff.switch, conn)  # part may have been applied
            apply_diff(conn, retry)
            return retry
        return diff

    def _cannot_modify_groups(self, diff: SwitchDiff, err: P4RuntimeError) -> bool:
        """Real BMv2's answer to a group shrink (UNKNOWN): from now on ``diff.switch``'s
        changed member sets become new groups."""
        modified_group = any(_kind(e) == "action_profile_group" for e in diff.modifies)
        if err.code != "UNKNOWN" or not modified_group or self._new_groups(diff.switch):
            return False
        self.log(f"controller: switch {diff.switch} cannot modify a group in place ({err}); "
                 "changed next-hop sets get new groups from now on")
        self.new_groups_on.add(diff.switch)
        return True


# -- the diff machinery, also for other writers of a part of the pipeline (the route agent) ----

Identity = tuple[str, object]
# encoded entities a codec's shared_protos holds at most (a k=16 fabric plans ~30k distinct)
SHARED_PROTOS_MAX = 200_000


def groups_held(actual: dict[Identity, p4runtime_pb2.Entity]) -> dict[tuple[int, ...], int]:
    """The selector groups in ``actual``: member set -> group id (the lowest id of a set held
    twice)."""
    held: dict[tuple[int, ...], int] = {}
    for proto in actual.values():
        if _kind(proto) == "action_profile_group":
            group = proto.action_profile_group
            ports = tuple(sorted(m.member_id for m in group.members))
            held[ports] = min(held.get(ports, group.group_id), group.group_id)
    return held


def desired_protos(conn, entities: Iterable[Entity]) -> dict[Identity, p4runtime_pb2.Entity]:
    """Entities encoded for ``conn``'s pipeline, by identity. With the codec's
    ``shared_protos`` (the simulator's), an entity equal to one encoded before, for this
    switch or another, is that one's message (a k=8 fat-tree plans 45% of its entries alike)."""
    codec = conn.codec
    shared = codec.shared_protos

    def encode(ent: Entity) -> tuple[Identity, p4runtime_pb2.Entity]:
        proto = codec.to_proto(ent)
        ident = identity(proto)
        assert ident is not None
        return ident, proto

    if shared is None:
        return dict(encode(ent) for ent in entities)
    out: dict[Identity, p4runtime_pb2.Entity] = {}
    for ent in entities:
        key = repr(ent)
        found = shared.get(key)
        if found is None:
            if len(shared) >= SHARED_PROTOS_MAX:
                shared.clear()
            found = shared[key] = encode(ent)
        out[found[0]] = found[1]
    return out


def read_actual(conn, reads: list[Entity]) -> dict[Identity, p4runtime_pb2.Entity]:
    """What the switch holds of ``reads`` (wildcard reads), by identity; default entries are
    not intent a diff adds or removes."""
    out: dict[Identity, p4runtime_pb2.Entity] = {}
    codec = conn.codec
    protos = conn.read_protos(*(codec.to_proto(r, for_read=True) for r in reads))
    for proto in protos:
        ident = identity(proto)
        if ident is not None and ident[0] != "default_entry":
            out[ident] = proto
    return out


def diff_switch(name: str, desired: dict[Identity, p4runtime_pb2.Entity],
                actual: dict[Identity, p4runtime_pb2.Entity]) -> SwitchDiff:
    """The inserts, modifies and deletes that turn ``actual`` into ``desired``, each list in
    the order the switch accepts."""
    diff = SwitchDiff(name)
    for ident, proto in desired.items():
        have = actual.get(ident)
        if have is None:
            diff.inserts.append(proto)
        elif have != proto and _normalize(have) != _normalize(proto):
            # (an equal message needs no normalizing: the route agent's diffs against what it
            # wrote last are mostly that)
            diff.modifies.append(proto)
    diff.deletes = [proto for ident, proto in actual.items() if ident not in desired]
    order = {k: i for i, k in enumerate(_KIND_ORDER)}
    diff.inserts.sort(key=lambda e: order.get(_kind(e), 9))
    diff.modifies.sort(key=lambda e: order.get(_kind(e), 9))
    diff.deletes.sort(key=lambda e: -order.get(_kind(e), 9))
    return diff


def apply_diff(conn, diff: SwitchDiff) -> None:
    # Three requests so that dependencies hold: a group's new members exist before it is
    # modified, and stale members are deleted only after the groups stop using them.
    groups = [(Update.INSERT, diff.inserts), (Update.MODIFY, diff.modifies),
              (Update.DELETE, diff.deletes)]
    # A channel of the class that offers write_entities (the simulator's in-process one)
    # takes the entities as they are; asked of the class, so that a wrapper forwarding
    # attributes still sees every write through its own write_protos.
    write_entities = getattr(type(conn), "write_entities", None)
    for kind, entities in groups:
        if entities and write_entities is not None:
            write_entities(conn, kind, entities)
        elif entities:
            conn.write_protos([Update(type=kind, entity=e) for e in entities])
