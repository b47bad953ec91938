"""The p4sim data plane: one BMv2 JSON program, its runtime state, and the DataPlaneApi.

Driving a DataPlane from outside (the port I/O loop, the simulator, tests)
--------------------------------------------------------------------------
The data plane owns no thread, no socket and no clock; three functions are injected, as BMv2's
``set_transmit_fn``:

- ``transmit(port, frame)``: called synchronously for every frame leaving an egress port (not
  the CPU port, whose frames go to the packet-in handler). In bit-rate mode the call happens
  when the frame's first bit leaves: the port is then busy for ``len(frame) * 8 / bps``.
- ``wake()``: called when something other than ``receive()`` may have made the next deadline
  earlier (a queue rate changed, a packet-out from the controller): the driver should call
  ``poll()`` soon.
- ``clock() -> int``: the current time in integer nanoseconds (default ``time.monotonic_ns``;
  a simulator passes its virtual clock). Every timestamp, queue delay, meter and idle timeout
  of the switch comes from it; the switch never reads the time itself.

and one object: ``rng``, the ``random.Random`` every random draw of the program comes from
(v1model's ``random()``, the "random" hash; default: one seeded from OS entropy). The switch
never touches the process-wide ``random`` state.

The driver's loop is then: ``receive(port, frame)`` (or ``receive_batch``) for every arriving
frame, which runs ingress, and egress for whatever may leave at once; ``poll()`` to run egress
for every queued packet due by ``clock()``, which returns the next deadline (ns on the same
clock) or None when nothing waits. A simulator calls ``poll()`` at that deadline (and after
every ``wake()``); the port loop sleeps in ``select`` until then. Egress ports are in packet
mode (``set_queue_rate`` / ``set_queue_depth``, simple_switch's units) unless ``set_link_rate``
puts them in bit-rate mode (see ``p4sim.switch.tm``).

One lock serializes packet processing with control-plane calls, so every API call sees and
changes a consistent state and a failed call changes nothing.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from p4sim.switch import native_select
from p4sim.switch.api import (
    ActionCall,
    ApiError,
    CloneSession,
    Code,
    DigestHandler,
    GroupMember,
    GroupRef,
    KeyField,
    MemberRef,
    MeterConfig,
    PacketInHandler,
    PortStats,
    Replica,
    SwitchStats,
    TableEntry,
)
from p4sim.switch.pipeline import CompiledProgram
from p4sim.switch.profiles import ActionProfile
from p4sim.switch.program import ProgramError, load_program
from p4sim.switch.tables import MatchTable
from p4sim.switch.tm import DEFAULT_DEPTH, TrafficManager
from p4sim.switch.v1model import Counters, V1Model

# No length check on receive, as on BMv2: frames of any length are parsed (an extract past the
# end is PacketTooShort), and whatever the ports read (pcap's default snap length, 256 KiB; the
# port layer reads as much) goes through the pipeline, frames beyond a jumbo's 9234 bytes too.

TransmitFn = Callable[[int, bytes], None]
Clock = Callable[[], int]


def _no_transmit(port: int, frame: bytes) -> None:
    """Until a transmit function is set, frames leaving the switch are discarded."""


def _no_wake() -> None:
    pass


class DataPlane:
    def __init__(self, device_id: int = 0, cpu_port: int | None = None, priorities: int = 1,
                 log: Any = None, *, transmit: TransmitFn | None = None,
                 wake: Callable[[], None] | None = None, clock: Clock | None = None,
                 trace: Any = None, rng: random.Random | None = None,
                 dataplane: str | None = None) -> None:
        self.device_id = device_id
        # Which path runs the program: "native" (generated C) or "python"; chosen at each
        # load from ``dataplane`` (auto|native|python, default $P4SIM_DATAPLANE, else auto).
        self.dataplane_mode = native_select.mode(dataplane)
        self.dataplane = "python"
        self._native: Any = None
        self.cpu_port = cpu_port
        self.lock = threading.RLock()
        self.log = log
        self.clock: Clock = clock or time.monotonic_ns
        self.t0 = self.clock()  # v1model timestamps count microseconds from here
        # Every random draw of the program (random(), the "random" hash), injected like the
        # clock: a simulator seeds one per switch, a switch process draws OS entropy (one the
        # native path draws from in C when it may run: native_select.new_rng).
        self.rng = rng if rng is not None else native_select.new_rng(None, self.dataplane_mode)
        self.trace = trace  # p4sim.switch.trace.Tracer (None: no packet trace, no cost)
        if trace is not None:
            trace.clock, trace.t0 = self.clock, self.t0
        self.tm = TrafficManager(priorities, DEFAULT_DEPTH)
        self.flow: V1Model | None = None
        self.cp: CompiledProgram | None = None
        self._json: bytes | None = None
        self.admin_up: dict[int, bool] = {}
        self.link_up: dict[int, bool] = {}
        self.port_stats: dict[int, PortStats] = {}
        self.no_program_drops = 0
        self.tx: TransmitFn = transmit or _no_transmit
        self.wake: Callable[[], None] = wake or _no_wake
        self._packet_in: PacketInHandler | None = None
        self._digest: DigestHandler | None = None
        self._idle: Any = None
        # A driver that runs the traffic manager elsewhere (the simulator's C hop) sets this:
        # called before anything here reads or changes the TM or runs the flow, it hands the
        # queues and their accounting back to ``tm`` (see cellfabric.sim.net.SimSwitch).
        self.tm_owner: Callable[[], None] | None = None

    def set_transmit_fn(self, transmit: TransmitFn) -> None:
        """BMv2's set_transmit_fn: ``transmit(port, frame)`` for every frame leaving a port."""
        self.tx = transmit

    def set_wake_fn(self, wake: Callable[[], None]) -> None:
        """``wake()`` is called when the next deadline may have moved earlier (see above)."""
        self.wake = wake

    # -- data path ---------------------------------------------------------------------------

    def _pstats(self, port: int) -> PortStats:
        st = self.port_stats.get(port)
        if st is None:
            st = self.port_stats[port] = PortStats()
        return st

    def receive(self, port: int, frame: bytes) -> None:
        """Process one frame arriving on ``port`` (ingress, then whatever egress is due)."""
        if self.tm_owner is not None:
            self.tm_owner()
        with self.lock:
            st = self._pstats(port)
            st.rx_packets += 1
            flow = self.flow
            if flow is None:
                self.no_program_drops += 1
                return
            flow.receive(port, frame)
            if self.tm.backlog or flow.pending:
                flow.service()

    def receive_batch(self, port: int, frames: list[bytes]) -> None:
        """``receive()`` for several frames from one port under one lock acquisition."""
        if self.tm_owner is not None:
            self.tm_owner()
        with self.lock:
            st = self._pstats(port)
            st.rx_packets += len(frames)
            flow, tm = self.flow, self.tm
            if flow is None:
                self.no_program_drops += len(frames)
                return
            receive = flow.receive
            for frame in frames:
                receive(port, frame)
                if tm.backlog or flow.pending:
                    flow.service()

    def poll(self) -> int | None:
        """Run egress for every queued packet due by ``clock()``; return the time (ns of the
        injected clock) the next waiting packet is due, or None when no packet waits."""
        if self.tm_owner is not None:
            self.tm_owner()
        with self.lock:
            if self.flow is not None and (self.tm.backlog or self.flow.pending):
                self.flow.service()
            return self.tm.next_deadline()

    def drain(self, timeout: float = 5.0) -> None:
        """Poll until the queues are empty, sleeping out rate pacing in real time: for tests
        and benches that run on the default (real) clock."""
        end = self.clock() + int(timeout * 1e9)
        while self.clock() < end:
            deadline = self.poll()
            if deadline is None:
                return
            time.sleep(max(0.0, min((deadline - self.clock()) / 1e9, 0.01)))

    def _output(self, port: int, frame: bytes) -> None:
        (self.port_stats.get(port) or self._pstats(port)).tx_packets += 1
        if port == self.cpu_port:
            if self._packet_in is not None:
                self._packet_in(frame)
            return
        self.tx(port, frame)

    def _digest_out(self, digest: Any) -> None:
        if self._digest is not None:
            self._digest(digest)

    # -- pipeline ----------------------------------------------------------------------------

    def load_pipeline(self, bmv2_json: bytes) -> None:
        try:
            program = load_program(bmv2_json)
            # The Python path's code waits until a packet needs it only where it may be
            # needed never (a native data plane) and where building it cannot fail (another
            # switch built this program's code): a bad program is still refused here.
            defer = program.code_checked and self.trace is None \
                and self.dataplane_mode != "python"
            cp = CompiledProgram(program, self.port_up, self.log, self.clock, self.trace,
                                 self.rng, code=not defer)
            program.code_checked = True
            state = native_select.native_state(self.dataplane_mode, bytes(bmv2_json), cp,
                                               self.rng, self.trace)
            if state is not None:
                flow: V1Model = native_select.native_flow(
                    cp, self.tm, self._output, self._digest_out, self.clock, self.t0,
                    self.log, state)
            else:
                cp.build_code()
                flow = V1Model(cp, self.tm, self._output, self._digest_out, self.clock,
                               self.t0, self.log, self.trace)
        except ProgramError as e:
            raise ApiError(Code.INVALID_ARGUMENT, f"bad BMv2 JSON: {e}") from None
        except RecursionError:
            raise ApiError(Code.INVALID_ARGUMENT, "bad BMv2 JSON: nested too deeply") from None
        except Exception as e:  # any other malformed object: reject, never crash the switch
            raise ApiError(Code.INVALID_ARGUMENT,
                           f"bad BMv2 JSON: malformed object ({type(e).__name__}: {e})") from None
        if self.tm_owner is not None:
            self.tm_owner()
        with self.lock:
            self.tm.clear(self.clock())
            self.cp = cp
            self.flow = flow
            self._native = state
            self.dataplane = "native" if state is not None else "python"
            self._json = bytes(bmv2_json)

    def pipeline_json(self) -> bytes | None:
        return self._json

    def _cp(self) -> CompiledProgram:
        if self.cp is None:
            raise ApiError(Code.FAILED_PRECONDITION, "no pipeline loaded")
        return self.cp

    def _table(self, name: str) -> MatchTable:
        return self._indexed("table", self._cp().tables, name)

    def _profile(self, name: str) -> ActionProfile:
        return self._indexed("action profile", self._cp().profiles, name)

    # -- tables ------------------------------------------------------------------------------

    def table_insert(self, table: str, entry: TableEntry) -> None:
        with self.lock:
            self._table(table).insert(entry)

    def table_modify(self, table: str, entry: TableEntry) -> None:
        with self.lock:
            self._table(table).modify(entry)

    def table_delete(self, table: str, key: tuple[KeyField, ...], priority: int) -> None:
        with self.lock:
            self._table(table).delete(key, priority)

    def table_entries(self, table: str) -> list[TableEntry]:
        with self.lock:
            return self._table(table).entry_list()

    def table_clear(self, table: str) -> None:
        with self.lock:
            self._table(table).clear()

    def table_set_default(self, table: str, action: ActionCall | None) -> None:
        with self.lock:
            self._table(table).set_default(action)

    def table_get_default(self, table: str) -> ActionCall:
        with self.lock:
            return self._table(table).get_default()

    def direct_counter_write(self, table: str, key: tuple[KeyField, ...], priority: int,
                             packets: int, bytes_: int) -> None:
        with self.lock:
            self._table(table).set_direct_counter(key, priority, packets, bytes_)

    def direct_meter_set(self, table: str, key: tuple[KeyField, ...], priority: int,
                         config: MeterConfig | None) -> None:
        with self.lock:
            self._table(table).set_direct_meter(key, priority, config)

    # -- action profiles ---------------------------------------------------------------------

    def member_add(self, profile: str, member_id: int, action: ActionCall) -> None:
        with self.lock:
            self._profile(profile).member_add(member_id, action)

    def member_modify(self, profile: str, member_id: int, action: ActionCall) -> None:
        with self.lock:
            self._profile(profile).member_modify(member_id, action)

    def member_delete(self, profile: str, member_id: int) -> None:
        ref = MemberRef(member_id)  # entries holding it keep the member from deletion
        with self.lock:
            self._profile(profile).member_delete(member_id, self._cp().refers_to(profile, ref))

    def members(self, profile: str) -> dict[int, ActionCall]:
        with self.lock:
            return {mid: m[2] for mid, m in self._profile(profile).members.items()}

    def group_add(self, profile: str, group_id: int, members: list[GroupMember],
                  max_size: int = 0) -> None:
        with self.lock:
            self._profile(profile).group_add(group_id, members, max_size)

    def group_modify(self, profile: str, group_id: int, members: list[GroupMember]) -> None:
        with self.lock:
            self._profile(profile).group_modify(group_id, members)

    def group_delete(self, profile: str, group_id: int) -> None:
        with self.lock:
            self._profile(profile).group_delete(
                group_id, self._cp().refers_to(profile, GroupRef(group_id)))

    def groups(self, profile: str) -> dict[int, list[GroupMember]]:
        with self.lock:
            return {g: list(m) for g, m in self._profile(profile).groups.items()}

    # -- counters, meters, registers ---------------------------------------------------------

    def _indexed(self, kind: str, table: dict, name: str, index: int | None = None) -> Any:
        obj = table.get(name)
        if obj is None:
            raise ApiError(Code.NOT_FOUND, f"unknown {kind} '{name}'")
        if index is not None and not 0 <= index < obj.size:
            raise ApiError(Code.OUT_OF_RANGE, f"{kind} '{name}': index {index} out of range "
                           f"0..{obj.size - 1}")
        return obj

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        with self.lock:
            c = self._indexed("counter", self._cp().counters, name, index)
            return c.packets[index], c.bytes[index]

    def counter_packets(self, name: str, indices: list[int]) -> list[int]:
        """``counter_read(name, i)[0]`` for each of ``indices``, under one lock (a sampler
        reads every port of every switch many times a run)."""
        with self.lock:
            c = self._indexed("counter", self._cp().counters, name)
            for i in indices:
                if not 0 <= i < c.size:  # counter_read's error for the first out of range
                    self._indexed("counter", self._cp().counters, name, i)
            packets = c.packets
            return [packets[i] for i in indices]

    def counter_write(self, name: str, index: int, packets: int, bytes_: int) -> None:
        with self.lock:
            c = self._indexed("counter", self._cp().counters, name, index)
            c.packets[index], c.bytes[index] = packets, bytes_

    def counter_size(self, name: str) -> int:
        with self.lock:
            return self._indexed("counter", self._cp().counters, name).size

    def meter_set(self, name: str, index: int, config: MeterConfig | None) -> None:
        with self.lock:
            m = self._indexed("meter", self._cp().meters, name, index)
            m.meters[index].configure(config)

    def meter_get(self, name: str, index: int) -> MeterConfig | None:
        with self.lock:
            return self._indexed("meter", self._cp().meters, name, index).meters[index].config

    def register_read(self, name: str, index: int) -> int:
        with self.lock:
            return self._indexed("register", self._cp().registers, name, index).values[index]

    def register_write(self, name: str, index: int, value: int) -> None:
        with self.lock:
            self._indexed("register", self._cp().registers, name, index).set(index, value)

    def register_size(self, name: str) -> int:
        with self.lock:
            return self._indexed("register", self._cp().registers, name).size

    # -- idle timeouts (an addition to DataPlaneApi: P4Runtime IdleTimeoutNotification) -----

    def set_idle_handler(self, handler: Any) -> None:
        """``handler(table_name, [TableEntry, ...])`` receives entries of tables with
        ``support_timeout`` that were not hit for their ``timeout_ms`` (once per idle period).
        The port layer calls ``check_idle()`` periodically."""
        self._idle = handler

    def check_idle(self) -> None:
        if self._idle is None or self.cp is None:
            return
        with self.lock:
            expired = self.cp.idle_entries(self.clock())
        for name, entries in expired.items():
            self._idle(name, entries)

    # -- parser value sets (an addition to DataPlaneApi: P4Runtime ValueSetEntry) ------------

    def parse_vset_set(self, name: str, values: list[int]) -> None:
        """Replace the members of parser value set ``name`` (values of its compressed width)."""
        with self.lock:
            self._cp().set_vset(name, values)

    def parse_vset_get(self, name: str) -> list[int]:
        with self.lock:
            return sorted(self._cp().vset(name))

    # -- packet replication engine -----------------------------------------------------------

    def _flow(self) -> V1Model:
        if self.flow is None:
            raise ApiError(Code.FAILED_PRECONDITION, "no pipeline loaded")
        return self.flow

    def mcast_group_set(self, group_id: int, replicas: list[Replica]) -> None:
        with self.lock:
            self._flow().set_mcast_group(group_id, replicas)

    def mcast_group_delete(self, group_id: int) -> None:
        with self.lock:
            self._flow().delete_mcast_group(group_id)

    def mcast_groups(self) -> dict[int, list[Replica]]:
        with self.lock:
            return {g: list(r) for g, r in self._flow().mcast.items()}

    def clone_session_set(self, session: CloneSession) -> None:
        with self.lock:
            self._flow().clones[session.session_id] = session

    def clone_session_delete(self, session_id: int) -> None:
        with self.lock:
            if self._flow().clones.pop(session_id, None) is None:
                raise ApiError(Code.NOT_FOUND, f"clone session {session_id} does not exist")

    def clone_sessions(self) -> dict[int, CloneSession]:
        with self.lock:
            return dict(self._flow().clones)

    # -- controller packet I/O ---------------------------------------------------------------

    def packet_out(self, frame: bytes) -> None:
        if self.cpu_port is None:
            raise ApiError(Code.FAILED_PRECONDITION, "no CPU port configured")
        self.receive(self.cpu_port, frame)
        self.wake()  # it may have queued a packet: the driver's deadline may have moved

    def set_packet_in_handler(self, handler: PacketInHandler | None) -> None:
        self._packet_in = handler

    def set_digest_handler(self, handler: DigestHandler | None) -> None:
        self._digest = handler

    # -- ports and queues --------------------------------------------------------------------

    def port_up(self, port: int) -> bool:
        return self.admin_up.get(port, True) and self.link_up.get(port, True)

    def _port_changed(self) -> None:
        if self.cp is not None:
            for prof in self.cp.profiles.values():
                prof.invalidate()

    def set_port_up(self, port: int, up: bool) -> None:
        with self.lock:
            self.admin_up[port] = bool(up)
            self._port_changed()

    def set_link_up(self, port: int, up: bool) -> None:
        """Link status as the port layer observes it (carrier)."""
        with self.lock:
            if self.link_up.get(port, True) != up:
                self.link_up[port] = up
                self._port_changed()

    def add_rx_dropped(self, port: int, frames: int) -> None:
        """Frames the port layer read but could not hand over whole (longer than its snap
        length, as BMv2's pcap ports drop them): received and dropped as malformed."""
        with self.lock:
            st = self._pstats(port)
            st.rx_packets += frames
            st.rx_dropped_malformed += frames

    def add_socket_drops(self, port: int, dropped: int) -> None:
        """Frames the kernel dropped on ``port``'s socket (the port layer reports them)."""
        with self.lock:
            self._pstats(port).rx_socket_drops += dropped

    def _set_tm(self, what: str, values: tuple[int, ...], update: Callable[[], None],
                wake: bool = True) -> None:
        """Apply a traffic-manager setting whose ``values`` must be >= 0 (``what`` names them
        in the error); then ``wake``: the next deadline may have moved earlier."""
        if min(values) < 0:
            raise ApiError(Code.INVALID_ARGUMENT, f"{what} must be >= 0")
        if self.tm_owner is not None:
            self.tm_owner()
        with self.lock:
            update()
        if wake:
            self.wake()

    def set_queue_rate(self, pps: int, port: int | None = None,
                       priority: int | None = None) -> None:
        self._set_tm(f"queue rate {pps}", (pps,), lambda: self.tm.set_rate(pps, port, priority))

    def set_port_rate(self, pps: int, port: int, below: int = 0) -> None:
        """A line rate shared by the port's priority queues (p4sim's addition to
        simple_switch's per-queue rates); with ``below``, only by the priorities below it
        (the others take no line time, see ``tm.Link.below``)."""
        self._set_tm(f"port rate {pps} and priority bound {below}", (pps, below),
                     lambda: self.tm.set_port_rate(pps, port, below))

    def set_queue_depth(self, packets: int, port: int | None = None) -> None:
        self._set_tm(f"queue depth {packets}", (packets,),
                     lambda: self.tm.set_depth(packets, port), wake=False)

    def set_link_rate(self, bps: int, buffer_bytes: int = 0, port: int | None = None) -> None:
        """Bit-rate mode: serve ``port`` (None: every port) at ``bps`` bits per second shared
        by its priority queues, buffering at most ``buffer_bytes`` (0: no byte limit; the
        packet depth of set_queue_depth still applies). ``bps`` 0: back to packet mode."""
        self._set_tm(f"link rate {bps} and buffer {buffer_bytes}", (bps, buffer_bytes),
                     lambda: self.tm.set_link(bps, buffer_bytes, port))

    def stats(self) -> SwitchStats:
        if self.tm_owner is not None:
            self.tm_owner()
        with self.lock:
            tm, now = self.tm, self.clock()
            known = set(self.port_stats) | set(tm.drops) | set(tm.busy_tx)
            ports = {}
            for p in sorted(known):
                s = self.port_stats.get(p) or PortStats()
                ports[p] = PortStats(s.rx_packets, s.tx_packets, s.rx_dropped_malformed,
                                     tm.drops.get(p, 0), s.rx_socket_drops,
                                     tm.busy_seconds(p, now),
                                     tm.busy_tx.get(p, 0), tm.rate(p),
                                     tm.port_backlog.get(p, 0))
            counters = self.flow.counters if self.flow is not None else Counters()
            return SwitchStats(ports, counters.parser_errors,
                               counters.pipeline_drops + self.no_program_drops)


native_select.install_control_hooks(DataPlane)
