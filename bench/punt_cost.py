"""What one in-band frame costs a relay in CPU: PacketOuts to one p4sim switch over the
streaming client the relay uses (controlplane.SwitchConnection) and over grpc.aio, paced as
frames come, CPU time of this process per message (not wall time: the machine may be busy).

    sudo PYTHONPATH=. python bench/punt_cost.py [N]    (needs root: a veth pair)
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from cellfabric.nos.relay import RELAY_ROLE, relay_role_config
from controlplane.connection import SwitchConnection, wait_until
from netlab.hosts import NetLab, free_port, tcp_accepts
from netlab.targets import compile_p4, switch_argv

ROOT = Path(__file__).resolve().parents[1]
FRAME = bytes(range(64)) * 2  # a BFD or keepalive frame is about this size
CPU_PORT = 510
PACE_S = 0.001


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return r.ru_utime + r.ru_stime


def sync_cost(relay: SwitchConnection, n: int) -> float:
    c0 = cpu_s()
    for _ in range(n):
        relay.packet_out(FRAME, egress_port=1, _pad=0)
        time.sleep(PACE_S)
    time.sleep(0.5)  # the stream's threads finish sending
    return (cpu_s() - c0) / n


async def aio_cost(addr: str, relay: SwitchConnection, n: int) -> float:
    async with grpc.aio.insecure_channel(addr) as channel:
        call = p4runtime_pb2_grpc.P4RuntimeStub(channel).StreamChannel()
        arb = p4runtime_pb2.StreamMessageRequest()
        arb.arbitration.device_id = relay.device_id
        arb.arbitration.election_id.high, arb.arbitration.election_id.low = relay.election_id
        arb.arbitration.role.name = RELAY_ROLE
        arb.arbitration.role.config.CopyFrom(relay_role_config())
        await call.write(arb)
        if (await call.read()).arbitration.status.code != 0:
            raise SystemExit("punt_cost: the asyncio stream did not become primary")
        c0 = cpu_s()
        for _ in range(n):
            msg = p4runtime_pb2.StreamMessageRequest()
            msg.packet.CopyFrom(relay.codec.packet_out(FRAME, {"egress_port": 1, "_pad": 0}))
            await call.write(msg)
            await asyncio.sleep(PACE_S)
        await asyncio.sleep(0.5)
        return (cpu_s() - c0) / n


def main(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="punt-cost-") as build:
        measure(n, Path(build))


def measure(n: int, build: Path) -> None:
    json_path, p4info = compile_p4(ROOT / "p4src" / "fabric.p4", build, target="embedded")
    with NetLab(prefix="cfpc") as lab:
        a, _ = lab.veth("a", "b")
        port = free_port()
        addr = f"127.0.0.1:{port}"
        lab.popen(None, switch_argv("embedded", {1: a}, addr, cpu_port=CPU_PORT, json=json_path,
                                    thrift_port=free_port()), name="sw", log=build / "sw.log")
        if not wait_until(lambda: tcp_accepts(port), timeout=60, interval=0.2):
            raise SystemExit("punt_cost: the switch did not start")
        ctl = SwitchConnection(addr, name="sw", reconnect=False).connect()
        try:
            ctl.set_pipeline(p4info, json_path)
            relay = SwitchConnection(addr, name="sw", reconnect=False, role=RELAY_ROLE,
                                     role_config=relay_role_config()).connect()
            sync = sync_cost(relay, n)
            relay.close()
            time.sleep(0.5)  # the switch lets the role's primary go
            aio = asyncio.run(aio_cost(addr, relay, n))
        finally:
            ctl.close()
    print(f"{n} PacketOuts, CPU per message: streaming client {sync * 1e3:.3f} ms, "
          f"grpc.aio {aio * 1e3:.3f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
