"""Base class for cellfabric's PTF tests: compile the test's P4 program, push it over P4Runtime
in setUp, add entries by name, disconnect in tearDown.

    class Ipv4Forwarding(P4RuntimeTest):
        P4_PROGRAM = "p4src/fabric.p4"

        def runTest(self):
            self.table_add("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.0.0/8"},
                           "MyIngress.set_nhop", dmac="00:00:00:00:00:02", port=2)
            testutils.send_packet(self, 1, pkt)
            testutils.verify_packet(self, exp, 2)

Test params (``ptf --test-params "grpcaddr='127.0.0.1:9559';target='embedded';..."``, set by
``python -m netlab.ptf_runner``): ``grpcaddr``, ``target`` (embedded|bmv2), ``cpu_port``,
``device_id``, and optionally ``thrift_port`` (the admin channel, default 9090 on the gRPC host). Compiled programs are cached by content (source dir + includes + defines +
target) under ``build/ptf-cache`` (or ``$CELLFABRIC_PTF_CACHE``), so each program is compiled once.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import ptf
from ptf import testutils
from ptf.base_tests import BaseTest

from controlplane.admin import DEFAULT_ADMIN_PORT, AdminChannel
from controlplane.p4rt import P4RuntimeError, RegisterEntry, SwitchConnection, TableEntry

REPO = Path(__file__).resolve().parents[2]


def _cache_dir() -> Path:
    return Path(os.environ.get("CELLFABRIC_PTF_CACHE", REPO / "build" / "ptf-cache"))


def _digest(src: Path, includes: tuple[str, ...], defines: tuple[str, ...], target: str) -> str:
    h = hashlib.sha256(f"{target}|{defines}".encode())
    # Every .p4 file the program could include: its own directory tree and the include dirs.
    roots = [src.parent, *(Path(i) for i in includes)]
    for root in roots:
        for f in sorted(root.rglob("*.p4")):
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    h.update(src.name.encode())
    return h.hexdigest()[:16]


def compile_program(src: str | Path, target: str | None, includes: tuple[str, ...] = (),
                    defines: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """(json, p4info) for ``src``, compiled once per content into the cache."""
    src = Path(src)
    if not src.is_absolute():
        src = REPO / src
    try:
        from netlab.targets import compile_p4, resolve_target
        target = resolve_target(target)
    except ImportError:  # netlab not importable: fall back to the embedded compiler
        compile_p4 = None
        target = target or "embedded"
    out = _cache_dir() / f"{src.stem}-{_digest(src, includes, defines, target)}"
    json_path, p4info_path = out / f"{src.stem}.json", out / f"{src.stem}.p4info.txtpb"
    if json_path.exists() and p4info_path.exists():
        return json_path, p4info_path
    if compile_p4 is not None:
        return compile_p4(src, out, target, includes=includes, defines=defines)
    out.mkdir(parents=True, exist_ok=True)
    argv = [str(Path(sys.executable).with_name("p4sim")), "compile", str(src), "-o",
            str(json_path), "--p4runtime-files", str(p4info_path)]
    for inc in includes:
        argv += ["-I", str(inc)]
    for d in defines:
        argv += ["-D", d]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"compiling {src} failed: {(proc.stderr or proc.stdout).strip()}")
    return json_path, p4info_path


class P4RuntimeTest(BaseTest):
    """PTF test with a P4Runtime connection ``self.sw`` to the switch under test."""

    P4_PROGRAM: ClassVar[str | None] = None  # path (absolute or relative to the repo root)
    P4_INCLUDES: ClassVar[tuple[str, ...]] = ()
    P4_DEFINES: ClassVar[tuple[str, ...]] = ()
    ELECTION_ID: ClassVar[tuple[int, int]] = (0, 1)

    @staticmethod
    def link_ifname(port: int) -> str:
        """The interface that cuts port ``port``'s link (netlab.ptf_runner's ``link_ifaces``):
        downing it drops the switch port's carrier, as a cable pulled at the far end, while the
        switch's and PTF's own interfaces stay up."""
        spec = str(testutils.test_params_get().get("link_ifaces", ""))
        links = dict(item.split(":", 1) for item in spec.split(",") if ":" in item)
        if str(port) not in links:
            raise RuntimeError(f"no link_ifaces entry for port {port} (run via netlab.ptf_runner)")
        return links[str(port)]

    def set_link(self, port: int, up: bool) -> None:
        """Pull (up=False) or plug back the cable of switch port ``port``."""
        subprocess.run(["ip", "link", "set", "dev", self.link_ifname(port),
                        "up" if up else "down"], check=True)

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        if self.dataplane is not None:
            self.dataplane.flush()
        params = testutils.test_params_get()
        self.grpc_addr: str = str(params.get("grpcaddr", "127.0.0.1:9559"))
        self.target: str | None = params.get("target")
        cpu = params.get("cpu_port")
        self.cpu_port: int | None = int(cpu) if cpu not in (None, "") else None
        self.device_id: int = int(params.get("device_id", 0))
        host = self.grpc_addr.rpartition(":")[0] or "127.0.0.1"
        self.admin_addr = f"{host}:{int(params.get('thrift_port', DEFAULT_ADMIN_PORT))}"
        self._admin: AdminChannel | None = None
        self.sw = SwitchConnection(self.grpc_addr, self.device_id, self.ELECTION_ID,
                                   reconnect=False)
        self.sw.connect()
        # unittest skips tearDown when setUp fails; without this, a failed compile or pipeline
        # push would leave the stream open and every later test would lose arbitration.
        self.addCleanup(self.sw.close)
        self.json_path: Path | None = None
        self.p4info_path: Path | None = None
        if self.P4_PROGRAM:
            self.json_path, self.p4info_path = compile_program(
                self.P4_PROGRAM, self.target, self.P4_INCLUDES, self.P4_DEFINES)
            self.sw.set_pipeline(self.p4info_path, self.json_path)

    def tearDown(self) -> None:
        sw = getattr(self, "sw", None)
        if sw is not None:
            sw.close()
        BaseTest.tearDown(self)

    # ---- entry helpers (names, not ids) ----

    def table_add(self, table: str, match: dict[str, Any], action: str,
                  priority: int = 0, **params: Any) -> TableEntry:
        entry = TableEntry(table, match=dict(match), action=action, params=params,
                           priority=priority)
        self.sw.insert(entry)
        return entry

    def table_modify(self, table: str, match: dict[str, Any], action: str,
                     priority: int = 0, **params: Any) -> TableEntry:
        entry = TableEntry(table, match=dict(match), action=action, params=params,
                           priority=priority)
        self.sw.modify(entry)
        return entry

    def table_delete(self, table: str, match: dict[str, Any], priority: int = 0) -> None:
        self.sw.delete(TableEntry(table, match=dict(match), priority=priority))

    def set_default(self, table: str, action: str, **params: Any) -> None:
        self.sw.set_default(table, action, **params)

    # ---- admin channel and registers ----

    @property
    def admin(self) -> AdminChannel:
        """Queue/port settings (p4sim ctl or simple_switch_CLI, by target)."""
        if self._admin is None:
            tool = "bmv2" if self.target == "bmv2" else "p4sim"
            self._admin = AdminChannel(self.admin_addr, tool)
        return self._admin

    def register_write(self, name: str, index: int, value: int) -> None:
        """Over P4Runtime, or, where the switch answers UNIMPLEMENTED (BMv2's PI does), with
        simple_switch_CLI's register_write on the admin channel."""
        try:
            self.sw.modify(RegisterEntry(name, index, value))
        except P4RuntimeError as err:
            if "UNIMPLEMENTED" not in str(err):
                raise
            self.admin.run("register_write", self.sw.index.register(name).preamble.name,
                           index, value)

    def register_read(self, name: str, index: int) -> int:
        try:
            (entry,) = self.sw.read(RegisterEntry(name, index))
            return int(entry.value)
        except P4RuntimeError as err:
            if "UNIMPLEMENTED" not in str(err):
                raise
            out = self.admin.run("register_read", self.sw.index.register(name).preamble.name,
                                 index)
            # p4sim ctl prints the value as JSON; simple_switch_CLI as "...[index]= value"
            return int(out) if isinstance(out, int) else int(str(out).rsplit("=", 1)[-1])
