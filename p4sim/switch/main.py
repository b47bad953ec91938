"""`p4sim switch`: a BMv2-JSON software switch taking simple_switch_grpc's command line.

    p4sim switch [--device-id N] -i 0@veth0 -i 1@veth2 ... [--cpu-port N] [--no-p4 | PROG.json]
                 [--grpc-server-addr 127.0.0.1:9559] [--grpc-server-ssl
                 --grpc-server-cert PEM --grpc-server-key PEM [--grpc-server-cacert PEM]
                 [--grpc-server-with-client-auth]] [--pcap DIR] [--log-console]
                 [--log-file PATH] [-L|--log-level LEVEL] [--log-flush]
                 [--priority-queues N] [--thrift-port N] [-- TARGET OPTIONS]

``--log-console`` (standard output) and ``--log-file`` turn on simple_switch's per-packet event
log (p4sim.switch.trace): parser states, tables hit or missed with the entry, actions and their
arguments, queues, egress ports; ``--log-level`` (trace, debug, info, warn, error, off; default
trace) filters it. Without either, the packet path is built without any trace hook.

Target options after ``--`` (``--grpc-server-addr``, the five ``--grpc-server-ssl`` ... TLS
options, ``--cpu-port``, ``--priority-queues``) are accepted as simple_switch_grpc takes them.
Every other option of simple_switch_grpc 1.15.5's ``--help`` is accepted with its arity
(``IGNORED_OPTIONS``) and noted once at start as ignored, so a value such as
``--nanolog ipc://...``'s is never taken for the JSON file.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from p4sim.switch.admin import DEFAULT_PORT, AdminServer
from p4sim.switch.api import ApiError

if TYPE_CHECKING:  # the gRPC modules load only when a server is started
    from p4sim.switch.p4runtime.tls import ServerTls

DEFAULT_GRPC = "0.0.0.0:9559"
# What `--version` and `--json-version` print: the BMv2 release whose command line this one
# follows, and the newest BMv2 JSON minor version the loader is written against.
BMV2_VERSION = "1.15.5"
JSON_VERSION = "2.24"

# simple_switch_grpc 1.15.5's options that p4sim takes but does not act on, with their arity
# (0: a flag, 1: one value) and why they do not apply; each given one is noted once at start.
# The tutorials' Mininet harness always passes `--nanolog ipc://...`, so a value-taking option
# read as a flag would turn its value into the JSON file name.
IGNORED_OPTIONS: dict[str, tuple[int, str]] = {
    "--use-files": (1, "pcap-file ports are not supported; interfaces are used"),
    "--packet-in": (1, "nanomsg packet injection is not supported"),
    "--nanolog": (1, "no nanomsg event log (use --log-console or --log-file)"),
    "--log-file-max-size": (1, "log files are not rotated"),
    "--log-file-max-files": (1, "log files are not rotated"),
    "--notifications-addr": (1, "learning/ageing go to P4Runtime digests, not nanomsg"),
    "--restore-state": (1, "state files are not supported"),
    "--dump-packet-data": (1, "packet bytes are not dumped in the log"),
    "--max-port-count": (1, "port numbers are not limited"),
    "--debugger": (0, "no debugger"),
    "--debugger-addr": (1, "no debugger"),
    "--load-modules": (1, "extern modules (.so) cannot be loaded"),
    "--enable-swap": (0, "JSON swapping is always on"),
    "--disable-swap": (0, "JSON swapping is always on"),
    "--drop-port": (1, "the drop port stays 511"),
    "--dp-grpc-server-addr": (1, "no gRPC data-plane channel"),
    "--max-mc-groups": (1, "multicast groups are not limited"),
    "--max-l1-entries": (1, "multicast entries are not limited"),
    "--max-l2-entries": (1, "multicast entries are not limited"),
}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="p4sim switch", add_help=True,
                                 description="BMv2-JSON software switch (simple_switch_grpc flags)")
    ap.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE")
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--cpu-port", type=int, default=None)
    ap.add_argument("--no-p4", action="store_true")
    ap.add_argument("--grpc-server-addr", default=None)
    # TLS, as simple_switch_grpc takes it (p4sim.switch.p4runtime.tls says how they combine)
    ap.add_argument("--grpc-server-ssl", action="store_true",
                    help="enable SSL/TLS for the gRPC server")
    ap.add_argument("--grpc-server-cacert", default=None, metavar="PEM",
                    help="CA certificate to verify clients against")
    ap.add_argument("--grpc-server-cert", default=None, metavar="PEM",
                    help="server certificate")
    ap.add_argument("--grpc-server-key", default=None, metavar="PEM", help="server key")
    ap.add_argument("--grpc-server-with-client-auth", action="store_true",
                    help="require a client certificate from the CA (mutual TLS)")
    ap.add_argument("--pcap", nargs="?", const=".", default=None, metavar="DIR")
    ap.add_argument("--log-console", action="store_true")
    ap.add_argument("--log-file", default=None, metavar="PATH")
    ap.add_argument("-L", "--log-level", default="trace",
                    choices=("trace", "debug", "info", "warn", "error", "off"))
    ap.add_argument("--log-flush", action="store_true")
    ap.add_argument("--priority-queues", type=int, default=1)
    ap.add_argument("--thrift-port", type=int, default=DEFAULT_PORT)
    ap.add_argument("-v", "--version", action="version", version=BMV2_VERSION + "-p4sim")
    ap.add_argument("--json-version", action="store_true",
                    help="print the newest BMv2 JSON version supported and exit")
    for name, (arity, why) in IGNORED_OPTIONS.items():
        dest = "ignored_" + name.lstrip("-").replace("-", "_")
        if arity:
            ap.add_argument(name, dest=dest, action="append", metavar="ARG",
                            help=f"accepted, ignored: {why}")
        else:
            ap.add_argument(name, dest=dest, action="append_const", const="",
                            help=f"accepted, ignored: {why}")
    # Structured per-packet trace (p4sim.switch.jsontrace): one JSON record per sampled packet.
    ap.add_argument("--trace-file", default=None, metavar="PATH")
    ap.add_argument("--trace-sample", type=int, default=1, metavar="N")
    ap.add_argument("--trace-filter", default=None, metavar="src=IP,dst=IP,proto=N,sport=N,dport=N")
    ap.add_argument("--dataplane", choices=("auto", "native", "python"), default=None,
                    help="p4sim: run the program as generated C (native) or on the Python "
                         "path; auto (default, or $P4SIM_DATAPLANE): native where a C "
                         "compiler is present and the program is covered")
    ap.add_argument("json", nargs="?", default=None)
    return ap


def _note_ignored(ns: argparse.Namespace) -> None:
    for name, (_arity, why) in IGNORED_OPTIONS.items():
        if getattr(ns, "ignored_" + name.lstrip("-").replace("-", "_")) is not None:
            print(f"p4sim switch: note: ignoring {name}: {why}", file=sys.stderr)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """simple_switch_grpc's command line: BMv2's options, then target options after `--`."""
    if "--" in argv:
        cut = argv.index("--")
        main_args, target_args = argv[:cut], argv[cut + 1:]
    else:
        main_args, target_args = argv, []
    ns = _parser().parse_args(main_args + target_args)
    if ns.json_version:
        print(JSON_VERSION)
        raise SystemExit(0)
    _note_ignored(ns)
    return ns


def parse_interfaces(specs: list[str]) -> dict[int, str]:
    """simple_switch's ``-i PORT@IFACE`` options as port -> interface name."""
    out: dict[int, str] = {}
    for spec in specs:
        port, sep, ifname = spec.partition("@")
        if not sep or not port.isdigit() or not ifname:
            raise ValueError(f"bad interface '{spec}' (expected PORT@IFACE, e.g. 0@veth0)")
        if int(port) in out:
            raise ValueError(f"port {port} given twice")
        out[int(port)] = ifname
    return out


def _tracer(ns: argparse.Namespace) -> Any:
    """The packet trace the options ask for, or None (then it costs nothing)."""
    if getattr(ns, "trace_file", None):  # the structured trace instead of the text log
        from p4sim.switch.jsontrace import tracer_from_options
        return tracer_from_options(ns.trace_file, ns.trace_sample, ns.trace_filter,
                                   f"device {ns.device_id}")
    if not (ns.log_console or ns.log_file) or ns.log_level == "off":
        return None
    from p4sim.switch.trace import Tracer

    if ns.log_file:
        out = open(ns.log_file, "w")  # noqa: SIM115 - lives as long as the switch process
    else:
        out = sys.stdout
    return Tracer(out, ns.log_level, flush=ns.log_flush or not ns.log_file)


class _Exit(Exception):
    """Stop start-up: print ``message`` (an error line) and exit with ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _data_plane(ns: argparse.Namespace) -> Any:
    """The DataPlane with its trace and its program, as the options say."""
    from p4sim.switch.dataplane import DataPlane

    try:
        tracer = _tracer(ns)
    except OSError as e:
        raise _Exit(1, f"cannot open log file {ns.trace_file or ns.log_file}: {e.strerror}") \
            from None
    except ValueError as e:  # --trace-sample / --trace-filter
        raise _Exit(2, str(e)) from None
    try:
        dp = DataPlane(ns.device_id, ns.cpu_port, ns.priority_queues,
                       tracer.warning if tracer is not None else None, trace=tracer,
                       dataplane=ns.dataplane)
    except ValueError as e:  # a bad $P4SIM_DATAPLANE
        raise _Exit(2, str(e)) from None
    if ns.no_p4:
        return dp
    if ns.json is None:
        raise _Exit(2, "give a BMv2 JSON file or --no-p4")
    try:
        with open(ns.json, "rb") as f:
            dp.load_pipeline(f.read())
    except OSError as e:
        raise _Exit(1, f"cannot read {ns.json}: {e.strerror}") from None
    except ApiError as e:
        raise _Exit(1, f"{ns.json}: {e.message}") from None
    return dp


def _admin(dp: Any, ns: argparse.Namespace) -> AdminServer | None:
    try:
        admin = AdminServer(dp, ns.thrift_port)
    except OSError as e:
        print(f"p4sim switch: warning: admin port {ns.thrift_port} unavailable "
              f"({e.strerror}); runtime queue settings disabled", file=sys.stderr)
        return None
    admin.start()
    return admin


def _server_tls(ns: argparse.Namespace) -> ServerTls | None:
    """The gRPC server's TLS settings (None: plaintext), checked as BMv2 checks them."""
    if not (ns.grpc_server_ssl or ns.grpc_server_cacert or ns.grpc_server_cert
            or ns.grpc_server_key or ns.grpc_server_with_client_auth):
        return None
    try:
        from p4sim.switch.p4runtime.tls import TlsConfigError, server_tls
    except ImportError as e:
        raise _Exit(1, f"P4Runtime server unavailable ({e})") from None
    try:
        tls, warnings = server_tls(ns.grpc_server_ssl, ns.grpc_server_cacert,
                                   ns.grpc_server_cert, ns.grpc_server_key,
                                   ns.grpc_server_with_client_auth)
    except TlsConfigError as e:
        raise _Exit(1, str(e)) from None
    for warning in warnings:
        print(f"p4sim switch: warning: {warning}", file=sys.stderr)
    return tls


def _grpc(dp: Any, ns: argparse.Namespace, grpc_addr: str,
          tls: ServerTls | None = None) -> Any:
    """The P4Runtime server, or None when it is not installed and was not asked for."""
    try:
        from p4sim.switch.p4runtime.server import serve
    except ImportError as e:
        if ns.grpc_server_addr or tls is not None:
            raise _Exit(1, f"P4Runtime server unavailable ({e})") from None
        print(f"p4sim switch: warning: P4Runtime server unavailable ({e})", file=sys.stderr)
        return None
    try:
        return serve(dp, grpc_addr, tls=tls, bound_memory=True)  # memory bounded from the start
    except Exception as e:
        # gRPC cannot tell a port in use from a certificate it refuses: look at the port.
        why = "gRPC refused the certificate and key (not a matching pair?)" \
            if tls is not None and isinstance(e, OSError) and _port_free(grpc_addr) else e
        raise _Exit(1, f"cannot start P4Runtime server at {grpc_addr}: {why}") from None


def _port_free(grpc_addr: str) -> bool:
    """Whether ``grpc_addr`` could be bound now."""
    import socket

    host, _, port = grpc_addr.rpartition(":")
    try:
        with socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET) as s:
            s.bind((host.strip("[]") or "0.0.0.0", int(port)))
    except (OSError, ValueError):
        return False
    return True


def _run(dp: Any, ns: argparse.Namespace, ifaces: dict[int, str], stop: threading.Event,
         tls: ServerTls | None = None) -> int:
    from p4sim.switch.ports import PortIO

    try:
        ports = PortIO(ifaces, ns.pcap)
    except OSError as e:
        raise _Exit(1, str(e)) from None
    dp.set_transmit_fn(ports.tx)
    dp.set_wake_fn(ports.wake)
    server: Any = None
    admin: AdminServer | None = None
    try:
        admin = _admin(dp, ns)
        grpc_addr = ns.grpc_server_addr or DEFAULT_GRPC
        server = _grpc(dp, ns, grpc_addr, tls)
        # Per-packet objects die by reference counting; make the cyclic collector run rarely
        # and skip everything allocated at start-up (generated code, protobuf modules).
        gc.freeze()
        gc.set_threshold(50_000, 50, 100)
        gc.enable()  # `p4sim switch` starts with it off (p4sim.cli)
        ports.start(dp)
        port_list = ", ".join(f"{p}@{i}" for p, i in sorted(ifaces.items())) or "none"
        print(f"p4sim switch: device {ns.device_id} ports {port_list}"
              f"{' gRPC ' + grpc_addr if server is not None else ''}"
              f"{(' TLS' + (' with client auth' if tls.client_auth else '')) if tls else ''}"
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


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        try:
            ifaces = parse_interfaces(ns.interface)
        except ValueError as e:
            raise _Exit(2, str(e)) from None
        if ns.priority_queues < 1 or ns.priority_queues > 8:
            raise _Exit(2, "--priority-queues must be 1..8")
        tls = _server_tls(ns)
        dp = _data_plane(ns)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        return _run(dp, ns, ifaces, stop, tls)
    except _Exit as e:
        print(f"p4sim switch: error: {e}", file=sys.stderr)
        return e.code


if __name__ == "__main__":
    sys.exit(main())
