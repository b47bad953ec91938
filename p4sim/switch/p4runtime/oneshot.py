"""One-shot action selector programming: a table entry carrying an ActionProfileActionSet gets
a group of its own (members and group created with ids the server picks), as PI does it."""

from __future__ import annotations

import contextlib

from p4.v1 import p4runtime_pb2 as p4rt

from p4sim.switch import api

from .codec import INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNIMPLEMENTED, P4RTError, to_port
from .context import Context, OneShotGroup, target
from .p4info import Prefix, TableInfo

# Ids of server-made members/groups: high, so that they read as obviously not the client's.
ONESHOT_ID_BASE = 1 << 30


def _err(message: str, code: int = INVALID_ARGUMENT) -> P4RTError:
    return P4RTError(code, message)


def create(ctx: Context, t: TableInfo, action_set: p4rt.ActionProfileActionSet) -> OneShotGroup:
    """Validate the action set and create its members and group in the data plane."""
    from .tables import build_action  # tables imports this module

    prof = ctx.info.profiles[t.implementation_id]
    ctx.use_selector_mode(prof.id, "oneshot")
    actions = list(action_set.action_profile_actions)
    if not actions:
        raise _err("No support for empty action profile groups", UNIMPLEMENTED)
    allowed = ctx.info.profile_actions(prof.id)
    calls = []
    for a in actions:
        ctx.check_id(a.action.action_id, Prefix.ACTION)
        if a.action.action_id not in allowed:
            raise _err("Invalid action for action profile")
        calls.append(build_action(ctx, a.action))
    if any(a.weight <= 0 for a in actions):
        raise _err("Member weight must be a positive integer value")
    if prof.max_group_size > 0 and sum(a.weight for a in actions) > prof.max_group_size:
        raise _err("Sum of weights exceeds static max_group_size (from P4Info)",
                   RESOURCE_EXHAUSTED)
    watches = []
    for a in actions:
        kind = a.WhichOneof("watch_kind")
        watches.append(to_port(a.watch_port) if kind == "watch_port"
                       else a.watch if kind == "watch" else None)
    group = OneShotGroup(_next_id(ctx), [], p4rt.ActionProfileActionSet())
    group.action_set.CopyFrom(action_set)
    try:
        for call in calls:
            mid = _next_id(ctx)
            target(lambda m=mid, c=call: ctx.dp.member_add(prof.name, m, c),
                   "Error when creating member on target")
            group.member_ids.append(mid)
        members = [api.GroupMember(mid, a.weight, w)
                   for mid, a, w in zip(group.member_ids, actions, watches)]
        target(lambda: ctx.dp.group_add(prof.name, group.group_id, members, 0),
               "Error when creating group on target")
    except P4RTError:
        _drop_members(ctx, prof.name, group.member_ids)
        raise
    return group


def delete(ctx: Context, t: TableInfo, group: OneShotGroup) -> None:
    name = ctx.info.profiles[t.implementation_id].name
    with contextlib.suppress(api.ApiError):  # already gone: nothing left to release
        ctx.dp.group_delete(name, group.group_id)
    _drop_members(ctx, name, group.member_ids)


def _drop_members(ctx: Context, profile: str, member_ids: list[int]) -> None:
    for mid in member_ids:
        with contextlib.suppress(api.ApiError):
            ctx.dp.member_delete(profile, mid)


def _next_id(ctx: Context) -> int:
    ctx.next_oneshot_id += 1
    return ONESHOT_ID_BASE + ctx.next_oneshot_id
