"""`cellfabric sim --trace-sample N`: the structured packet trace of every simulated switch,
and the host ends of each sampled packet's journey.

    RESULTS/traces/SWITCH.jsonl   one p4sim JsonTracer record per sampled packet (virtual ns)
    RESULTS/traces/hosts.jsonl    {"ev": "send"|"recv", "host", "nic", "t", ...} at the NICs
    RESULTS/traces/index.json     hosts (name -> IP), links (switch:port -> peer), the sample

Every switch and host samples by the same identity hash (p4sim.switch.jsontrace), so one cell
is kept at every hop or at none. A host's send record holds the moment the program handed the
frame to its NIC (``t``), when its first bit left (``t_tx``: after the NIC's own FIFO) and
when its last bit reached the leaf (``t_arrive``); a receive record the moment the last bit
reached the host. The journey joins them (cellfabric.core.journeys).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from cellfabric.sim.net import SimFabric
from hosts.cells import parse_roce
from p4sim.switch.jsontrace import JsonTracer
from p4sim.switch.tracesample import TraceSampler, packet_identity
from topologies.model import Topology

DEFINES_P4 = Path(__file__).resolve().parents[2] / "p4src" / "include" / "defines.p4"


def drop_reason_names(defines: Path = DEFINES_P4) -> dict[int, str]:
    """fabric.p4's DROP_* constants (value -> name), read from its defines so they cannot
    drift from the program."""
    import re

    names: dict[int, str] = {}
    if defines.exists():
        for m in re.finditer(r"const\s+bit<\d+>\s+DROP_(\w+)\s*=\s*(\d+)", defines.read_text()):
            names[int(m.group(2))] = m.group(1).lower()
    return names


class FabricTracing:
    """Attach to a built SimFabric before its pipelines load (the tracer builds the traced
    program then); ``close()`` when the run ends."""

    def __init__(self, fabric: SimFabric, topo: Topology, out_dir: Path, every: int) -> None:
        self.dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.sampler = TraceSampler(every)
        self.files: list[IO[str]] = []
        self.tracers: dict[str, JsonTracer] = {}
        reasons = drop_reason_names()
        for name, sw in fabric.switches.items():
            out = open(out_dir / f"{name}.jsonl", "w")  # noqa: SIM115 - closed by close()
            self.files.append(out)
            tracer = JsonTracer(out, name, self.sampler)
            tracer.set_drop_reasons(reasons)
            tracer.clock, tracer.t0 = sw.dp.clock, sw.dp.t0
            sw.dp.trace = tracer  # read by load_pipeline: the program is built traced
            self.tracers[name] = tracer
        self.hosts_out = open(out_dir / "hosts.jsonl", "w")  # noqa: SIM115
        self.files.append(self.hosts_out)
        self.engine = fabric.engine
        for name, host in fabric.hosts.items():
            for nic, wire in enumerate(host.wires):
                if wire is not None:
                    self._wrap_host_wire(name, nic, wire)
        for lk in topo.links:
            for src, dst, dst_port in ((lk.a, lk.b, lk.b_port), (lk.b, lk.a, lk.a_port)):
                if dst in fabric.hosts:
                    wires = fabric.link_wires[lk.name]
                    wire = wires[0] if src == lk.a else wires[1]
                    self._wrap_host_arrival(dst, dst_port - 1, wire)
        index = {"sample_every": every, "clock": "virtual ns",
                 "hosts": {n: h.ip for n, h in topo.hosts.items()},
                 "links": {f"{lk.a}:{lk.a_port}": f"{lk.b}:{lk.b_port}" for lk in topo.links}
                 | {f"{lk.b}:{lk.b_port}": f"{lk.a}:{lk.a_port}" for lk in topo.links},
                 "tiers": {n: s.role for n, s in topo.switches.items()}}
        (out_dir / "index.json").write_text(json.dumps(index, indent=1))

    def _host_record(self, ev: str, host: str, nic: int, frame: bytes, t: int,
                     **extra: Any) -> None:
        rec: dict[str, Any] = {"ev": ev, "host": host, "nic": nic, "t": t, "len": len(frame),
                               "id": packet_identity(frame)}
        cell = parse_roce(frame)
        if cell is not None:
            rec["cell"] = {"psn": cell.psn, "qpn": cell.qpn, "opcode": cell.opcode,
                           "ecn": cell.ecn}
        rec.update(extra)
        self.hosts_out.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def _wrap_host_wire(self, host: str, nic: int, wire: Any) -> None:
        send, wants, engine = wire.send, self.sampler.fast(), self.engine

        def traced_send(frame: bytes | bytearray) -> bool:
            if not wants(frame):
                return send(frame)
            before, now = wire.free_at, engine.now
            ok = send(frame)
            if ok:
                start = max(before, now)
                self._host_record("send", host, nic, bytes(frame), now,
                                  t_tx=round(start), t_arrive=round(wire.free_at)
                                  + wire.delay_ns, wire_ns=round(wire.free_at - start)
                                  + wire.delay_ns)
            else:
                self._host_record("send", host, nic, bytes(frame), now, refused=True)
            return ok
        wire.send = traced_send

    def _wrap_host_arrival(self, host: str, nic: int, wire: Any) -> None:
        deliver, wants, engine = wire.deliver, self.sampler.fast(), self.engine

        def traced_deliver(frame: bytes) -> None:
            if wants(frame):
                self._host_record("recv", host, nic, frame, engine.now)
            deliver(frame)
        wire.deliver = traced_deliver

    def records(self) -> int:
        return sum(t.records for t in self.tracers.values())

    def close(self) -> None:
        for f in self.files:
            f.close()
