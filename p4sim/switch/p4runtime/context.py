"""Per-pipeline server state: the P4Info index, the data plane, and the little bookkeeping PI's
frontend keeps beside the target (controller metadata of entries, how a client spelled ports,
group max sizes) so that reads give back exactly what was written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from p4.v1 import p4runtime_pb2 as p4rt

from p4sim.switch.api import ApiError, DataPlaneApi, KeyField

from .codec import INVALID_ARGUMENT, UNKNOWN, P4RTError
from .p4info import PipelineInfo, Prefix

T = TypeVar("T")

EntryKey = tuple[tuple[KeyField, ...], int]  # (key in JSON order, priority)


@dataclass
class EntryMeta:
    controller_metadata: int = 0
    metadata: bytes = b""
    idle_timeout_ns: int = 0


@dataclass
class WatchSpelling:
    """How a group member's watch port was given: the deprecated int32 ``watch`` or the bytes
    ``watch_port`` (and with how many bytes), so that reads echo the same form."""

    kind: str  # "watch" or "watch_port"
    nbytes: int = 0


@dataclass
class GroupMeta:
    max_size: int
    watch: dict[int, WatchSpelling] = field(default_factory=dict)


@dataclass
class OneShotGroup:
    group_id: int
    member_ids: list[int]
    action_set: p4rt.ActionProfileActionSet


@dataclass
class Context:
    dp: DataPlaneApi
    info: PipelineInfo
    registers_enabled: bool = False
    entries: dict[int, dict[EntryKey, EntryMeta]] = field(default_factory=dict)
    groups: dict[tuple[int, int], GroupMeta] = field(default_factory=dict)
    # (group id or clone session id + 1<<16) -> {(instance, port): port byte width or 0}
    replica_width: dict[int, dict[tuple[int, int], int]] = field(default_factory=dict)
    # action profile id -> "manual" (members/groups by id) or "oneshot" (action sets in entries)
    selector_mode: dict[int, str] = field(default_factory=dict)
    # (table id, entry key) -> the group created for that entry's one-shot action set
    oneshot: dict[tuple[int, EntryKey], OneShotGroup] = field(default_factory=dict)
    next_oneshot_id: int = 1

    def check_id(self, pid: int, prefix: int) -> None:
        if pid >> 24 != prefix or pid not in self.info.ids:
            raise P4RTError(INVALID_ARGUMENT, "Invalid P4 id")

    def table(self, tid: int):
        self.check_id(tid, Prefix.TABLE)
        return self.info.tables[tid]

    def table_entries_meta(self, tid: int) -> dict[EntryKey, EntryMeta]:
        return self.entries.setdefault(tid, {})

    def use_selector_mode(self, profile_id: int, mode: str) -> None:
        """PI lets an action profile be programmed either with explicit members/groups or with
        one-shot action sets, never both at once; the mode is free while the profile is empty."""
        current = self.selector_mode.get(profile_id)
        if current == mode:
            return
        name = self.info.profiles[profile_id].name
        if current is None or not (self.dp.members(name) or self.dp.groups(name)):
            self.selector_mode[profile_id] = mode
            return
        raise P4RTError(INVALID_ARGUMENT,
                        "Invalid attempt to mix action selector programming modes")


def target(call: Callable[[], T], message: str) -> T:
    """Run a data-plane call; its failure is a target error, reported as PI does (UNKNOWN)."""
    try:
        return call()
    except ApiError as err:
        raise P4RTError(UNKNOWN, f"{message}: {err.message}") from None
