"""The route agent: one per switch, it keeps fabric.p4's routes and next-hop groups equal to the
kernel forwarding table FRR's zebra maintains in the switch's namespace, as a white-box NOS's
orchestration agent does (SONiC/PINS: zebra -> kernel/FPM -> P4Runtime).

``sync()`` makes one pass over the whole table, reading the switch first; ``run(stop)``
follows the table over netlink until ``stop`` is set, and after each burst of changes writes
only what differs from what it wrote last (controlplane.fabric_controller's diff), under its own
P4Runtime role. Every write batch is recorded in ``writes`` (wall-clock time, so the harness can
set it against a failure's injection and BFD's detection, and the prefixes it changed).

The connection is the caller's (a controlplane SwitchConnection, connected with
``role=ROUTE_AGENT_ROLE, role_config=route_agent_role_config()``, to a switch whose pipeline is
already set). On real BMv2 pass ``modify_groups=False`` (its PI cannot shrink a group whose
members watch ports: controlplane.route_entries; an agent that finds out by the switch's
error switches to it by itself), and give the agent's connection the highest
election id once the controller has written the rest: BMv2's PI arbitrates all roles as one,
so only one client of a switch may write at a time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from controlplane.errors import ControlPlaneError, P4RuntimeError
from controlplane.fabric_controller import (
    SwitchDiff,
    apply_diff,
    desired_protos,
    diff_switch,
    read_actual,
)
from controlplane.kernel_routes import KernelRoute, KernelRouteWatch, read_routes
from controlplane.route_entries import (
    RouteEntries,
    RouteMapper,
    route_agent_reads,
    switch_forwarded_prefixes,
)

MAX_BURST_S = 0.2
# How often an agent whose switch holds its table looks up from the watch (to see ``stop``):
# a fabric's agents are threads of the harness, and twenty of them waking every 0.1 s took
# ~0.03-0.06 of a core from a machine the emulated fabric already keeps busy.
IDLE_S = 1.0
Installed = dict[tuple[str, object], p4runtime_pb2.Entity]


@dataclass(frozen=True)
class WriteBatch:
    """One pass that wrote something: when it finished writing, what it wrote, and why."""

    wall_time: float  # time.time() after the last write of the batch
    monotonic: float  # time.monotonic() at the same moment
    inserts: int
    modifies: int
    deletes: int
    prefixes: tuple[str, ...]  # the kernel routes that changed since the previous batch
    seen: float | None = None  # time.monotonic() the burst's first notification arrived


class RouteAgent:
    """One switch's agent. ``netns``: the namespace whose table main it follows (None: this
    one); ``switch``: the switch's name (its hash salt); ``port_of_ifname``: the namespace's
    port interfaces (TAPs) -> front-panel ports; ``connection``: a connected SwitchConnection;
    ``spray``: the run sprays (groups get ``spray_mode``, else ecmp). The rest: see
    controlplane.route_entries.RouteMapper."""

    def __init__(self, netns: str | None, switch: str, port_of_ifname: Mapping[str, int],
                 connection, spray: bool, *, spray_mode: str = "spray",
                 include_connected: bool = False, modify_groups: bool = True,
                 settle_s: float = 0.005, log: Callable[[str], None] = print) -> None:
        self.netns = netns
        self.switch = switch
        self.conn = connection
        self.mapper = RouteMapper(switch, port_of_ifname, spray, spray_mode=spray_mode,
                                  include_connected=include_connected,
                                  modify_groups=modify_groups)
        self.settle_s = settle_s  # how long a burst of notifications may take to arrive
        self.log = log
        self.writes: list[WriteBatch] = []
        self.errors: list[str] = []  # one line per failure (a retry failing alike: no new line)
        self.errors_cleared = 0  # errors before a pass that succeeded
        self.table: dict[str, KernelRoute] = {}  # the kernel table last programmed
        self.entries = RouteEntries()  # what that table became
        self._installed: Installed | None = None  # None: read the switch before the next diff
        self.failed: str | None = None  # why run() ended, if it did other than by stop
        self.watch_restarts = 0  # netlink watches that failed and were opened again
        self._lock = threading.Lock()

    # -- one pass -------------------------------------------------------------------------------
    def sync(self) -> SwitchDiff:
        """Read the whole kernel table and the switch's entries, write the difference."""
        table = read_routes(self.netns)
        with self._lock:
            self._installed = None
            return self._program(table)

    def _program(self, table: dict[str, KernelRoute], seen: float | None = None) -> SwitchDiff:
        changed = _changed_prefixes(self.table, table)
        entries = self.mapper.map(table)
        desired = desired_protos(self.conn, entries.entities)
        if self._installed is None:
            self._installed = read_actual(self.conn, route_agent_reads())
        diff = diff_switch(self.switch, desired, self._installed)
        try:
            apply_diff(self.conn, diff)
        except P4RuntimeError as err:
            self._installed = None  # part may have been written: read back before the next
            if not self._cannot_modify_groups(err, diff):
                raise
            return self._program(table, seen)
        except ControlPlaneError:
            self._installed = None
            raise
        self._installed = desired
        self.table, self.entries = dict(table), entries
        if diff.writes:
            self.writes.append(WriteBatch(time.time(), time.monotonic(), len(diff.inserts),
                                          len(diff.modifies), len(diff.deletes), changed,
                                          seen))
        return diff

    def _cannot_modify_groups(self, err: P4RuntimeError, diff: SwitchDiff) -> bool:
        """Real BMv2 fails a group modify that drops a watched member with UNKNOWN (and may
        or may not have applied it): from then on a changed port set gets a new group, and
        the group ids kept are the switch's own (controlplane.route_entries)."""
        modified_group = any(e.WhichOneof("entity") == "action_profile_group"
                             for e in diff.modifies)
        if err.code != "UNKNOWN" or not modified_group or not self.mapper.modify_groups:
            return False
        self.log(f"route agent {self.switch}: the switch cannot shrink a group in place "
                 f"({err}); changed next-hop sets get new groups from now on")
        self.mapper.modify_groups = False
        actual = read_actual(self.conn, route_agent_reads())
        self.mapper.groups = {
            tuple(sorted(m.member_id for m in e.action_profile_group.members)):
            e.action_profile_group.group_id
            for e in actual.values() if e.WhichOneof("entity") == "action_profile_group"}
        self._installed = actual
        return True

    def _program_logged(self, table: dict[str, KernelRoute], seen: float | None = None) -> None:
        try:
            with self._lock:
                self._program(table, seen)
        except ControlPlaneError as err:
            line = f"route agent {self.switch}: {err}"
            if not self.errors or self.errors[-1] != line:  # a pass retried every poll
                self.errors.append(line)
                self.log(line)
        else:
            self.errors_cleared = len(self.errors)

    # -- following the table ----------------------------------------------------------------------
    def run(self, stop: threading.Event, poll_s: float = 0.1, idle_s: float = IDLE_S) -> None:
        """Program the table, then follow it until ``stop`` is set (checked every ``idle_s``
        while the switch holds the table, every ``poll_s`` while a pass is to be retried).
        A pass that fails to write is logged once and retried every ``poll_s`` from a fresh
        read of the switch. A namespace that cannot be read raises KernelRouteError; anything
        else that ends the thread is kept in ``failed`` (the harness's readiness check sees
        it: an agent gone silent would freeze the switch's routes as they were)."""
        try:
            asyncio.run(self._follow(stop, poll_s, idle_s))
        except BaseException as err:
            self.failed = f"{type(err).__name__}: {err}"
            self.log(f"route agent {self.switch}: stopped following the table: {self.failed}")
            raise

    async def _follow(self, stop: threading.Event, poll_s: float, idle_s: float) -> None:
        opened = False
        while not stop.is_set():
            try:
                async with KernelRouteWatch(self.netns) as watch:
                    opened = True
                    self._installed = None
                    self._program_logged(dict(watch.table))
                    while not stop.is_set():
                        # a change wakes the watch at once; the wait's length only sets
                        # how soon a failed pass is retried and ``stop`` is seen
                        wait = poll_s if self._installed is None else idle_s
                        seen = await self._burst(watch, wait)
                        if seen is not None and not stop.is_set():
                            self._program_logged(dict(watch.table), seen)
            except OSError as err:
                if not opened:
                    raise
                # a receive buffer that overflowed (ENOBUFS: notifications were lost) fails
                # every later read on that socket: a new one's dump is the table again
                self.watch_restarts += 1
                self.log(f"route agent {self.switch}: netlink watch failed ({err}); "
                         "reading the table again")
                await asyncio.sleep(poll_s)

    def forwarded_prefixes(self) -> set[str]:
        """The prefixes the switch forwards now (its entries read back: route, group_select
        entry, a group with members)."""
        return switch_forwarded_prefixes(self.conn)

    async def _burst(self, watch: KernelRouteWatch, poll_s: float) -> float | None:
        """Wait for changes, then take those that follow within ``settle_s`` of each other
        (zebra installs a withdrawal's routes one message each); when the first arrived, or
        None if none came."""
        first = await watch.changes(poll_s)
        if first == []:
            # a failed pass is retried
            return time.monotonic() if self._installed is None else None
        seen = time.monotonic()
        # a table that never stops changing is still programmed now and then
        until = time.monotonic() + MAX_BURST_S
        while time.monotonic() < until:
            if await watch.changes(self.settle_s) == []:
                break
        return seen


def _changed_prefixes(before: Mapping[str, KernelRoute],
                      after: Mapping[str, KernelRoute]) -> tuple[str, ...]:
    return tuple(sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p)))
