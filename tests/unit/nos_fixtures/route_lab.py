"""A namespace standing in for a switch's NOS: veth ends named after their front-panel port
(a TAP per port, as FRR's namespaces have), each with a /24 whose .2 is the peer's gateway."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from netlab.hosts import NetLab

needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="needs root and iproute2 for netns/veth")


@dataclass
class RouteLab:
    lab: NetLab
    ns: str
    port_of_ifname: dict[str, int]  # the veth end in the namespace -> its port

    def ifname(self, port: int) -> str:
        return next(n for n, p in self.port_of_ifname.items() if p == port)

    def gateway(self, port: int) -> str:
        return f"10.77.{port}.2"

    def via(self, *ports: int) -> list[str]:
        """``ip route`` arguments for next hops over ``ports``."""
        if len(ports) == 1:
            return ["via", self.gateway(ports[0]), "dev", self.ifname(ports[0])]
        out: list[str] = []
        for p in ports:
            out += ["nexthop", "via", self.gateway(p), "dev", self.ifname(p)]
        return out

    def ip(self, *args: str) -> None:
        proc = subprocess.run(["ip", "-n", self.ns, *args], capture_output=True, text=True)
        assert proc.returncode == 0, f"ip {' '.join(args)}: {proc.stderr.strip()}"


@contextmanager
def route_lab(ports: tuple[int, ...] = (1, 2, 3)) -> Iterator[RouteLab]:
    with NetLab(prefix="cfra") as lab:
        ns = lab.netns("nos")
        port_of: dict[str, int] = {}
        for port in ports:
            inside, _outside = lab.veth(f"p{port}", f"q{port}", ns_a=ns, ns_b=ns)
            lab.addr(inside, f"10.77.{port}.1/24", ns=ns)
            port_of[inside] = port
        yield RouteLab(lab, ns, port_of)


FRR_DAEMONS = Path("/usr/lib/frr")
needs_frr = pytest.mark.skipif(not (FRR_DAEMONS / "zebra").exists()
                               or shutil.which("vtysh") is None,
                               reason="FRR (Debian's frr: zebra, staticd, vtysh) not installed")


@contextmanager
def frr_static(lab: RouteLab, static_config: str) -> Iterator[Callable[..., None]]:
    """zebra and staticd in ``lab``'s namespace with ``static_config`` (their own config, pid
    and vty folder, which the frr user can reach); yields ``vty(*config_lines)``, which
    applies config lines with vtysh. The daemons are the lab's processes: stopped with it."""
    work = Path(tempfile.mkdtemp(prefix="cfra-frr-"))
    try:
        work.chmod(0o777)  # the daemons drop to the frr user
        (work / "zebra.conf").write_text("hostname cfra\n")
        (work / "staticd.conf").write_text(static_config)
        for daemon in ("zebra", "staticd"):
            lab.lab.popen(lab.ns, [str(FRR_DAEMONS / daemon), "-f", str(work / f"{daemon}.conf"),
                                   "-i", str(work / f"{daemon}.pid"), "-z", str(work / "zserv.api"),
                                   "--vty_socket", str(work), "-u", "frr", "-g", "frr"],
                          name=daemon, log=work / f"{daemon}.log")

        def vty(*lines: str) -> None:
            argv = ["vtysh", "--vty_socket", str(work), "-c", "configure terminal"]
            for line in lines:
                argv += ["-c", line]
            proc = subprocess.run(argv, capture_output=True, text=True)
            assert proc.returncode == 0, f"vtysh: {proc.stdout.strip()} {proc.stderr.strip()}"

        yield vty
    finally:
        shutil.rmtree(work, ignore_errors=True)
