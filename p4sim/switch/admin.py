"""The switch's admin channel: simple_switch_CLI's queue and port commands at run time.

A JSON-lines protocol on a local TCP port (the ``--thrift-port``, default 9090, bound to
127.0.0.1): each request line is ``{"cmd": NAME, "args": [...]}``, each reply line is
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "one line"}``; a connection may
carry several requests.

Clients: the project's one admin channel client is ``controlplane.admin`` (both targets, used
by fabricctl, the PTF tests and the runner). p4sim may not import controlplane, so ``request``
below, the same exchange for ``p4sim ctl``, is the protocol's own side beside its server
(tests/unit/test_switch_admin.py holds both clients to the same replies).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import socketserver
import threading
from typing import Any

from p4sim.switch.api import ApiError

DEFAULT_PORT = 9090

COMMANDS = {
    "set_queue_rate": "set_queue_rate PPS [PORT [PRIORITY]]",
    "set_queue_depth": "set_queue_depth PKTS [PORT]",
    "set_port_rate": "set_port_rate PPS PORT [BELOW_PRIORITY]",
    "port_down": "port_down PORT",
    "port_up": "port_up PORT",
    "stats": "stats",
    "register_read": "register_read NAME INDEX",
    "register_write": "register_write NAME INDEX VALUE",
}


def _ints(args: list[Any], lo: int, hi: int, usage: str) -> list[int]:
    if not lo <= len(args) <= hi:
        raise ValueError(f"usage: {usage}")
    try:
        return [int(a) for a in args]
    except (TypeError, ValueError):
        raise ValueError(f"expected integers, got {args!r} (usage: {usage})") from None


def execute(dp: Any, cmd: str, args: list[Any]) -> Any:
    """Run one admin command against a DataPlane; raises ValueError/ApiError on bad input."""
    if cmd not in COMMANDS:
        raise ValueError(f"unknown command '{cmd}' (expected one of {', '.join(COMMANDS)})")
    usage = COMMANDS[cmd]
    if cmd == "set_queue_rate":
        v = _ints(args, 1, 3, usage)
        dp.set_queue_rate(v[0], v[1] if len(v) > 1 else None, v[2] if len(v) > 2 else None)
        return None
    if cmd == "set_port_rate":
        v = _ints(args, 2, 3, usage)
        dp.set_port_rate(v[0], v[1], v[2] if len(v) > 2 else 0)
        return None
    if cmd == "set_queue_depth":
        v = _ints(args, 1, 2, usage)
        dp.set_queue_depth(v[0], v[1] if len(v) > 1 else None)
        return None
    if cmd in ("register_read", "register_write"):
        # simple_switch_CLI's register commands: BMv2's P4Runtime server does not implement
        # register entries, so this is how a controller reaches registers on both targets.
        want = 2 if cmd == "register_read" else 3
        if len(args) != want:
            raise ValueError(f"usage: {usage}")
        name = str(args[0])
        try:
            nums = [int(str(a), 0) for a in args[1:]]
        except ValueError:
            raise ValueError(f"expected integers after {name}, got {args[1:]!r} "
                             f"(usage: {usage})") from None
        if cmd == "register_read":
            return dp.register_read(name, nums[0])
        dp.register_write(name, nums[0], nums[1])
        return None
    if cmd in ("port_down", "port_up"):
        (port,) = _ints(args, 1, 1, usage)
        dp.set_port_up(port, cmd == "port_up")
        return None
    _ints(args, 0, 0, usage)
    st = dp.stats()
    return {"ports": {str(p): dataclasses.asdict(s) for p, s in sorted(st.ports.items())},
            "parser_errors": st.parser_errors, "pipeline_drops": st.pipeline_drops}


def request(addr: tuple[str, int], cmd: str, args: list[str], timeout: float = 5.0) -> dict:
    """One request and its reply dict; raises OSError when the switch cannot be reached."""
    with socket.create_connection(addr, timeout=timeout) as s:
        s.sendall((json.dumps({"cmd": cmd, "args": args}) + "\n").encode())
        line = s.makefile("rb").readline()
    try:
        reply = json.loads(line) if line else None
    except ValueError:
        reply = None
    return reply if isinstance(reply, dict) else {"ok": False, "error": "no reply"}


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        dp = self.server.dp  # type: ignore[attr-defined]
        for raw in self.rfile:
            try:
                req = json.loads(raw)
                if not isinstance(req, dict):
                    raise ValueError("request must be a JSON object")
                result = execute(dp, str(req.get("cmd")), list(req.get("args") or []))
                reply: dict[str, Any] = {"ok": True, "result": result}
            except ApiError as e:
                reply = {"ok": False, "error": e.message}
            except (ValueError, TypeError) as e:
                reply = {"ok": False, "error": str(e)}
            self.wfile.write((json.dumps(reply) + "\n").encode())


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class AdminServer:
    def __init__(self, dp: Any, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> None:
        self.server = _Server((host, port), _Handler)
        self.server.dp = dp  # type: ignore[attr-defined]
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="p4sim-admin",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
