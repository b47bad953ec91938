"""A secured run (`cellfabric run --secure`) that, once its switches are up and programmed,
tries each of them as an outsider would; shared by tests/e2e (p4sim) and tests/toolchain
(real BMv2). Needs root and Mininet."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from cellfabric.core.experiment import run_experiment
from cellfabric.core.report import RunMetrics, write_report
from cellfabric.core.workloads import make_workload
from cellfabric.emulation.runner import FabricRun, RunConfig
from topologies.catalog import resolve_topology


def capabilities(addr: str, creds: grpc.ChannelCredentials | None) -> str:
    channel = grpc.insecure_channel(addr) if creds is None else grpc.secure_channel(addr, creds)
    with channel:
        try:
            p4runtime_pb2_grpc.P4RuntimeStub(channel).Capabilities(
                p4runtime_pb2.CapabilitiesRequest(), timeout=5)
        except grpc.RpcError as err:
            return err.code().name
    return "OK"


def listen_addresses(port: int) -> set[str]:
    """The addresses sockets LISTEN on at ``port`` in this namespace (an IPv4-mapped IPv6
    address as its IPv4 one: gRPC listens on ::ffff:127.0.0.1 for 127.0.0.1)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            hexaddr, _, hexport = local.partition(":")
            if state != "0A" or int(hexport, 16) != port:
                continue
            # /proc prints the address as 32-bit words in host (little-endian) order
            raw = b"".join(bytes.fromhex(hexaddr[i:i + 8])[::-1]
                           for i in range(0, len(hexaddr), 8))
            ip = ipaddress.ip_address(raw)
            found.add(str(getattr(ip, "ipv4_mapped", None) or ip))
    return found


class ProbedRun(FabricRun):
    """A secured run that, once its switches are up and programmed, tries them as outsiders."""

    probes: dict[str, dict[str, object]]

    def start_workload(self) -> None:
        assert self.pki is not None and self.fnet is not None
        ca = self.pki.ca_cert.read_bytes()
        own = self.pki.controller
        self.probes = {}
        for name in self.topo.switches:
            sw = self.fnet.switch(name)
            host = self.fnet.host(sorted(self.topo.hosts)[0])
            reach = host.cmd(f"timeout 2 bash -c 'echo > /dev/tcp/127.0.0.1/{sw.grpc_port}' "
                             "2>/dev/null && echo open || echo closed").strip()
            self.probes[name] = {
                "no certificate": capabilities(sw.grpc_addr, grpc.ssl_channel_credentials(ca)),
                "plaintext": capabilities(sw.grpc_addr, None),
                "run's certificate": capabilities(sw.grpc_addr, grpc.ssl_channel_credentials(
                    ca, own.key.read_bytes(), own.cert.read_bytes())),
                "listens on": listen_addresses(sw.grpc_port),
                "from a host": reach,
            }
        super().start_workload()


def secured_run(target: str, run_dir: Path) -> tuple[ProbedRun, RunMetrics]:
    """A 4-host leaf-spine permutation of 16 KiB messages, secured, on ``target``."""
    topo = resolve_topology("leaf-spine")
    workload = make_workload("permutation", sorted(topo.hosts), 16 * 1024, 1, seed=1)
    cfg = RunConfig(topo=topo, target=target, workload=workload, cc=topo.fabric.cc,
                    run_dir=run_dir, step_timeout_s=150, progress=False, secure=True)
    run = ProbedRun(cfg)
    metrics = run_experiment(run, len(workload.steps))
    write_report(metrics, run_dir)  # computes the summary, as `cellfabric run` does
    return run, metrics


def assert_secured(run: ProbedRun, metrics: RunMetrics) -> None:
    """The workload completed; every switch listened on loopback only, answered the run's
    certificate and refused the rest; the run's keys were 0600 in a 0700 folder."""
    assert metrics.summary["messages_completed"] == metrics.summary["messages_total"] == 4
    assert metrics.run["p4runtime"] == "mutual TLS"
    for name in run.topo.switches:
        assert run.probes[name] == {
            "no certificate": "UNAVAILABLE", "plaintext": "UNAVAILABLE",
            "run's certificate": "OK", "listens on": {"127.0.0.1"},
            "from a host": "closed"}, name
    pki = run.cfg.run_dir / "pki"
    assert stat.S_IMODE(pki.stat().st_mode) == 0o700
    keys = list(pki.glob("*.key"))
    assert len(keys) == len(run.topo.switches) + 2  # the CA's, each switch's, the controller's
    assert all(stat.S_IMODE(k.stat().st_mode) == 0o600 for k in keys)
