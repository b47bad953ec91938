"""A switch hop in one C call (hop.c): the traffic manager in bit-rate mode, holding its
packets, around the program's nat_run / nat_egress, for a driver that owns the clock (the
simulator). ``NativeHop.adopt`` takes a DataPlane's queues and their accounting from its
Python ``TrafficManager``; ``handback`` returns them, exactly, before anything reads or
changes the Python TM (``DataPlane.tm_owner``) or when a packet needs the Python path.

What it covers (``NativeHop.refusal`` says why not, per switch): the native data plane, no
packet trace, every limited port in bit-rate mode (a serializer and a byte buffer; no packet
rates, no blocked ports), priorities up to 8, ports below 512.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from p4sim.switch.native import build
from p4sim.switch.native.runtime import abort_exception
from p4sim.switch.tm import Link, TrafficManager

SOURCE = Path(__file__).with_name("hop.c")
# The simulator's fabric of hops (fabric.c) is built into the same library: it calls the hop
# functions directly and takes the hop_t pointers NativeHop makes.
FABRIC_SOURCE = Path(__file__).with_name("fabric.c")
MAXP, MAXPRIO = 512, 8
_U64 = 1 << 64

HOP_CDEF = """
typedef struct hop_t hop_t;
hop_t *hop_new(void *C, void *run, void *egr, int nslots, int hdr_bytes, int prios, int s_es,
               int s_prio, int s_enq_ts, int s_enq_qd, i64 m_enq_ts, i64 t0);
void hop_free(hop_t *T);
void hop_defaults(hop_t *T, int has_link, i64 bps, i64 buffer, i64 depth);
void hop_set_port(hop_t *T, int port, const i64 *v);
void hop_get_port(hop_t *T, int port, i64 *v);
void hop_add_queue(hop_t *T, int port, int prio, i64 depth);
void hop_push(hop_t *T, int port, int prio, const i64 *F, const uint8_t *data, i32 len,
              i32 pos, i32 inport);
void hop_set_rr(hop_t *T, int rr, i64 backlog);
int hop_get_rr(hop_t *T);
int hop_norder(hop_t *T);
int hop_order(hop_t *T, int i);
i64 hop_queue_len(hop_t *T, int port, int prio);
int hop_queue_exists(hop_t *T, int port, int prio);
i64 hop_backlog_of(hop_t *T, int port);
i32 hop_head_len(hop_t *T, int port, int prio);
void hop_take(hop_t *T, int port, int prio, i64 *F, uint8_t *data, i64 *info);
i32 hop_held_len(hop_t *T);
int hop_held_port(hop_t *T);
void hop_take_held(hop_t *T, i64 *F, uint8_t *data, i64 *info);
void hop_take_counters(hop_t *T, i64 *v);
uint8_t *hop_arena(hop_t *T);
i32 *hop_out_ports(hop_t *T);
i32 *hop_out_lens(hop_t *T);
i64 *hop_out_offs(hop_t *T);
i64 hop_next_deadline(hop_t *T);
i64 hop_ready_at(hop_t *T, int port);
int hop_arrive(hop_t *T, const uint8_t *data, i32 len, i32 port, i64 now, i64 *F, i64 *out,
               i64 *res);
int hop_service(hop_t *T, i64 now, i64 *out, i64 *res);
typedef struct fab_t fab_t;
fab_t *fab_new(int nsw, int nw, i64 *io);
void fab_free(fab_t *X);
void fab_wire(fab_t *X, int w, int src_sw, int src_port, int dst_sw, int dst_port, i64 delay,
              i64 rate, int up, i64 frames, i64 bytes, i64 dropped);
void fab_set_up(fab_t *X, int w, int up);
i64 fab_wire_get(fab_t *X, int w, int what);
void fab_set_hop(fab_t *X, int i, hop_t *T, i64 *F, i64 *out, i64 *res, i64 cpu_port);
void fab_set_on(fab_t *X, int i, int on);
i64 fab_received(fab_t *X, int i);
i64 fab_poll_at(fab_t *X, int i);
void fab_set_poll_at(fab_t *X, int i, i64 t);
uint8_t *fab_handed(fab_t *X);
void fab_transmit(fab_t *X, int w, const uint8_t *data, i32 len);
void fab_schedule(fab_t *X, int i, i64 deadline);
int fab_arrive(fab_t *X, int i, int port, const uint8_t *data, i32 len);
int fab_service(fab_t *X, int i);
int fab_run(fab_t *X);
void fab_set_endpoints(fab_t *X, void *deliver, void *timer, void *ctx);
void fab_wire_endpoint(fab_t *X, int w, int ep, int port);
void fab_ep_timer(fab_t *X, i64 t, int ep, i64 arg);
void fab_ep_frame(fab_t *X, i64 t, int w, const uint8_t *data, i32 len);
void fab_sync_in(fab_t *X);
void fab_sync_out(fab_t *X);
"""

_lib: Any = None
_why_not: str | None = None


def library() -> Any:
    """The hop library (built once per source, cached beside the programs'), or None."""
    global _lib, _why_not
    if _lib is not None or _why_not is not None:
        return _lib
    why = build.available()
    if why is not None:
        _why_not = why
        return None
    source = SOURCE.read_text() + "\n" + FABRIC_SOURCE.read_text()
    flags = " ".join(build.CFLAGS)
    key = "hop-" + hashlib.sha256((flags + "\n" + source).encode()).hexdigest()[:24]
    ffi = build.ffi()
    try:
        ffi.cdef(HOP_CDEF)
        _lib = build.build(key, source)
    except Exception as e:  # no compiler that takes it: the Python TM runs, as before
        _why_not = f"the hop library did not build ({e})"
        return None
    return _lib


def refusal(dp: Any) -> str | None:
    """None when ``dp``'s traffic manager and flow can run in the C hop now, else why not."""
    from p4sim.switch.native.flow import NativeFlow, NativePacket

    flow, tm = dp.flow, dp.tm
    if library() is None:
        return _why_not or "no hop library"
    if dp.dataplane != "native" or type(flow) is not NativeFlow:
        return "not on the native data plane"
    if dp.trace is not None:
        return "packet trace on"
    if flow.pending or flow._in_egress:
        return "packets between passes"
    if not isinstance(tm, TrafficManager) or tm.priorities > MAXPRIO:
        return "traffic manager not covered"
    if tm.default_rate or any(tm.port_rate.values()) or tm.blocked:
        return "packet rates"
    if not (tm.links or tm.default_link):
        return "packet mode"
    if tm.default_link is not None and tm.default_link[0] <= 0:
        return "default link without a rate"
    for port, link in tm.links.items():
        if link.pps or link.bps <= 0 or not 0 <= port < MAXP:
            return "a port without a bit rate"
        if link.below:
            return "a link that leaves some priorities out"
    for (port, prio), q in tm.queues.items():
        if q.pps or q.blocked or not 0 <= port < MAXP or not 0 <= prio < MAXPRIO:
            return "a queue not covered"
        if any(type(item) is not NativePacket for item in q.items):
            return "a Python packet waits"
    return None


class NativeHop:
    """One DataPlane's hop in C while ``active`` (between adopt and handback)."""

    def __init__(self, dp: Any) -> None:
        self.dp = dp
        flow = dp.flow
        self.flow, self.tm, self.native = flow, dp.tm, flow.native
        self.lib = lib = library()
        ffi = self.ffi = build.ffi()
        plib = flow._lib
        T = lib.hop_new(flow._C, ffi.cast("void *", plib.nat_run),
                        ffi.cast("void *", plib.nat_egress), flow._nslots, flow._hdr_bytes,
                        dp.tm.priorities, flow.s_es, flow.s_prio, flow.s_enq_ts,
                        flow.s_enq_qd, flow.m_enq_ts, flow.t0)
        if T == ffi.NULL:
            raise MemoryError("hop_new")
        self.T = ffi.gc(T, lib.hop_free)
        self.F, self.out = flow._F, flow._out  # what flow._slow reads after a hand-over
        self.res = ffi.new("i64[8]")
        self.active = False
        self.adopts = 0
        self._gen = -1  # the output arrays' generation the pointers below were read at
        self._arena: Any = None
        self._ports: Any = None
        self._lens: Any = None
        self._offs: Any = None

    # -- the Python TM <-> C ------------------------------------------------------------------

    def adopt(self, peak: dict[int, int]) -> None:
        """Take the Python TM's queues, settings and accounting (it is empty afterwards)."""
        lib, T, tm, ffi = self.lib, self.T, self.tm, self.ffi
        dl = tm.default_link
        lib.hop_defaults(T, int(dl is not None), dl[0] if dl else 0, dl[1] if dl else 0,
                         tm.default_depth)
        ports = (set(tm.links) | {p for p, _ in tm.queues} | set(tm.port_depth)
                 | set(tm.port_backlog) | set(tm.drops) | set(tm.busy_tx) | set(tm.busy_total)
                 | set(peak))
        v = ffi.new("i64[16]")
        for port in sorted(p for p in ports if 0 <= p < MAXP):
            link = tm.links.get(port)
            free = link.free_num if link is not None else 0
            lo = free % _U64
            vals = (int(link is not None), link.bps if link else 0,
                    link.buffer_bytes if link else 0, free >> 64,
                    lo - _U64 if lo >= 1 << 63 else lo,
                    link.queued_bytes if link else 0,
                    tm.port_depth.get(port, tm.default_depth), tm.port_backlog.get(port, 0),
                    tm.busy_since.get(port, 0), tm.busy_total.get(port, 0),
                    tm.busy_tx.get(port, 0), tm.drops.get(port, 0), peak.get(port, 0))
            for i, x in enumerate(vals):
                v[i] = x
            lib.hop_set_port(T, port, v)
        for port in tm.ports:  # round-robin order: C appends ports in the order it meets them
            for prio, q in sorted(tm.port_queues[port], key=lambda pair: pair[0]):
                lib.hop_add_queue(T, port, prio, q.depth)
                for P in q.items:
                    lib.hop_push(T, port, prio, P.F, P.data, P.length, P.pos, P.ingress_port)
                q.items.clear()
        lib.hop_set_rr(T, tm.rr, tm.backlog)
        tm.backlog = 0
        for p in tm.port_backlog:
            tm.port_backlog[p] = 0
        self.active = True
        self.adopts += 1

    def handback(self, peak: dict[int, int]) -> None:
        """Return every queue and figure to the Python TM (and the flow's counters, the port
        statistics, the peaks); the Python path then continues exactly where C stopped."""
        if not self.active:
            return
        self.active = False
        lib, T, tm, ffi = self.lib, self.T, self.tm, self.ffi
        v = ffi.new("i64[16]")
        for port in range(MAXP):
            lib.hop_get_port(T, port, v)
            if not v[15] and not (v[13] or v[14]):
                continue
            self._port_back(port, list(v), peak)
        order = [lib.hop_order(T, i) for i in range(lib.hop_norder(T))]
        for port in order:
            for prio in range(MAXPRIO):
                if lib.hop_queue_exists(T, port, prio):
                    self._queue_back(port, prio)
        if tm.ports != order:
            raise RuntimeError(f"hop: port order {order} differs from the TM's {tm.ports}")
        tm.rr = lib.hop_get_rr(T)
        tm.backlog = sum(len(q.items) for q in tm.queues.values())
        tm.not_before, tm.deadline_exact = 0, False
        c = ffi.new("i64[4]")
        lib.hop_take_counters(T, c)
        counters = self.flow.counters
        counters.parser_errors += c[0]
        counters.pipeline_drops += c[1]
        for _ in range(c[2]):
            self.flow._abort(abort_exception(c[3]))

    def _port_back(self, port: int, v: list[int], peak: dict[int, int]) -> None:
        tm, dp = self.tm, self.dp
        if v[0]:
            link = tm.links.get(port)
            if link is None:
                link = tm.links[port] = Link()
            link.bps, link.buffer_bytes = v[1], v[2]
            link.free_num = (v[3] << 64) + (v[4] % _U64)
            link.queued_bytes = v[5]
        for name, value, keep_zero in (("port_backlog", v[7], True), ("busy_since", v[8], True),
                                       ("busy_total", v[9], True), ("busy_tx", v[10], False),
                                       ("drops", v[11], False)):
            d = getattr(tm, name)
            if value or (keep_zero and port in d):
                d[port] = value
        if v[12] > peak.get(port, 0):
            peak[port] = v[12]
        if v[13]:
            dp._pstats(port).rx_packets += v[13]
        if v[14]:
            dp._pstats(port).tx_packets += v[14]

    def _queue_back(self, port: int, prio: int) -> None:
        from p4sim.switch.native.flow import NativePacket

        lib, T, tm, ffi = self.lib, self.T, self.tm, self.ffi
        q = tm.queues.get((port, prio)) or tm.queue(port, prio)
        info = ffi.new("i64[3]")
        nslots = self.flow._nslots
        for _ in range(lib.hop_queue_len(T, port, prio)):
            n = lib.hop_head_len(T, port, prio)
            G = ffi.new("i64[]", nslots)
            data = ffi.new("uint8_t[]", max(1, n))
            lib.hop_take(T, port, prio, G, data, info)
            q.items.append(NativePacket(G, ffi.unpack(ffi.cast("char *", data), n),
                                        info[1], info[2]))

    def take_held(self) -> tuple[Any, int]:
        """The packet egress asked to clone (a NativePacket) and its egress port."""
        from p4sim.switch.native.flow import NativePacket

        lib, T, ffi = self.lib, self.T, self.ffi
        n = lib.hop_held_len(T)
        port = lib.hop_held_port(T)
        G = ffi.new("i64[]", self.flow._nslots)
        data = ffi.new("uint8_t[]", max(1, n))
        info = ffi.new("i64[3]")
        lib.hop_take_held(T, G, data, info)
        return NativePacket(G, ffi.unpack(ffi.cast("char *", data), n), info[1], info[2]), port

    # -- reads while active ---------------------------------------------------------------------

    def backlogs(self, ports: list[int]) -> list[int]:
        """Packets queued for each of ``ports`` (0 for a port out of range), in one call: the
        simulator's sampler reads every port of every switch a thousand times in a long run."""
        of, T = self.lib.hop_backlog_of, self.T
        return [of(T, p) if 0 <= p < MAXP else 0 for p in ports]

    def line_free_ns(self) -> int:
        return max((self.lib.hop_ready_at(self.T, p) for p in range(MAXP)), default=0)

    def frames(self, n: int) -> Any:
        """The frames the last call sent, in order: (port, frame)."""
        if self.res[6] != self._gen:  # C moved its output arrays: fetch them again
            lib, T, ffi = self.lib, self.T, self.ffi
            self._gen = self.res[6]
            self._arena = ffi.cast("char *", lib.hop_arena(T))
            self._ports, self._lens = lib.hop_out_ports(T), lib.hop_out_lens(T)
            self._offs = lib.hop_out_offs(T)
        arena, ports, lens, unpack = self._arena, self._ports, self._lens, self.ffi.unpack
        if n == 1:
            return ((ports[0], unpack(arena, lens[0])),)
        offs = self._offs
        return [(ports[i], unpack(arena + offs[i], lens[i])) for i in range(n)]
