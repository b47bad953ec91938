"""Table-entry write throughput of the controlplane client to one switch, beside the raw gRPC
round-trip rate measured in the same run.

    python bench/controlplane_bench.py [--switch ADDR[,DEVICE_ID]] [--entries 2000]
                                       [--p4info F --json F]

Without --switch it starts its own `p4sim switch --no-p4` on a free loopback port (and stops
it at the end). The pipeline is the control-plane test program (compiled with the default
target) unless --p4info/--json are given; entries go to its exact-match table
MyIngress.ipv4_lpm (/32 routes), or to the first direct table with one exact or LPM key.

Printed, all in one run against the same switch:
  - Capabilities RPCs/s (the cheapest unary RPC: the transport's ceiling),
  - raw Write RPCs/s with one prebuilt update each (no client-side encoding),
  - entries/s through SwitchConnection.insert, one entry per Write (unbatched),
  - entries/s through one Write per batch of B entries (batched, several B),
and each rate as a ratio of the Capabilities rate. No assertions: see bench/README or the
report for recorded numbers.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from p4.v1 import p4runtime_pb2

from controlplane.p4rt import SwitchConnection, TableEntry, Update
from netlab.hosts import free_port, tcp_accepts, wait_until

REPO = Path(__file__).resolve().parents[1]
TEST_PROGRAM = REPO / "tests" / "unit" / "cp_fixtures" / "cp_test.p4"


def start_switch(addr: str) -> subprocess.Popen[bytes]:
    from netlab.targets import switch_argv

    argv = switch_argv("embedded", {}, addr, thrift_port=free_port())
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    host, port = addr.rsplit(":", 1)
    wait_until(lambda: proc.poll() is not None or tcp_accepts(int(port), host), 20)
    if proc.poll() is None and tcp_accepts(int(port), host):
        return proc
    proc.kill()
    raise SystemExit(f"controlplane_bench: p4sim switch did not start on {addr}")


def rate(n: int, fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)


def pick_table(sw: SwitchConnection) -> tuple[str, str, str, list[str], int]:
    """(table, key field, action, params, key width) of a direct table with one exact or LPM
    key and an action with params."""
    ix = sw.index
    for name in ["MyIngress.ipv4_lpm", *ix.names("table")]:
        try:
            fields = ix.match_fields(name)
        except LookupError:
            continue
        if len(fields) != 1 or fields[0].match_type not in ("exact", "lpm"):
            continue
        if ix.action_profile_of(name) is not None:
            continue
        for act in ix.table_actions(name):
            if act.params:
                return (name, fields[0].name, act.preamble.name,
                        [p.name for p in act.params], fields[0].bitwidth)
    raise SystemExit("controlplane_bench: no direct table with one exact/LPM key")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--switch", help="ADDR[,DEVICE_ID] of a running switch")
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--rtt-calls", type=int, default=2000)
    ap.add_argument("--p4info")
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    proc = None
    if args.switch:
        addr, _, dev = args.switch.partition(",")
        device_id = int(dev or 0)
    else:
        addr, device_id = f"127.0.0.1:{free_port()}", 0
        proc = start_switch(addr)
    try:
        if args.p4info and args.json:
            p4info, json_path = Path(args.p4info), Path(args.json)
        else:
            from netlab.targets import compile_p4

            out = Path(tempfile.mkdtemp(prefix="cp-bench-"))
            json_path, p4info = compile_p4(TEST_PROGRAM, out)
        with SwitchConnection(addr, device_id, reconnect=False) as sw:
            sw.set_pipeline(p4info, json_path)
            return run(sw, args.entries, args.rtt_calls)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)


def run(sw: SwitchConnection, n: int, rtt_calls: int) -> int:
    table, key, action, params, width = pick_table(sw)
    size = sw.index.table(table).size or n
    n = min(n, (1 << width) - 1, size)
    stub = sw._stub_or_raise()
    caps = p4runtime_pb2.CapabilitiesRequest()
    results: list[tuple[str, float]] = []

    results.append(("Capabilities RPC (raw gRPC)", rate(rtt_calls, lambda: [
        stub.Capabilities(caps) for _ in range(rtt_calls)])))

    def entries(start: int) -> list[TableEntry]:
        return [TableEntry(table, match={key: start + i}, action=action,
                           params={p: i % 256 for p in params}) for i in range(n)]

    def reset() -> None:
        sw.delete(*[TableEntry(table, match={key: i}) for i in range(n)])

    # Raw Write: prebuilt protobufs, one update per RPC, no client encoding or bookkeeping.
    protos = [sw.codec.to_proto(e) for e in entries(0)]

    def raw_writes() -> None:
        for ent in protos:
            req = p4runtime_pb2.WriteRequest(device_id=sw.device_id,
                                             updates=[Update(type=Update.INSERT, entity=ent)])
            req.election_id.high, req.election_id.low = sw.election_id
            stub.Write(req)

    results.append(("Write RPC, 1 prebuilt update (raw gRPC)", rate(n, raw_writes)))
    reset()
    batch = entries(0)
    results.append(("SwitchConnection.insert, unbatched", rate(n, lambda: [
        sw.insert(e) for e in batch])))
    reset()
    for size in (10, 100, 1000):
        if size > n:
            continue
        chunks = [batch[i:i + size] for i in range(0, n, size)]
        results.append((f"SwitchConnection.insert, batches of {size}",
                        rate(n, lambda chunks=chunks: [sw.insert(*c) for c in chunks])))
        reset()

    base = results[0][1]
    print(f"controlplane bench: {n} entries into {table} on {sw.addr}")
    print(f"{'what':44} {'per second':>12} {'x Capabilities':>15}")
    for what, r in results:
        print(f"{what:44} {r:12.0f} {r / base:15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
