"""The receiving host: reorder cells per queue pair, deliver whole messages in order, and send
ACK/SACK/NAK, CNPs (DCQCN), INT echoes (HPCC), credit grants, and host-sink INT reports.

Per flow (source IP, QPN): ACK every ``ack_every`` cells, or after ``ack_delay_s``, or at once on
a duplicate or a completed message; NAK when the next expected cell is still missing
``nak_holdoff_s`` after a later one arrived; at most one CNP per ``cnp_interval_s`` when cells
arrive with ECN = CE; the most recent INT stack rides back in the next ACK.
"""

from __future__ import annotations

import math
import select
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hosts import wire
from hosts.cc.credit import CreditGranter, CreditParams
from hosts.cells import RoceFrame, UdpFramer, parse_roce
from hosts.config import ReceiverConfig
from hosts.nic import NicPort, PacketSocketPort
from hosts.reorder import MessageAssembler, ReorderBuffer
from hosts.sack import encode_ack, encode_cnp

# The longest the emulated loop sleeps with nothing due: how soon it sees the run's end (a
# linger or duration running out, a stop request). Everything else wakes it on time: a frame
# on a socket, or the next deadline of ``tick``. Polling on a fixed fine tick instead cost
# each idle receiver 13% of a core, and a fat-tree's 16 of them the machine's two cores.
IDLE_WAIT_S = 0.02


@dataclass
class Flow:
    key: tuple[bytes, int]
    qpn: int
    port: NicPort
    framer: UdpFramer
    reorder: ReorderBuffer
    assembler: MessageAssembler = field(default_factory=MessageAssembler)
    pending: int = 0
    last_ack: float = 0.0
    last_cnp: float = float("-inf")
    last_nak: float = float("-inf")
    gap_expected: int = -1
    gap_since: float = 0.0
    int_block: bytes | None = None
    cells: int = 0
    ce_cells: int = 0
    int_cells: int = 0
    cnps: int = 0
    acks: int = 0
    naks: int = 0
    grants: int = 0
    grant_dirty: bool = False  # the grant moved since the last ACK
    grant_sent: int = 0  # the grant the last ACK carried
    messages: list[dict[str, float | int]] = field(default_factory=list)
    framers: dict[int, UdpFramer] = field(default_factory=dict)  # per port, built once
    delivered_messages: int = 0


class Receiver:
    """One receiving host. Clock and NIC ports are injected as in ``hosts.sender.Sender``: a
    simulator calls ``on_frame`` per frame and ``tick`` at ``next_deadline``."""

    def __init__(self, cfg: ReceiverConfig, clock: Callable[[], float] = time.monotonic,
                 ports: list[NicPort] | None = None, report_frames: bool = False) -> None:
        """``report_frames``: Telemetry Reports leave as UDP frames of the NIC port the cell
        came in on, to its next hop (a simulator's hosts have no kernel socket to send them
        through); otherwise through a UDP socket, routed by the host's kernel."""
        if not cfg.ifaces:
            raise ValueError("--iface: need at least one interface")
        self.cfg = cfg
        self.clock = clock
        self.ports = ports if ports is not None else [
            PacketSocketPort(i, name) for i, name in enumerate(cfg.ifaces)]
        self.flows: dict[tuple[bytes, int], Flow] = {}
        self.granter = (CreditGranter(CreditParams(cfg.credit_cells_per_s,
                                                   initial_cells=cfg.credit_initial_cells,
                                                   idle_s=cfg.credit_idle_s,
                                                   window_cells=cfg.credit_window_cells,
                                                   batch_cells=cfg.ack_every))
                        if cfg.credit_cells_per_s > 0 else None)
        self.not_roce = 0
        self.malformed = 0
        self.messages_total = 0
        self.reports_sent = 0
        self._report_seq = 0
        self._report_sock: socket.socket | None = None
        self._report_frames = report_frames and cfg.collector is not None
        self._report_framers: dict[tuple[int, bytes], UdpFramer] = {}

    def open(self) -> None:
        for port in self.ports:
            port.open()
        if self.cfg.collector and not self._report_frames:
            self._report_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def close(self) -> None:
        for port in self.ports:
            port.close()
        if self._report_sock:
            self._report_sock.close()

    # -- main loop -----------------------------------------------------------------------------
    def run(self, should_stop: Callable[[], bool] = lambda: False) -> dict[str, object]:
        cfg = self.cfg
        start = self.clock()
        rx = bytearray(9216)
        socks = [p.sock for p in self.ports]
        done_at: float | None = None
        while not should_stop():
            now = self.clock()
            if cfg.duration_s and now - start >= cfg.duration_s:
                break
            if cfg.expect_messages and done_at is None and \
                    self.messages_total >= cfg.expect_messages:
                done_at = now
            if done_at is not None and now - done_at >= cfg.linger_s:
                break
            select.select(socks, [], [], self._wait_s(now, done_at))
            for port in self.ports:
                for _ in range(256):
                    n = port.recv_into(rx)
                    if not n:
                        break
                    self.on_frame(rx, n, self.clock(), port)
            self.tick(self.clock())
        return self.metrics(self.clock() - start)

    def _wait_s(self, now: float, done_at: float | None) -> float:
        """How long the loop may sleep: until ``tick`` is next due or the run may end."""
        wait = IDLE_WAIT_S
        due = self.next_deadline(now)
        if due is not None:
            wait = min(wait, due - now)
        if done_at is not None:
            wait = min(wait, done_at + self.cfg.linger_s - now)
        return max(0.0, wait)

    def on_frame(self, buf: bytes | bytearray, n: int, now: float, port: NicPort,
                 parsed: RoceFrame | None = None) -> None:
        f = parsed if parsed is not None else parse_roce(buf, n)
        if f is None:
            self.not_roce += 1
            return
        if f.opcode not in wire.DATA_OPCODES:
            return
        flow = self.flows.get((f.src_ip, f.qpn)) or self._new_flow(f, port)
        if flow.port is not port:  # answer on the port the peer's cells now arrive on
            flow.port = port
            flow.framer = flow.framers.get(port.index) or self._framer(f, port)
            flow.framers[port.index] = flow.framer
        flow.cells += 1
        if f.ecn == wire.ECN_CE:
            flow.ce_cells += 1
            if now - flow.last_cnp >= self.cfg.cnp_interval_s:
                flow.last_cnp = now
                flow.cnps += 1
                flow.port.send(flow.framer.frame(encode_cnp(flow.qpn)))
        if f.int_block is not None:
            flow.int_cells += 1
            flow.int_block = f.int_block
            if self._report_sock is not None or self._report_frames:
                self._report_int(buf, f, flow.port)
        rb = flow.reorder
        seq = rb.unwrap(f.psn)
        dup = rb.has(seq)
        if self.granter is not None:
            self.granter.on_cell(flow.key, seq, now, new=not dup)
        payload = bytes(buf[f.body_off:f.body_end])
        completed = False
        for done_seq, arrived, (opcode, body, pad) in rb.push(seq, (f.opcode, payload, f.pad),
                                                              now):
            msg = flow.assembler.add(opcode, body, pad, arrived, now)
            if msg is not None:
                completed = True
                if self.granter is not None:
                    self.granter.on_message_done(flow.key, done_seq)
                flow.delivered_messages += 1
                self.messages_total += 1
                if len(flow.messages) < self.cfg.keep_records:
                    flow.messages.append({"index": msg.index, "length": msg.length,
                                          "crc32": msg.crc32,
                                          "completion_s": msg.completed - msg.first_arrival})
        flow.pending += 1
        if dup or completed or flow.pending >= self.cfg.ack_every:
            self._send_ack(flow, now)

    def _new_flow(self, f: RoceFrame, port: NicPort) -> Flow:
        flow = Flow((f.src_ip, f.qpn), f.qpn, port, self._framer(f, port),
                    ReorderBuffer(window=self.cfg.window))
        # Connections start at a PSN both ends know (set up out of band, like RC QPs).
        flow.reorder.expected = self.cfg.start_psn
        self.flows[flow.key] = flow
        return flow

    @staticmethod
    def _framer(f: RoceFrame, port: NicPort) -> UdpFramer:
        """Replies go back to where the cell came from (its source MAC and IP, our port)."""
        return UdpFramer(port.mac, _mac_str(f.src_mac), socket.inet_ntoa(f.dst_ip),
                         socket.inet_ntoa(f.src_ip), f.sport, wire.ROCE_UDP_PORT)

    def _send_ack(self, flow: Flow, now: float, nak: bool = False) -> None:
        rb = flow.reorder
        grant = None
        if self.granter is not None and flow.key in self.granter.flows:
            grant = self.granter.flows[flow.key].granted
        body = encode_ack(flow.qpn, rb.expected - 1, flow.delivered_messages, (), grant,
                          flow.int_block, nak=nak, bitmap=rb.sack_bitmap())
        flow.int_block = None
        flow.grant_dirty = False
        flow.grant_sent = grant if grant is not None else flow.grant_sent
        flow.port.send(flow.framer.frame(body))
        flow.pending = 0
        flow.last_ack = now
        if nak:
            flow.naks += 1
        else:
            flow.acks += 1

    def tick(self, now: float) -> None:
        cfg = self.cfg
        for flow in self.flows.values():
            rb = flow.reorder
            if flow.pending and now - flow.last_ack >= cfg.ack_delay_s:
                self._send_ack(flow, now)
            if rb.depth:
                if flow.gap_expected != rb.expected:
                    flow.gap_expected, flow.gap_since = rb.expected, now
                elif now - flow.gap_since >= cfg.nak_holdoff_s and \
                        now - flow.last_nak >= cfg.nak_holdoff_s:
                    flow.last_nak = now
                    self._send_ack(flow, now, nak=True)
        if self.granter is not None:
            for key in self.granter.tick(now):
                self.flows[key].grants += 1
                self.flows[key].grant_dirty = True
            hold = self._grant_holdoff()
            for flow in self.flows.values():
                if flow.grant_dirty and (self._grant_batch_full(flow)
                                         or now - flow.last_ack >= hold):
                    self._send_ack(flow, now)

    def _grant_batch_full(self, flow: Flow) -> bool:
        """Grants ride on ACKs in batches of ``ack_every`` cells, like the cells they answer:
        on a link whose rate counts packets, a grant per cell would cost as much of the line as
        the data it grants."""
        assert self.granter is not None
        return self.granter.flows[flow.key].granted - flow.grant_sent >= self.cfg.ack_every

    def _grant_holdoff(self) -> float:
        """A part batch still goes after this long: with N flows sharing the downlink a flow
        earns ``ack_every`` grants in about N ACK delays."""
        assert self.granter is not None
        return self.cfg.ack_delay_s * max(1, len(self.granter.flows))

    def begin(self) -> None:
        """Nothing starts a receiver: it answers what arrives (``hosts.program``)."""

    def poll(self, now: float) -> float:
        """``tick`` at ``now``, then when it is next due (``math.inf``: when a frame comes),
        always after ``now``. A receiver is never done by itself: it serves until its host
        stops it (``run`` ends on its own duration and linger)."""
        self.tick(now)
        due = self.next_deadline(now)
        return math.inf if due is None else max(due, math.nextafter(now, math.inf))

    def next_deadline(self, now: float) -> float | None:
        """The earliest time ``tick`` has something to do (an ACK delay, a NAK hold-off or a
        credit token running out), or None while nothing waits; a new frame can only make it
        sooner. ``tick`` at any other time does nothing that this would have scheduled."""
        cfg = self.cfg
        due: list[float] = []  # candidates; the earliest wins (runs after every frame)
        for flow in self.flows.values():
            if flow.pending:
                due.append(flow.last_ack + cfg.ack_delay_s)
            rb = flow.reorder
            if rb.depth:
                if flow.gap_expected != rb.expected:
                    due.append(now)
                else:
                    due.append(max(flow.gap_since, flow.last_nak) + cfg.nak_holdoff_s)
            if flow.grant_dirty:
                due.append(now if self._grant_batch_full(flow)
                           else flow.last_ack + self._grant_holdoff())
        granter = self.granter
        if granter is not None and granter.flows:
            if granter.stamp is None:
                due.append(now)
            else:
                rate = granter.params.downlink_cells_per_s
                # a full window opens only when a cell arrives, which ticks anyway
                if granter.window_open() and granter.active(now):
                    due.append(granter.stamp + max(0.0, 1.0 - granter.tokens) / rate)
        return min(due) if due else None

    def _report_int(self, buf: bytearray, f: RoceFrame, port: NicPort) -> None:
        """Host-sink INT: a Telemetry Report v2.0 carrying the frame's headers and INT stack."""
        head = bytes(buf[:f.body_off])
        head += bytes(-len(head) % 4)
        self._report_seq = (self._report_seq + 1) & 0x3FFFFF
        group = struct.pack("!II", (2 << 28) | self._report_seq, self.cfg.node_id)
        # Report Length counts the words after the first: RepMdBits..DSMdstatus (2) + packet.
        report_len = min(0xFF, 2 + len(head) // 4)
        report = struct.pack("!BBBBHHHH", (1 << 4) | 3, report_len, 0, 0x20, 0, 0, 0, 0)
        if self._report_frames:
            if port.send(self._report_framer(f, port).frame(group + report + head)):
                self.reports_sent += 1
            return
        try:
            self._report_sock.sendto(group + report + head, self.cfg.collector)
            self.reports_sent += 1
        except OSError:
            pass

    def _report_framer(self, f: RoceFrame, port: NicPort) -> UdpFramer:
        """From this host's address to the collector's, via the cell's last hop (its router)."""
        key = (port.index, f.src_mac)
        framer = self._report_framers.get(key)
        if framer is None:
            assert self.cfg.collector is not None
            host, udp_port = self.cfg.collector
            framer = UdpFramer(port.mac, _mac_str(f.src_mac), socket.inet_ntoa(f.dst_ip),
                               host, wire.TELEMETRY_REPORT_PORT, udp_port)
            self._report_framers[key] = framer
        return framer

    # -- results ---------------------------------------------------------------------------------
    def metrics(self, elapsed: float) -> dict[str, object]:
        flows = []
        for flow in self.flows.values():
            times = sorted(m["completion_s"] for m in flow.messages)
            flows.append({
                "src_ip": socket.inet_ntoa(flow.key[0]), "qpn": flow.qpn,
                "cells": flow.cells, "ce_cells": flow.ce_cells, "int_cells": flow.int_cells,
                "cnps_sent": flow.cnps, "acks_sent": flow.acks, "naks_sent": flow.naks,
                "grants": flow.grants, "messages": flow.delivered_messages,
                "malformed_messages": flow.assembler.malformed,
                "reorder": flow.reorder.stats.as_dict(),
                "completion_s": {"avg": sum(times) / len(times) if times else None,
                                 "max": times[-1] if times else None},
                "message_log": flow.messages,
            })
        return {"role": "recv", "elapsed_s": elapsed, "messages_total": self.messages_total,
                "not_roce_frames": self.not_roce, "int_reports_sent": self.reports_sent,
                "flows": flows}


def _mac_str(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)
