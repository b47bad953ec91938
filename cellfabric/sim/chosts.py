"""The simulated end hosts in C (cellfabric/sim/native/hosts*.c), under the C fabric.

With the C fabric on (cellfabric.sim.cfabric), a cell still left C at every host: each frame
a host received, each ACK, each paced cell was a Python call and most of them an event on the
engine's heap. Here the hosts' per-cell work runs in C too: hosts.sender.Sender (pacing, the
transport's in-flight map, SACK, timeouts), hosts.receiver.Receiver (reorder, message
assembly and CRC, ACK/NAK/CNP) and hostsim's Program, SimHost and HostWire, as fabric.c
endpoints: a frame for a host and a program's wake-up are events of C's heap, and what a host
sends goes onto its wire there. Python only starts each program (at its step's start) and
reads the state back for the metrics into the unchanged Python objects, whose ``metrics``
then writes the same records.

The Python hosts are the reference and the fallback: C covers what ``refusal`` admits (rate
control ``none``, no INT, no credits, no failures, no offered load, no packet trace; hosts
with any number of NIC and NVLink ports, senders spraying over two with Sender's port
timeouts); any other run says why once and runs the Python hosts. Both give the same
metrics.json for the same seed (tests/sim/test_sim_chosts.py).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellfabric.sim.engine import NS, Engine
from hosts import cells as cellmod
from hosts import wire
from hosts.cells import message_crc_of
from hosts.headers import BTH as BTH_LAYOUT
from hosts.receiver import Flow, Receiver
from hosts.reorder import ReorderBuffer
from hosts.sender import Sender
from hosts.transport import OutMessage

if TYPE_CHECKING:
    from cellfabric.sim.cfabric import NativeFabric
    from cellfabric.sim.net import SimFabric

SOURCES = ("hosts.c", "hosts_transport.c", "hosts_sender.c", "hosts_receiver.c",
           "hosts_program.c")
NATIVE_DIR = Path(__file__).with_name("native")

CDEF = """
typedef int64_t i64;
typedef int32_t i32;
typedef struct hc_t hc_t;
hc_t *hc_new(int nhosts, const i64 *layout);
void hc_free(hc_t *H);
void hc_bind(hc_t *H, void *X, void *push_timer, void *push_frame);
void hc_port(hc_t *H, int h, int i, int w, double ns_per_byte, i64 delay, const uint8_t *mac);
int hc_sender(hc_t *H, int host, int nports, const i32 *host_ports, const i64 *iv,
              const double *dv, const i64 *ip_sum, const uint8_t *tmpl);
int hc_receiver(hc_t *H, int host, int nports, const i32 *host_ports, const i64 *iv,
                const double *dv);
int hc_start(hc_t *H, int id, i64 now_ns);
int hc_deliver(void *ctx, int host, int nic, const uint8_t *data, i32 len, i64 now_ns);
int hc_timer(void *ctx, int id, i64 t, i64 now_ns);
int hc_done(hc_t *H, int id);
i64 hc_unclaimed(hc_t *H, int h);
void hc_prog_info(hc_t *H, int id, int p, i64 *iv);
int hc_port_events(hc_t *H, int id, i64 *iv, double *dv);
int hc_failovers(hc_t *H, int id, i64 *iv, double *dv);
void hc_sender_info(hc_t *H, int id, i64 *iv, double *dv, double *msgs);
int hc_receiver_flows(hc_t *H, int id, i64 *iv);
void hc_flow_info(hc_t *H, int id, int f, i64 *iv, double *dv);
void hc_flow_detail(hc_t *H, int id, int f, i64 *hist, i64 *rec, double *completion);
"""

# hosts_sender.c's reasons a port went down (0: none), as Sender._check_ports says them
REASONS = ("", "link down", "no ACK progress")

_ffi: Any = None
_lib: Any = None
_why_not: str | None = None


def library() -> Any:
    """The hosts' library (built once per source, cached beside p4sim's), or None."""
    global _ffi, _lib, _why_not
    if _lib is not None or _why_not is not None:
        return _lib
    from p4sim.switch.native import build

    why = build.available()
    if why is not None:
        _why_not = why
        return None
    import cffi

    source = "\n".join((NATIVE_DIR / name).read_text() for name in SOURCES)
    # p4sim's cache and compiler (bounded with the programs' libraries), this library's FFI
    key = "hosts-" + hashlib.sha256((" ".join(build.CFLAGS) + "\n" + source).encode()
                                    ).hexdigest()[:24]
    loader = cffi.FFI()
    loader.cdef(CDEF)
    try:
        _lib = build.build(key, source, loader=loader, libs=("-lm",))
    except Exception as e:  # no compiler that takes it: the Python hosts run
        _why_not = f"the hosts' C did not build ({e})"
        return None
    _ffi = loader
    return _lib


def refusal(fabric: SimFabric, cc: str, workload: Any, failures: bool) -> str | None:
    """None when the C hosts can run this run's hosts, else why not (decided once)."""
    from cellfabric.core.hostplan import host_reports

    topo = fabric.topo
    if cc != "none":
        return f"rate control {cc} (C hosts cover none)"
    if topo.fabric.int.mode == "switch-sink" or host_reports(topo):
        return "INT reports"
    if failures:
        return "link failures scheduled"
    if any(t.load for st in workload.steps for t in st.transfers):
        return "offered load (Poisson arrivals)"
    if library() is None:
        return _why_not or "no hosts library"
    return None


def layout() -> list[int]:
    """hosts.c's LAY: every wire constant and BTH offset, from hosts.wire and hosts.headers."""
    return [wire.ROCE_UDP_PORT, wire.INT_DSCP, wire.OP_ACK, wire.OP_CNP,
            BTH_LAYOUT.byte_offset("pad"), BTH_LAYOUT.shift("pad"),
            BTH_LAYOUT.byte_offset("ackreq"), 1 << BTH_LAYOUT.shift("becn"),
            BTH_LAYOUT.byte_offset("opcode"), wire.SACK_VERSION, wire.SACK_F_INT_ECHO,
            wire.SACK_F_GRANT, wire.AETH_NAK_SEQ, wire.SACK_BITMAP_BYTES, cellmod.IP_TTL,
            cellmod.IP_DF, wire.OP_SEND_FIRST, wire.OP_SEND_MIDDLE, wire.OP_SEND_LAST_IMM,
            wire.OP_SEND_ONLY_IMM, wire.ECN_CE]


class NativeHosts:
    """The C hosts of a SimFabric whose NativeFabric has its hosts' wires (``host_wires``)."""

    def __init__(self, fabric: SimFabric, nf: NativeFabric) -> None:
        self.lib = lib = library()
        self.ffi = ffi = _ffi
        self.engine: Engine = fabric.engine
        self.nf = nf
        self.names = list(fabric.hosts)
        self.index = {name: i for i, name in enumerate(self.names)}
        H = lib.hc_new(len(self.names), ffi.new("i64[]", layout()))
        self.H = ffi.gc(H, lib.hc_free)
        flib, fffi = nf.lib, nf.ffi

        def addr(fn: Any) -> Any:
            return ffi.cast("void *", int(fffi.cast("uintptr_t", fn)))

        lib.hc_bind(H, ffi.cast("void *", int(fffi.cast("uintptr_t", nf.X))),
                    addr(flib.fab_ep_timer), addr(flib.fab_ep_frame))
        flib.fab_set_endpoints(nf.X, fffi.cast("void *", int(ffi.cast("uintptr_t",
                                                                      lib.hc_deliver))),
                               fffi.cast("void *", int(ffi.cast("uintptr_t", lib.hc_timer))),
                               fffi.cast("void *", int(ffi.cast("uintptr_t", H))))
        for name, host in fabric.hosts.items():  # NIC ports and NVLinks alike
            h = self.index[name]
            for port, w in enumerate(nf.host_wire_index[name]):
                hw = host.wires[port]
                lib.hc_port(H, h, port, w, hw.ns_per_byte, hw.delay_ns,
                            bytes.fromhex(host.macs[port].replace(":", "")))
        for w, (host, port) in nf.to_host.items():
            flib.fab_wire_endpoint(nf.X, w, self.index[host], port)
        self.programs: dict[int, CProgram] = {}
        # scratch arrays for reading programs back (a 128-rank ring reads 98 k programs:
        # allocating each read's arrays anew was a million cffi allocations); the
        # variable-length ones grow as needed (_scratch)
        self._iv, self._dv = ffi.new("i64[20]"), ffi.new("double[2]")
        self._grown: dict[str, Any] = {}

    def _scratch(self, use: str, ctype: str, n: int) -> Any:
        """A ``ctype`` ("i64"/"double") array of at least ``n`` items for ``use``, reused
        between reads (each read copies what it needs out before the next)."""
        buf = self._grown.get(use)
        if buf is None or len(buf) < n:
            buf = self._grown[use] = self.ffi.new(f"{ctype}[]", max(64, 2 * n))
        return buf

    def unclaimed(self) -> int:
        return sum(int(self.lib.hc_unclaimed(self.H, h)) for h in range(len(self.names)))

    # -- programs ---------------------------------------------------------------------------
    def receiver(self, host: str, node: Receiver) -> CProgram:
        cfg = node.cfg
        _covered("receiver", cfg.collector is None and cfg.credit_cells_per_s <= 0)
        iv = self.ffi.new("i64[]", [cfg.window, cfg.ack_every, cfg.keep_records,
                                    cfg.start_psn])
        dv = self.ffi.new("double[]", [cfg.ack_delay_s, cfg.nak_holdoff_s, cfg.cnp_interval_s])
        pid = self.lib.hc_receiver(self.H, self.index[host], len(node.ports),
                                   self._host_ports(node.ports), iv, dv)
        return self._program(pid, node, None)

    def sender(self, host: str, node: Sender, on_done: Callable[[Any], None]) -> CProgram:
        cfg, tmpls = node.cfg, node.templates
        tmpl = tmpls[0]
        _covered("sender", cfg.cc == "none" and not cfg.int_source and not cfg.mean_gap_s
                 and not cfg.duration_s and cfg.count > 0 and len(tmpls) == len(node.ports)
                 and all((len(t.template), t.bth_off, t.payload_off)
                         == (len(tmpl.template), tmpl.bth_off, tmpl.payload_off)
                         for t in tmpls))
        cells = cellmod.cell_count(cfg.msg_size, cfg.payload_len)
        iv = self.ffi.new("i64[]", [
            cfg.qpn, cfg.payload_len, cfg.msg_size, cfg.count, cfg.seed, cfg.start_psn,
            cfg.max_inflight_cells, node.frame_len, cells, len(tmpl.template), tmpl.bth_off,
            tmpl.payload_off, tmpl._ip_sum])
        dv = self.ffi.new("double[]", [cfg.rto_s, cfg.sack_holdoff_s, cfg.health_interval_s,
                                       cfg.idle_poll_s, node.bucket.rate_bps,
                                       node.bucket.burst_bytes, cfg.port_timeout_s,
                                       cfg.port_retry_s])
        sums = self.ffi.new("i64[]", [t._ip_sum for t in tmpls])
        pid = self.lib.hc_sender(self.H, self.index[host], len(node.ports),
                                 self._host_ports(node.ports), iv, dv, sums,
                                 b"".join(bytes(t.template) for t in tmpls))
        return self._program(pid, node, on_done)

    def _host_ports(self, ports: list[Any]) -> Any:
        """The host port each of a program's ports is (an NVLink sender's one port is the
        NVLink's; a receiver has every port of its host)."""
        return self.ffi.new("i32[]", [int(getattr(p, "host_port", p.index)) for p in ports])

    def _program(self, pid: int, node: Any, on_done: Callable[[Any], None] | None) -> CProgram:
        prog = CProgram(self, pid, node, on_done)
        self.programs[pid] = prog
        node._native = (self, pid)
        return prog

    def start(self, pid: int) -> None:
        """Program.start, between the engine and C: the clock and counter go in and back."""
        nf, eng = self.nf, self.engine
        io = nf.io
        io[0], io[1] = eng.now, eng._seq
        nf.lib.fab_sync_in(nf.X)
        code = self.lib.hc_start(self.H, pid, eng.now)
        nf.lib.fab_sync_out(nf.X)
        eng._seq = io[1]
        if code:
            self.finished(code - 1)

    def finished(self, pid: int) -> None:
        """A sender's run is over (C handed it over): the harness's on_done."""
        prog = self.programs[pid]
        if prog.on_done is not None:
            prog.on_done(prog)

    # -- reading back -----------------------------------------------------------------------
    def sync_sender(self, pid: int, node: Sender) -> None:
        ffi, lib = self.ffi, self.lib
        iv, dv = self._iv, self._dv
        lib.hc_sender_info(self.H, pid, iv, dv, ffi.NULL)
        done = iv[11]
        msgs = self._scratch("msgs", "double", 3 * done)
        lib.hc_sender_info(self.H, pid, iv, dv, msgs)
        if iv[15]:
            raise RuntimeError(f"C hosts: sender {node.cfg.qpn} met {iv[15]} ACKs with INT or "
                               "grants, which its run was admitted without")
        cfg, tr = node.cfg, node.transport
        st = tr.stats
        for k, name in enumerate(st.__dataclass_fields__):
            setattr(st, name, int(iv[k]))
        cells = cellmod.cell_count(cfg.msg_size, cfg.payload_len)
        tr.done = [OutMessage(m, b"", cfg.start_psn + m * cells, cfg.start_psn + (m + 1) * cells,
                              cells, msgs[3 * m],
                              None if math.isnan(msgs[3 * m + 1]) else msgs[3 * m + 1],
                              msgs[3 * m + 2]) for m in range(done)]
        tr.srtt = None if math.isnan(dv[0]) else dv[0]
        tr.rttvar = dv[1]
        node._messages_added = int(iv[10])
        node.crcs = [message_crc_of(m, cfg.msg_size, cfg.seed)
                     for m in range(min(node._messages_added, 10000))]
        node.cnps, node.malformed = int(iv[12]), int(iv[13])
        self._sync_port(pid, node)
        self._sync_failovers(pid, node)

    def _sync_port(self, pid: int, node: Any) -> None:
        iv = self._iv
        for p, port in enumerate(node.ports):
            self.lib.hc_prog_info(self.H, pid, p, iv)
            port.sent, port.send_errors, port.up = int(iv[0]), int(iv[1]), bool(iv[3])

    def _sync_failovers(self, pid: int, node: Sender) -> None:
        """Sender.failovers and each port's events (what _check_ports and _fail record)."""
        ffi, lib = self.ffi, self.lib
        n = lib.hc_port_events(self.H, pid, ffi.NULL, ffi.NULL)
        for port in node.ports:
            port.events = []
        if n:
            iv, dv = self._scratch("ev_i", "i64", 3 * n), self._scratch("ev_d", "double", n)
            lib.hc_port_events(self.H, pid, iv, dv)
        for i in range(n):
            event: dict[str, object] = {"t": dv[i], "event": "down" if iv[3 * i + 1] else "up"}
            if iv[3 * i + 1]:
                event["reason"] = REASONS[iv[3 * i + 2]]
            node.ports[iv[3 * i]].events.append(event)
        n = lib.hc_failovers(self.H, pid, ffi.NULL, ffi.NULL)
        if n:
            iv = self._scratch("fo_i", "i64", 3 * n)
            dv = self._scratch("fo_d", "double", 3 * n)
            lib.hc_failovers(self.H, pid, iv, dv)
        node.failovers = []
        for i in range(n):
            fo: dict[str, object] = {
                "port": node.ports[iv[3 * i]].ifname, "reason": REASONS[iv[3 * i + 1]],
                "detected_at": dv[3 * i], "since_last_progress_s": dv[3 * i + 1],
                "cells_moved": int(iv[3 * i + 2])}
            if not math.isnan(dv[3 * i + 2]):
                fo["recovered_s"] = dv[3 * i + 2]
            node.failovers.append(fo)

    def sync_receiver(self, pid: int, node: Receiver) -> None:
        ffi, lib = self.ffi, self.lib
        iv, dv = self._iv, self._dv
        nflows = lib.hc_receiver_flows(self.H, pid, iv)
        node.messages_total, node.not_roce = int(iv[0]), int(iv[1])
        node.flows = {}
        for f in range(nflows):
            lib.hc_flow_info(self.H, pid, f, iv, dv)
            window, nrec = int(iv[18]), int(iv[16])
            # depths up to the deepest seen (hc_flow_detail copies no more): the window is
            # tens of thousands of cells, and a 128-rank ring reads back 65 k flows
            top = min(window, int(iv[14]))
            hist = self._scratch("hist", "i64", top + 1)
            rec = self._scratch("rec", "i64", 3 * nrec)
            comp = self._scratch("comp", "double", nrec)
            lib.hc_flow_detail(self.H, pid, f, hist, rec, comp)
            key = (int(iv[17]).to_bytes(4, "big"), int(iv[0]))
            rb = ReorderBuffer(window=window, expected=int(iv[19]))
            st = rb.stats
            (st.received, st.delivered, st.out_of_order, st.duplicates, st.beyond_window,
             st.max_depth, st.reorder_delayed) = (int(v) for v in iv[9:16])
            st.reorder_delay_max_s, st.reorder_delay_sum_s = dv[0], dv[1]
            # one copy out of C, then the nonzero depths (indexing cdata window + 1 times
            # was most of a 128-rank ring's read-back)
            st.depth_hist = {d: n for d, n in enumerate(ffi.unpack(hist, top + 1)) if n}
            flow = Flow(key, key[1], node.ports[0], None, rb)  # type: ignore[arg-type]
            (flow.cells, flow.ce_cells, flow.int_cells, flow.cnps, flow.acks, flow.naks,
             flow.delivered_messages) = (int(v) for v in iv[1:8])
            flow.assembler.malformed = int(iv[8])
            flow.messages = [{"index": int(rec[3 * i]), "length": int(rec[3 * i + 1]),
                              "crc32": int(rec[3 * i + 2]), "completion_s": comp[i]}
                             for i in range(nrec)]
            node.flows[key] = flow
        self._sync_port(pid, node)


def _covered(role: str, ok: bool) -> None:
    """A program ``refusal`` should have kept off the C hosts is a bug, said as one."""
    if not ok:
        raise RuntimeError(f"C hosts: a {role} they do not cover reached them (rate control "
                           "none, no INT, credits, arrivals or duration); "
                           "chosts.refusal should have refused the run")


class CProgram:
    """hostsim.Program's face for a program that runs in C."""

    def __init__(self, hosts: NativeHosts, pid: int, node: Any,
                 on_done: Callable[[Any], None] | None) -> None:
        self.hosts, self.pid, self.node, self.on_done = hosts, pid, node, on_done
        self.engine = hosts.engine
        self.plan: Any = None
        self.metrics: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        return bool(self.hosts.lib.hc_done(self.hosts.H, self.pid))

    def start(self) -> None:
        node = self.node
        if isinstance(node, Sender):  # Sender.begin's own fields (C runs the rest)
            node._start = self.engine.now / NS
        self.hosts.start(self.pid)


class CSender(Sender):
    """A Sender whose run is in C: its metrics read C's state back first."""

    _native: tuple[NativeHosts, int]

    def metrics(self, elapsed: float) -> dict[str, object]:
        hosts, pid = self._native
        hosts.sync_sender(pid, self)
        return super().metrics(elapsed)


class CReceiver(Receiver):
    """A Receiver whose run is in C: its metrics read C's state back first."""

    _native: tuple[NativeHosts, int]

    def metrics(self, elapsed: float) -> dict[str, object]:
        hosts, pid = self._native
        hosts.sync_receiver(pid, self)
        return super().metrics(elapsed)
