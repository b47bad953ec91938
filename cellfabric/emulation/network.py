"""A Mininet network built from a ``Topology``: hosts in namespaces, P4 switches as processes.

Interface names carry a tag unique to the run (switch interfaces live in the root namespace,
so two runs on one machine must not collide), and Mininet ports are pinned to the topology's
port numbers so the controller's entries and the wires agree.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from mininet.link import Link
from mininet.net import Mininet
from mininet.node import Host

from cellfabric.emulation.nodes import P4Switch
from cellfabric.emulation.secure import RunPki
from netlab.hosts import port_free
from topologies.model import GRPC_BASE, THRIFT_BASE, Topology

CPU_LINK_MTU = 9000  # a CPU-port veth's: a full-size frame with the controller header in front


@dataclass
class FabricNet:
    topo: Topology
    target: str
    json_path: str | None
    run_dir: Path
    pcap: bool = False
    switch_log: bool = False
    priority_queues: int = 2
    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    grpc_base: int = GRPC_BASE
    thrift_base: int = THRIFT_BASE
    net: Mininet | None = None
    pki: RunPki | None = None  # --secure: every switch serves mutual TLS with this run's CA
    cpu_port: int | None = None  # P4Runtime packet I/O on this port (--cpu-port)
    # --routing bgp: this port of every switch is a veth of its own, the network OS's relay
    # reads the far end (cpu_relay_ifname): packet I/O without a gRPC message per frame
    cpu_link_port: int | None = None
    cpu_links: list[str] = field(default_factory=list)  # the veths made (their switch ends)

    def __post_init__(self) -> None:
        # Several fabrics may run on one machine (a user's and a test's): when the usual
        # ports are taken, move both bases until every switch's ports are free.
        n = max((sw.device_id for sw in self.topo.switches.values()), default=0)
        for shift in range(0, 20000, 500):
            grpc = [self.grpc_base + shift + i for i in range(1, n + 1)]
            thrift = [self.thrift_base + shift + i for i in range(1, n + 1)]
            if all(port_free(p) for p in grpc + thrift):
                self.grpc_base += shift
                self.thrift_base += shift
                return

    def ifname(self, node: str, port: int | str) -> str:
        return f"{self.tag}{node}e{port}"

    def cpu_relay_ifname(self, switch: str) -> str:
        """The end of ``switch``'s CPU-port veth that its relay reads (cpu_link_port)."""
        return self.ifname(switch, "r")

    def _make_cpu_links(self) -> None:
        """A veth pair per switch: one end is the switch's CPU port, the relay reads the
        other. Both stay silent (no address, no IPv6): anything the kernel sent into the CPU
        port would reach the switch's parser as a packet_out header and a frame. Their MTU
        leaves room for that 2-byte header in front of a full-size frame."""
        for sw in self.topo.switches:
            a, b = self.ifname(sw, "c"), self.cpu_relay_ifname(sw)
            _ip(["link", "add", a, "mtu", str(CPU_LINK_MTU), "type", "veth", "peer", "name",
                 b, "mtu", str(CPU_LINK_MTU)])
            self.cpu_links.append(a)
            for end in (a, b):
                _ipv6_off(end)
                _ip(["link", "set", end, "up"])

    def build(self) -> Mininet:
        net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False,
                      autoStaticArp=False, waitConnected=False)
        log_dir = str(self.run_dir / "logs")
        if self.cpu_link_port is not None:
            self._make_cpu_links()
        for sw in self.topo.switches.values():
            extra = ({self.cpu_link_port: self.ifname(sw.name, "c")}
                     if self.cpu_link_port is not None else None)
            net.addSwitch(
                self.node_name(sw.name), cls=P4Switch, target=self.target,
                device_id=sw.device_id, grpc_port=self.grpc_base + sw.device_id,
                thrift_port=self.thrift_base + sw.device_id, json_path=self.json_path,
                priority_queues=self.priority_queues, log_dir=log_dir,
                switch_log=self.switch_log, cpu_port=self.cpu_port, extra_ports=extra,
                tls_args=self.pki.switch_args(sw.name) if self.pki else None,
                pcap_dir=str(self.run_dir / "pcap" / sw.name) if self.pcap else None,
            )
        for host in self.topo.hosts.values():
            net.addHost(self.node_name(host.name), cls=Host, ip=None)
        for lk in self.topo.links:
            net.addLink(
                self.node_name(lk.a), self.node_name(lk.b), port1=lk.a_port, port2=lk.b_port,
                intfName1=self.ifname(lk.a, lk.a_port), intfName2=self.ifname(lk.b, lk.b_port),
                cls=Link,
            )
        for nv in self.topo.nvlinks:
            # Intra-server traffic, the simplest honest model of NVLink: a direct veth between
            # the two GPUs' namespaces, no switch on it, paced only by its sender (at
            # nvlink_rate / nic_rate of the NIC's rate: cellfabric.core.hostplan).
            net.addLink(
                self.node_name(nv.a), self.node_name(nv.b), port1=nv.a_port, port2=nv.b_port,
                intfName1=self.ifname(nv.a, nv.a_port), intfName2=self.ifname(nv.b, nv.b_port),
                cls=Link,
            )
        net.build()
        self.net = net
        for lk in self.topo.links:
            for node, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
                if node in self.topo.switches:
                    _ipv6_off(self.ifname(node, port))
        for host in self.topo.hosts.values():
            node = net.get(self.node_name(host.name))
            for i, intf in enumerate(node.intfList()):
                intf.setMAC(host.nic_mac(i))
                # veth "offloads" the UDP/TCP checksum: the frame a switch reads off the wire
                # would carry only the partial pseudo-header sum, and the far host would drop
                # it. Computing checksums in software makes the bytes on the wire final.
                node.cmd(f"ethtool -K {intf.name} tx off rx off tso off gso off >/dev/null 2>&1")
            first = node.intfList()[0]
            node.cmd(f"ip addr add {host.ip}/32 dev {first.name}")
            # Every destination is reached through the attached leaf, which answers ARP for
            # host-facing ports; the route is on-link so no gateway address is needed.
            node.cmd(f"ip route add 10.0.0.0/8 dev {first.name} scope link")
            node.cmd("sysctl -q -w net.ipv6.conf.all.disable_ipv6=1")
            # The host processes claim UDP 4791 (hosts.nic.RocePortClaim), but a cell or ACK
            # that arrives after a host's last process exited would still draw an ICMP port
            # unreachable: a limit of one per day per destination (this namespace's own
            # setting) leaves the kernel silent for the run.
            node.cmd("sysctl -q -w net.ipv4.icmp_ratelimit=86400000")
        return net

    def node_name(self, name: str) -> str:
        return f"{name}{self.tag}"

    def host(self, name: str) -> Host:
        assert self.net is not None
        return self.net.get(self.node_name(name))

    def switch(self, name: str) -> P4Switch:
        assert self.net is not None
        return self.net.get(self.node_name(name))

    def host_ifname(self, host: str, index: int = 0) -> str:
        """The interface of a host's port ``index`` (0-based): its NIC ports, then its
        NVLinks."""
        lks = [lk for lk in self.topo.links if lk.b == host]
        if index >= len(lks):
            return self.ifname(host, index + 1)  # an NVLink: ports numbered after the NIC's
        lk = lks[index]
        return self.ifname(host, lk.b_port)

    def start(self, ready_timeout: float = 60.0) -> list[str]:
        """Start every switch; returns the names of switches that did not come up."""
        assert self.net is not None
        self.net.start()
        return [sw for sw in self.topo.switches
                if not self.switch(sw).wait_ready(ready_timeout)]

    def set_link(self, name: str, up: bool, blackhole: bool = False) -> None:
        """Bring a topology link (``a-b``) down or up at both ends.

        ``blackhole`` (real BMv2): a switch's end stays up and every frame it sends is dropped
        by its interface's queueing discipline (a zero-length FIFO), so the link carries
        nothing either way, as a cut fibre. BMv2 must not see its interface go down: its one
        receive thread then waits in libpcap on that interface and stops reading every port
        (seen as kernel drops on all of its ports and no message delivered). Taking the port
        out of the switch instead (``port_remove``, ``port_add``) once stalled a switch the
        same way on a loaded machine: the kernel dropped thousands of frames on its other
        ports. A host's end is set down either way."""
        assert self.net is not None
        lk = self.topo.link(name)
        if not blackhole:
            self.net.configLinkStatus(self.node_name(lk.a), self.node_name(lk.b),
                                      "up" if up else "down")
            return
        for node, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
            ifname = self.ifname(node, port)
            if node not in self.topo.switches:
                self.host(node).cmd(f"ip link set dev {ifname} {'up' if up else 'down'}")
            elif up:  # the interface's default discipline again
                _tc(["qdisc", "del", "dev", ifname, "root"])
            else:
                _tc(["qdisc", "replace", "dev", ifname, "root", "pfifo", "limit", "0"])

    def stop(self) -> None:
        if self.net is not None:
            self.net.stop()
            self.net = None
        while self.cpu_links:  # deleting one end deletes the pair
            with contextlib.suppress(RuntimeError):
                _ip(["link", "del", self.cpu_links.pop()])


def _ip(args: list[str]) -> None:
    """One `ip` command in the root namespace; a failure says which."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")


def _tc(args: list[str]) -> None:
    """One `tc` command on a switch interface (the root namespace); a failure says which."""
    proc = subprocess.run(["tc", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")


def _ipv6_off(ifname: str) -> None:
    """A switch port is a plain interface of this namespace: left to itself the kernel sends
    IPv6 router solicitations and MLD reports out of it, frames the switch never asked for."""
    with contextlib.suppress(OSError):  # no IPv6 in this kernel: nothing to silence
        Path(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6").write_text("1\n")
