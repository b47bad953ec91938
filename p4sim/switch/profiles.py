"""Action profiles and action selectors (members, groups, hash-based member choice).

A group's member is chosen as ``hash(selector input) % len(live members)``, as BMv2 does, where
the live members are those whose ``watch_port`` is up (a member listed with weight w counts w
times). A group with no live member behaves as a table miss.
"""

from __future__ import annotations

from typing import Any

from p4sim.switch.api import ActionCall, ApiError, Code, GroupMember, GroupRef, MemberRef
from p4sim.switch.tables import ActionDef


class ActionProfile:
    def __init__(self, name: str, max_size: int, actions: dict[str, ActionDef],
                 selector_hash: Any, port_up: Any) -> None:
        self.name = name
        self.max_size = max_size
        self.actions = actions  # every action usable by a table bound to this profile
        self.selector_hash = selector_hash  # fn(P, F, D) -> int, None without a selector
        # whether the profile is a selector (its hash may be compiled after it is built)
        self.has_selector = selector_hash is not None
        self.port_up = port_up  # fn(port) -> bool
        self.members: dict[int, tuple[ActionDef, tuple[int, ...], ActionCall]] = {}
        self.groups: dict[int, list[GroupMember]] = {}
        self.group_max: dict[int, int] = {}
        self._live: dict[int, list[tuple[ActionDef, tuple[int, ...]]]] = {}

    def invalidate(self) -> None:
        """Forget cached live-member lists (after a port status or member change)."""
        self._live.clear()

    def _where(self) -> str:
        return f"action profile '{self.name}'"

    def check_ref(self, ref: Any, where: str) -> None:
        if isinstance(ref, MemberRef) and ref.member_id not in self.members:
            raise ApiError(Code.NOT_FOUND, f"{where}: member {ref.member_id} does not exist in "
                           f"{self._where()}")
        if isinstance(ref, GroupRef):
            if not self.has_selector:
                raise ApiError(Code.INVALID_ARGUMENT, f"{where}: {self._where()} has no selector")
            if ref.group_id not in self.groups:
                raise ApiError(Code.NOT_FOUND, f"{where}: group {ref.group_id} does not exist "
                               f"in {self._where()}")

    # -- hot path ----------------------------------------------------------------------------

    def resolve(self, ref: Any, P: Any, F: list[int]) -> tuple[Any, tuple[int, ...]] | None:
        """(action def, data) for a table entry's member/group reference, or None (miss)."""
        if type(ref) is MemberRef:
            m = self.members.get(ref.member_id)
            return (m[0], m[1]) if m else None
        live = self._live.get(ref.group_id)
        if live is None:
            live = []
            for gm in self.groups.get(ref.group_id, ()):
                if gm.watch_port is not None and not self.port_up(gm.watch_port):
                    continue
                m = self.members.get(gm.member_id)
                if m is not None:
                    live.extend([(m[0], m[1])] * max(1, gm.weight))
            self._live[ref.group_id] = live
        if not live:
            return None
        return live[self.selector_hash(P, F, ()) % len(live)]

    # -- control plane -----------------------------------------------------------------------

    def _action(self, action: ActionCall, where: str) -> tuple[ActionDef, tuple[int, ...]]:
        adef = self.actions.get(action.action)
        if adef is None:
            raise ApiError(Code.INVALID_ARGUMENT, f"{where}: action '{action.action}' is not "
                           f"usable with {self._where()}")
        return adef, adef.check_args(tuple(action.args), where)

    def _member_where(self, member_id: int, exists: bool) -> str:
        """The member's name in errors, once it is known to exist (or, for an add, not)."""
        where = f"{self._where()} member {member_id}"
        if exists and member_id not in self.members:
            raise ApiError(Code.NOT_FOUND, f"{where}: does not exist")
        if not exists and member_id in self.members:
            raise ApiError(Code.ALREADY_EXISTS, f"{where}: already exists")
        return where

    def member_add(self, member_id: int, action: ActionCall) -> None:
        where = self._member_where(member_id, exists=False)
        if len(self.members) >= self.max_size > 0:
            raise ApiError(Code.RESOURCE_EXHAUSTED, f"{where}: profile is full")
        adef, data = self._action(action, where)
        self.members[member_id] = (adef, data, action)
        self.invalidate()

    def member_modify(self, member_id: int, action: ActionCall) -> None:
        where = self._member_where(member_id, exists=True)
        adef, data = self._action(action, where)
        self.members[member_id] = (adef, data, action)
        self.invalidate()

    def member_delete(self, member_id: int, in_use: bool) -> None:
        where = self._member_where(member_id, exists=True)
        if in_use or any(gm.member_id == member_id for g in self.groups.values() for gm in g):
            raise ApiError(Code.FAILED_PRECONDITION, f"{where}: still referenced")
        del self.members[member_id]
        self.invalidate()

    def _check_members(self, members: list[GroupMember], where: str) -> None:
        seen = set()
        for gm in members:
            if gm.member_id not in self.members:
                raise ApiError(Code.NOT_FOUND, f"{where}: member {gm.member_id} does not exist")
            if gm.member_id in seen:
                raise ApiError(Code.INVALID_ARGUMENT, f"{where}: member {gm.member_id} listed "
                               "twice")
            if gm.weight < 1:
                raise ApiError(Code.INVALID_ARGUMENT, f"{where}: member {gm.member_id} weight "
                               f"{gm.weight} must be at least 1")
            seen.add(gm.member_id)

    def group_add(self, group_id: int, members: list[GroupMember], max_size: int) -> None:
        where = f"{self._where()} group {group_id}"
        if not self.has_selector:
            raise ApiError(Code.INVALID_ARGUMENT, f"{where}: profile has no selector")
        if group_id in self.groups:
            raise ApiError(Code.ALREADY_EXISTS, f"{where}: already exists")
        self._check_members(members, where)
        if max_size and len(members) > max_size:
            raise ApiError(Code.RESOURCE_EXHAUSTED, f"{where}: {len(members)} members exceed "
                           f"max_size {max_size}")
        self.groups[group_id] = list(members)
        self.group_max[group_id] = max_size
        self.invalidate()

    def group_modify(self, group_id: int, members: list[GroupMember]) -> None:
        where = f"{self._where()} group {group_id}"
        if group_id not in self.groups:
            raise ApiError(Code.NOT_FOUND, f"{where}: does not exist")
        self._check_members(members, where)
        max_size = self.group_max.get(group_id, 0)
        if max_size and len(members) > max_size:
            raise ApiError(Code.RESOURCE_EXHAUSTED, f"{where}: {len(members)} members exceed "
                           f"max_size {max_size}")
        self.groups[group_id] = list(members)
        self.invalidate()

    def group_delete(self, group_id: int, in_use: bool) -> None:
        where = f"{self._where()} group {group_id}"
        if group_id not in self.groups:
            raise ApiError(Code.NOT_FOUND, f"{where}: does not exist")
        if in_use:
            raise ApiError(Code.FAILED_PRECONDITION, f"{where}: still referenced by a table entry")
        del self.groups[group_id]
        self.group_max.pop(group_id, None)
        self.invalidate()
