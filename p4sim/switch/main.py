"""`p4sim switch`: a BMv2-JSON software switch taking simple_switch_grpc's command line.

    p4sim switch [--device-id N] -i 0@veth0 -i 1@veth2 ... [--cpu-port N] [--no-p4 | PROG.json]
                 [--grpc-server-addr 127.0.0.1:9559] [--pcap DIR] [--log-console]
                 [--priority-queues N] [--thrift-port N] [-- TARGET OPTIONS]

Target options after ``--`` (``--grpc-server-addr``, ``--cpu-port``, ``--priority-queues``) are
accepted as simple_switch_grpc takes them. Options of BMv2 that do not apply are ignored with a
warning.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
from typing import Any

from p4sim.switch.admin import DEFAULT_PORT, AdminServer
from p4sim.switch.api import ApiError

DEFAULT_GRPC = "0.0.0.0:9559"
IGNORED_WITH_VALUE = ("-L", "--log-level", "--log-file", "--notifications-addr", "--debugger-addr",
                      "--restore-state", "--max-port-count", "--dp-grpc-server-addr",
                      "--load-modules", "--drop-port", "--log-flush", "--packet-in")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="p4sim switch", add_help=True,
                                 description="BMv2-JSON software switch (simple_switch_grpc flags)")
    ap.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE")
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--cpu-port", type=int, default=None)
    ap.add_argument("--no-p4", action="store_true")
    ap.add_argument("--grpc-server-addr", default=None)
    ap.add_argument("--pcap", nargs="?", const=".", default=None, metavar="DIR")
    ap.add_argument("--log-console", action="store_true")
    ap.add_argument("--priority-queues", type=int, default=1)
    ap.add_argument("--thrift-port", type=int, default=DEFAULT_PORT)
    ap.add_argument("json", nargs="?", default=None)
    return ap


def _drop_ignored(argv: list[str]) -> tuple[list[str], list[str]]:
    kept, ignored = [], []
    i = 0
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if name in IGNORED_WITH_VALUE:
            ignored.append(a)
            if "=" not in a and i + 1 < len(argv):
                i += 1
            i += 1
            continue
        if a in ("--nanolog", "--debugger", "--use-files", "--dump-packet-data", "--enable-swap",
                 "--disable-swap"):
            ignored.append(a)
            i += 1
            continue
        kept.append(a)
        i += 1
    return kept, ignored


def parse_args(argv: list[str]) -> argparse.Namespace:
    if "--" in argv:
        cut = argv.index("--")
        main_args, target_args = argv[:cut], argv[cut + 1:]
    else:
        main_args, target_args = argv, []
    main_args, ignored = _drop_ignored(main_args)
    target_args, ignored2 = _drop_ignored(target_args)
    ns = _parser().parse_args(main_args + target_args)
    for opt in ignored + ignored2:
        print(f"p4sim switch: warning: ignoring BMv2 option '{opt}'", file=sys.stderr)
    return ns


def _interfaces(specs: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for spec in specs:
        port, sep, ifname = spec.partition("@")
        if not sep or not port.isdigit() or not ifname:
            raise ValueError(f"bad interface '{spec}' (expected PORT@IFACE, e.g. 0@veth0)")
        if int(port) in out:
            raise ValueError(f"port {port} given twice")
        out[int(port)] = ifname
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    ns = parse_args(args)
    try:
        ifaces = _interfaces(ns.interface)
    except ValueError as e:
        print(f"p4sim switch: error: {e}", file=sys.stderr)
        return 2
    if ns.priority_queues < 1 or ns.priority_queues > 8:
        print("p4sim switch: error: --priority-queues must be 1..8", file=sys.stderr)
        return 2

    from p4sim.switch.dataplane import DataPlane
    from p4sim.switch.ports import PortIO

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    dp = DataPlane(ns.device_id, ns.cpu_port, ns.priority_queues,
                   log if ns.log_console else None)
    if ns.json and not ns.no_p4:
        try:
            with open(ns.json, "rb") as f:
                dp.load_pipeline(f.read())
        except OSError as e:
            print(f"p4sim switch: error: cannot read {ns.json}: {e.strerror}", file=sys.stderr)
            return 1
        except ApiError as e:
            print(f"p4sim switch: error: {ns.json}: {e.message}", file=sys.stderr)
            return 1
    elif not ns.no_p4 and ns.json is None:
        print("p4sim switch: error: give a BMv2 JSON file or --no-p4", file=sys.stderr)
        return 2

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    server: Any = None
    admin: AdminServer | None = None
    try:
        ports = PortIO(ifaces, ns.pcap)
    except OSError as e:
        print(f"p4sim switch: error: {e}", file=sys.stderr)
        return 1
    dp.set_transmit_fn(ports.tx)
    dp.set_wake_fn(ports.wake)
    try:
        try:
            admin = AdminServer(dp, ns.thrift_port)
            admin.start()
        except OSError as e:
            print(f"p4sim switch: warning: admin port {ns.thrift_port} unavailable "
                  f"({e.strerror}); runtime queue settings disabled", file=sys.stderr)
        grpc_addr = ns.grpc_server_addr or DEFAULT_GRPC
        try:
            from p4sim.switch.p4runtime.server import serve
        except ImportError as e:
            if ns.grpc_server_addr:
                print(f"p4sim switch: error: P4Runtime server unavailable ({e})", file=sys.stderr)
                return 1
            serve = None
            print(f"p4sim switch: warning: P4Runtime server unavailable ({e})", file=sys.stderr)
        if serve is not None:
            try:
                server = serve(dp, grpc_addr)
            except Exception as e:
                print(f"p4sim switch: error: cannot start P4Runtime server at {grpc_addr}: {e}",
                      file=sys.stderr)
                return 1
        # Per-packet objects die by reference counting; make the cyclic collector run rarely
        # and skip everything allocated at start-up (generated code, protobuf modules).
        gc.freeze()
        gc.set_threshold(50_000, 50, 100)
        ports.start(dp)
        port_list = ", ".join(f"{p}@{i}" for p, i in sorted(ifaces.items())) or "none"
        print(f"p4sim switch: device {ns.device_id} ports {port_list}"
              f"{' gRPC ' + grpc_addr if server is not None else ''}"
              f"{' admin 127.0.0.1:' + str(admin.port) if admin else ''}", flush=True)
        while not stop.wait(0.5):
            pass
        return 0
    finally:
        if server is not None:
            try:
                server.stop()
            except Exception as e:
                print(f"p4sim switch: warning: P4Runtime server stop failed: {e}",
                      file=sys.stderr)
        if admin is not None:
            admin.stop()
        ports.stop()


if __name__ == "__main__":
    sys.exit(main())
