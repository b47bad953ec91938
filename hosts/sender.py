"""The sending host: messages -> cells on one or two NIC ports, paced, reliable, rate-controlled.

Hot path: a cell is the port's prebuilt template with a few bytes patched (hosts.cells), sent
on an AF_PACKET socket opened once. Cells are sprayed round-robin across the ports that are up;
a port is declared down when its link goes down (sysfs operstate) or when cells sent on it see
no ACK for ``port_timeout_s``; everything in flight on it is then resent on the others.
"""

from __future__ import annotations

import math
import select
import time
from collections.abc import Callable

from hosts import wire
from hosts.arrivals import Arrivals, poisson_arrivals
from hosts.cc import LineContext, RateController, controller_for
from hosts.cc.hpcc import HopSample
from hosts.cells import CellTemplate, RoceFrame, message_bytes, message_crc, parse_roce
from hosts.config import CREDIT_PROBE_S, HEALTH_INTERVAL_S, SenderConfig
from hosts.intstack import parse_int_block
from hosts.nic import NicPort, PacketSocketPort
from hosts.ratelimit import TokenBucket
from hosts.sack import decode_ack
from hosts.transport import OutMessage, SenderTransport

__all__ = ["CREDIT_PROBE_S", "HEALTH_INTERVAL_S", "Sender", "SenderConfig"]


class Sender:
    """One sending host. The clock and the NIC ports are injected: ``run`` is the emulated
    loop over AF_PACKET sockets; a simulator calls ``begin``, ``on_frame`` and ``poll``
    itself on its own clock, with NIC ports of its own (anything with ``NicPort``'s methods)."""

    def __init__(self, cfg: SenderConfig, clock: Callable[[], float] = time.monotonic,
                 ports: list[NicPort] | None = None) -> None:
        if not cfg.ifaces or len(cfg.ifaces) > 2:
            raise ValueError(f"--iface: need one or two interfaces, got {len(cfg.ifaces)}")
        if len(cfg.dst_macs) not in (1, len(cfg.ifaces)):
            raise ValueError("--dst-mac: give one MAC for all ports or one per --iface")
        if cfg.mean_gap_s and cfg.count <= 0:
            raise ValueError("--mean-gap: offered load needs --count (messages per flow)")
        self.cfg = cfg
        self.clock = clock
        self.arrivals: Arrivals | None = poisson_arrivals(
            cfg.count, cfg.mean_gap_s, cfg.arrival_seed) if cfg.mean_gap_s > 0 else None
        self.ports = ports if ports is not None else [
            PacketSocketPort(i, name, cfg.src_macs[i] if i < len(cfg.src_macs) else "")
            for i, name in enumerate(cfg.ifaces)]
        self.transport = SenderTransport(
            payload_len=cfg.payload_len, rto_s=cfg.rto_s, sack_holdoff_s=cfg.sack_holdoff_s,
            max_inflight_cells=cfg.max_inflight_cells, start_seq=cfg.start_psn)
        line = LineContext(cfg.rate_bps, cfg.frame_bytes, cfg.time_scale, cfg.base_rtt_s)
        self.cc: RateController = controller_for(cfg.cc, line, cfg.cc_params)
        if self.cc.uses_grants():
            self.transport.grant = cfg.start_psn + cfg.credit_initial_cells
        self.bucket = TokenBucket(self.cc.rate_bps(), burst_bytes=4 * (cfg.payload_len + 100))
        self._paced_idle = True
        self.templates: list[CellTemplate] = []
        self.frame_len = 0
        self.cnps = 0
        self.malformed = 0
        self.failovers: list[dict[str, object]] = []
        self._pending_recovery: list[tuple[dict[str, object], list[int]]] = []
        self._rr = 0
        self._messages_added = 0
        self.crcs: list[int] = []
        self.credit_probes = 0
        self._cpu_start = time.process_time()
        self._start, self._wall_start = self.clock(), time.time()
        self._last_send = float("-inf")
        self._until: float | None = None
        self._hard_stop: float | None = None
        self._next_health = self._start

    # -- setup -----------------------------------------------------------------------------------
    def open(self) -> None:
        cfg = self.cfg
        for port in self.ports:
            port.open()
            dst = cfg.dst_macs[port.index] if len(cfg.dst_macs) > 1 else cfg.dst_macs[0]
            self.templates.append(CellTemplate(port.mac, dst, cfg.src_ip, cfg.dst_ip, cfg.qpn,
                                               cfg.payload_len, cfg.sport, cfg.int_source))
        self.frame_len = self.templates[0].frame_len
        if self.cc.rate_bps() <= 0 and cfg.cc != "none":
            raise ValueError(f"--cc {cfg.cc} needs --rate (the line rate it starts from)")

    def close(self) -> None:
        for port in self.ports:
            port.close()

    def _add_messages(self, now: float, until: float | None) -> None:
        cfg, tr = self.cfg, self.transport
        ahead_limit = 2 * cfg.max_inflight_cells
        while tr.next_seq - tr.snd_nxt < ahead_limit:
            if cfg.count and self._messages_added >= cfg.count:
                return
            if until is not None and now >= until:
                return
            queued = now
            if self.arrivals is not None:
                # Timed from its arrival, not from when the sender got to it: a message that
                # waits behind the one before is slowed down by the load, and that counts.
                queued = self._start + self.arrivals.times_s[self._messages_added]
                if now < queued:
                    return
            data = message_bytes(self._messages_added, cfg.msg_size, cfg.seed)
            self.crcs.append(message_crc(data))
            tr.add_message(data, queued)
            self._messages_added += 1

    def _until_arrival(self, now: float) -> float | None:
        """Seconds until the next message arrives; None when none is to come (or one has
        arrived already and waits only for room in the send window: an ACK makes that)."""
        arr = self.arrivals
        if arr is None or self._messages_added >= len(arr.times_s):
            return None
        due = self._start + arr.times_s[self._messages_added]
        return due - now if due > now else None

    def _began(self, msg: OutMessage) -> float:
        """When a message's time starts: its arrival under offered load, else its first cell."""
        if self.arrivals is not None:
            return msg.queued_at
        return msg.first_sent or msg.queued_at

    # -- main loop -------------------------------------------------------------------------------
    def begin(self) -> None:
        """Start the run at the clock's now: timers, the first messages."""
        cfg = self.cfg
        start = self.clock()
        self._start, self._wall_start = start, time.time()
        self._cpu_start = time.process_time()
        self._until = start + cfg.duration_s if cfg.duration_s > 0 else None
        self._hard_stop = self._until + cfg.drain_s if self._until is not None else None
        for port in self.ports:
            port.last_progress = start
        self._next_health = start
        self.cc.tick(start)
        self._add_messages(start, self._until)

    def finished(self, now: float) -> bool:
        """Every message is done (or the time is up)."""
        cfg, tr, until = self.cfg, self.transport, self._until
        self._add_messages(now, until)
        if tr.idle and ((cfg.count and self._messages_added >= cfg.count)
                        or (until is not None and now >= until)):
            return True
        return self._hard_stop is not None and now >= self._hard_stop

    def poll(self, now: float) -> float | None:
        """Everything due at ``now`` except receiving: rate-control timers, timeouts, port
        health, sending. Returns when it is due again (``now``: at once; a received frame may
        make it due sooner), or None when the run is over (``hosts.program``)."""
        if self.finished(now):
            return None
        wait = self._step(now)
        if not wait:
            return now
        # a wait too short to move a float clock still moves it: the least step there is
        return max(now + wait, math.nextafter(now, math.inf))

    def _step(self, now: float) -> float:
        """``poll``'s work; the seconds until it is due again."""
        self.cc.tick(now)
        if now >= self._next_health:
            self._next_health = now + self.cfg.health_interval_s
            self.transport.check_timeouts(now)
            self._check_ports(now)
        wait = self._send_burst(now)
        arrival = self._until_arrival(now)
        if wait and arrival is not None:
            wait = min(wait, arrival)
        return min(wait, max(0.0, self._next_health - now)) if wait else 0.0

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> dict[str, object]:
        self.begin()
        start = self._start
        rx = bytearray(9216)
        while not should_stop():
            now = self.clock()
            if self.finished(now):
                break
            for port in self.ports:
                for _ in range(256):
                    n = port.recv_into(rx)
                    if not n:
                        break
                    self.on_frame(rx, n, now, port)
            due = self.poll(now)
            if due is None:
                break
            wait = due - now
            if wait > 0:
                socks = [p.sock for p in self.ports]
                select.select(socks, [], [], min(wait, self.cfg.health_interval_s))
        return self.metrics(self.clock() - start)

    def _send_burst(self, now: float) -> float:
        """Send what pacing, windows and grants allow; return how long to wait (0 = go on)."""
        tr, cc = self.transport, self.cc
        if self.bucket.rate_bps != cc.rate_bps():
            self.bucket.set_rate(now, cc.rate_bps())
        up = [p for p in self.ports if p.up]
        if not up:
            return self.cfg.health_interval_s
        bucket, frame_len = self.bucket, self.frame_len
        for _ in range(64):
            seq = tr.next_to_send(cc.window_bytes())
            if seq is None:
                starved = (tr.grant is not None and tr.grant <= tr.snd_nxt < tr.next_seq
                           and not tr.retx and now - self._last_send > self.cfg.credit_probe_s)
                if starved:
                    # Out of credit for a while: one cell goes anyway so the receiver sees the
                    # flow is still active and resumes granting (it only grants to active flows).
                    tr.grant += 1
                    self.credit_probes += 1
                    self._last_send = now  # at most one probe per credit_probe_s
                    continue
                if tr.snd_nxt >= tr.next_seq and not tr.retx:
                    self._paced_idle = True  # nothing queued at all, not merely held back
                return self.cfg.idle_poll_s
            if self._paced_idle:
                # A busy period starts one frame at a time at the pace: a bucket full from
                # being idle would let the first cells out at the NIC's speed, faster than the
                # rate a message's ideal time is counted at (a run then read 100.2%).
                self._paced_idle = False
                bucket.restart(now, frame_len)
            wait = bucket.wait_time(now, frame_len)
            if wait > 0:
                return wait
            port = up[self._rr % len(up)]
            self._rr += 1
            opcode, payload, pad = tr.cell(seq)
            frame = self.templates[port.index].frame(seq, opcode, payload, pad)
            if not port.send(frame):
                return min(0.0002, self.cfg.idle_poll_s)
            tr.on_sent(seq, now, port.index)
            self._last_send = now
            bucket.consume(now, frame_len)
            cc.on_sent(now, frame_len)
        return 0.0

    def on_frame(self, buf: bytes | bytearray, n: int, now: float, port: NicPort,
                 parsed: RoceFrame | None = None) -> None:
        f = parsed if parsed is not None else parse_roce(buf, n)
        if f is None:
            return
        if f.qpn != self.cfg.qpn:
            return
        if f.opcode == wire.OP_CNP:
            self.cnps += 1
            self.cc.on_cnp(now)
            return
        if f.opcode != wire.OP_ACK:
            return
        ack = decode_ack(buf, f.psn, f.body_off, f.body_end)
        if ack is None:
            self.malformed += 1
            return
        tr = self.transport
        tr.on_ack(ack, now)
        for idx in tr.acked_ports:
            self.ports[idx].last_progress = now
        hops = self._int_hops(ack.int_block) if ack.int_block else None
        ack_seq = wire.psn_unwrap(ack.cum_psn, tr.snd_una)
        self.cc.on_ack(now, ack_seq, tr.snd_nxt, hops)

    def _int_hops(self, block: bytes) -> list[HopSample] | None:
        parsed = parse_int_block(block)
        if parsed is None:
            self.malformed += 1
            return None
        link = (self.cfg.link_bps or self.cfg.rate_bps) / 8
        records = parsed[2]
        record_len = wire.hop_words(parsed[1]) * 4
        hops = []
        for depth, rec in enumerate(records):
            if None in (rec.node_id, rec.queue_occupancy, rec.tx_bytes, rec.egress_ts):
                continue
            if self.cfg.link_pps:
                # A link that counts packets carries a cell in one slot however many hop
                # records it has gathered, so its capacity in INT's tx bytes is its rate times
                # the frame as it left that hop: the source's frame plus one record per hop
                # so far (the stack lists the newest hop first). Against the source's frame
                # alone, cells read up to a fifth fuller on a fat-tree's last hops.
                link = self.cfg.link_pps * (self.frame_len + (len(records) - depth) * record_len)
            hops.append(HopSample(
                key=(rec.node_id, rec.egress_port or 0),
                qlen_bytes=rec.queue_occupancy * self.frame_len, tx_bytes=rec.tx_bytes,
                ts_s=rec.egress_ts * wire.INT_TIME_UNIT_NS * 1e-9, link_bytes_per_s=link))
        return hops

    # -- dual-port failover ------------------------------------------------------------------------
    def _check_ports(self, now: float) -> None:
        """Link state from sysfs; a port whose cells go unacknowledged for port_timeout_s while
        another port's are acknowledged is dead too (a stalled receiver stalls every port, and
        that is no reason to fail one). A port failed that way is tried again after
        ``port_retry_s``, and at once if no port is left; a link-down port when its link is up."""
        tr, timeout = self.transport, self.cfg.port_timeout_s
        per_port: dict[int, int] = {}
        for fl in tr.inflight.values():
            per_port[fl.port] = per_port.get(fl.port, 0) + 1
        for port in self.ports:
            oper = port.oper_up()
            if port.up and not oper:
                self._fail(port, now, "link down")
            elif port.up and per_port.get(port.index, 0) and \
                    now - port.last_progress > timeout and \
                    any(q.up and q is not port and now - q.last_progress < timeout
                        for q in self.ports):
                self._fail(port, now, "no ACK progress")
        for port in self.ports:
            if port.up or not port.oper_up():
                continue
            alone = not any(q.up for q in self.ports)
            if port.down_reason == "link down" or alone or \
                    now - port.down_since >= self.cfg.port_retry_s:
                port.up, port.down_reason, port.last_progress = True, "", now
                port.events.append({"t": now, "event": "up"})
        for event, moved in list(self._pending_recovery):
            if all(seq < tr.snd_una or seq in tr.sacked for seq in moved):
                event["recovered_s"] = now - event["detected_at"]
                self._pending_recovery.remove((event, moved))

    def _fail(self, port: NicPort, now: float, reason: str) -> None:
        port.up, port.down_reason, port.down_since = False, reason, now
        moved = self.transport.fail_port(port.index)
        event: dict[str, object] = {
            "port": port.ifname, "reason": reason, "detected_at": now,
            "since_last_progress_s": now - port.last_progress, "cells_moved": len(moved)}
        port.events.append({"t": now, "event": "down", "reason": reason})
        self.failovers.append(event)
        self._pending_recovery.append((event, moved))

    # -- results ---------------------------------------------------------------------------------
    def metrics(self, elapsed: float) -> dict[str, object]:
        tr = self.transport
        fcts = sorted(m.completed - self._began(m) for m in tr.done)
        st = tr.stats
        out = {
            "role": "send",
            "wall_start": self._wall_start,
            "elapsed_s": elapsed,
            "cpu_s": time.process_time() - self._cpu_start,
            "messages_queued": self._messages_added,
            "messages_completed": len(tr.done),
            "message_size": self.cfg.msg_size,
            "message_crc32": self.crcs[:10000],
            "fct_list_s": [m.completed - self._began(m)
                           for m in tr.done[:10000]],  # per message, in message order
            # First cell of the first message to the last message acknowledged: the flow's
            # duration, which goodput is measured over (messages overlap in flight).
            "flow_time_s": (max(m.completed for m in tr.done)
                            - min(self._began(m) for m in tr.done))
            if tr.done else None,
            # When that was on the sender's clock (CLOCK_MONOTONIC, one time base for every
            # process of a machine; virtual time in the simulator): flows that share a
            # bottleneck are timed together from the first of them to start.
            "flow_start_s": min(self._began(m) for m in tr.done) if tr.done else None,
            "fct_s": {"avg": sum(fcts) / len(fcts) if fcts else None,
                      "p50": fcts[len(fcts) // 2] if fcts else None,
                      "p99": fcts[min(len(fcts) - 1, int(len(fcts) * 0.99))] if fcts else None,
                      "max": fcts[-1] if fcts else None},
            "srtt_s": tr.srtt, "rto_s": tr.rto,
            "cells": {"frame_bytes": self.frame_len, **st.__dict__,
                      "retransmits": st.retx_sack + st.retx_nak + st.retx_timeout
                      + st.retx_failover,
                      "cells_per_s": st.cells_sent / elapsed if elapsed > 0 else 0.0},
            "cnps_received": self.cnps,
            "credit_probes": self.credit_probes,
            "malformed": self.malformed,
            "rate_control": self.cc.summary(),
            # seconds since the start (wall_start + t is wall-clock time), bits per second
            "rate_history": [[t - self._start, r] for t, r in self.cc.history[-2000:]],
            "ports": [{"iface": p.ifname, "sent": p.sent, "send_errors": p.send_errors,
                       "up": p.up, "events": p.events} for p in self.ports],
            "failovers": [{k: v for k, v in e.items() if k != "detected_at"}
                          for e in self.failovers],
        }
        if self.arrivals is not None:
            out["arrivals"] = self._arrival_metrics(elapsed)
        return out

    def _arrival_metrics(self, elapsed: float) -> dict[str, object]:
        """What was offered over the arrival window and what was delivered over the goodput
        interval: from the flow's start to the later of the window's end and the last message
        acknowledged (or the end of the run, if one never was). The interval contains the
        window, so delivered / interval never exceeds offered / window."""
        arr, tr, size = self.arrivals, self.transport, self.cfg.msg_size
        assert arr is not None
        all_done = len(tr.done) >= len(arr.times_s)
        last = max(m.completed for m in tr.done) - self._start if all_done else elapsed
        return {"mean_gap_s": arr.mean_gap_s, "window_s": arr.window_s,
                "offered_bytes": size * len(arr.times_s),
                "delivered_bytes": size * len(tr.done),
                "interval_s": max(arr.window_s, last),
                "arrival_s": list(arr.times_s[:10000])}
