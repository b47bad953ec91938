"""Mininet node classes for cellfabric's switches (no Open vSwitch anywhere).

A ``ProcessSwitch`` is a Mininet switch whose data plane is one process in the root namespace
bound to the switch's interfaces, the way BMv2's simple_switch runs under Mininet. Subclasses
say which command: the harness's pair forwarder, ``p4sim switch`` or real
``simple_switch_grpc`` (the last two share flags, see ``netlab.targets.switch_argv``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from mininet.node import Switch


class ProcessSwitch(Switch):
    """A switch that is a single process started on ``start`` and ended on ``stop``."""

    def __init__(self, name: str, log_dir: str | None = None, **params) -> None:
        # Switch derives a dpid from digits in the name; our switches have no OpenFlow dpid.
        params.setdefault("dpid", "1")
        super().__init__(name, **params)
        self.log_dir = Path(log_dir) if log_dir else None
        self.proc: subprocess.Popen | None = None

    def port_map(self) -> dict[int, str]:
        """Data-plane port number -> interface name (Mininet's port numbers)."""
        return {
            port: intf.name for intf, port in self.ports.items() if intf.name != "lo"
        }

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, controllers) -> None:
        from netlab.capture import size_capture_ring_for_mtu

        for ifname in self.port_map().values():
            # BMv2 reads its ports with libpcap, whose ring holds only 32 frames on a veth
            # with offloads on (netlab/capture.py); both targets get the same ports.
            problem = size_capture_ring_for_mtu(ifname)
            if problem:
                print(f"{self.name}: warning: {problem}", file=sys.stderr)
        out = subprocess.DEVNULL
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{self.name}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        if out is not subprocess.DEVNULL:
            out.close()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, deleteIntfs: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        super().stop(deleteIntfs)


class ForwarderSwitch(ProcessSwitch):
    """Port 2k <-> 2k+1 forwarding (the harness's trivial DUT), numbering ports from 0."""

    def command(self) -> list[str]:
        argv = [sys.executable, "-m", "netlab.forwarder"]
        for port, ifname in sorted(self.port_map().items()):
            argv += ["-i", f"{port - 1}@{ifname}"]
        return argv


LOG_MAX_BYTES = 50 * 1000 * 1000


class P4Switch(ProcessSwitch):
    """A P4 switch of either target: ``p4sim switch`` or ``simple_switch_grpc``, same flags.

    Ports keep Mininet's numbers (from 1), which are the topology file's port numbers. The
    gRPC server listens on 127.0.0.1:``grpc_port`` in the root namespace, where the controller
    runs: loopback, so no process in a host's namespace can reach it (its 127.0.0.1 is its
    own), for both targets, whose default is 0.0.0.0. ``thrift_port`` is the runtime admin
    channel (queue rates and depths). ``tls_args``: the gRPC server's TLS options
    (cellfabric.emulation.secure), target options that go after ``--``.
    """

    def __init__(
        self,
        name: str,
        target: str = "embedded",
        device_id: int = 1,
        grpc_port: int = 50051,
        thrift_port: int = 9090,
        cpu_port: int | None = None,
        json_path: str | None = None,
        priority_queues: int = 0,
        pcap_dir: str | None = None,
        switch_log: bool = False,
        tls_args: list[str] | None = None,
        extra_ports: dict[int, str] | None = None,
        **params,
    ) -> None:
        super().__init__(name, **params)
        self.tls_args = list(tls_args or [])
        # ports on interfaces that are no Mininet link (the CPU port's veth under bgp)
        self.extra_ports = dict(extra_ports or {})
        self.switch_log = switch_log
        self.target = target
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.thrift_port = thrift_port
        self.cpu_port = cpu_port
        self.json_path = json_path
        self.priority_queues = priority_queues
        self.pcap_dir = pcap_dir

    def port_map(self) -> dict[int, str]:
        return {**super().port_map(), **self.extra_ports}

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def command(self) -> list[str]:
        from netlab.targets import switch_argv

        extra: list[str] = []
        if self.pcap_dir:
            extra += ["--pcap", self.pcap_dir]
        sample = os.environ.get("CELLFABRIC_TRACE_SAMPLE")
        if self.target == "bmv2":
            # BMv2's default trace level writes ~31 KB per packet and slows it 20-36x: packet
            # logs only on request, and then bounded (one file of at most LOG_MAX_BYTES).
            if sample and self.log_dir:
                # `--trace-sample N`: BMv2 cannot sample, it logs every packet (debug level,
                # no field values, still ~14 KB a packet: it slows the run, see README);
                # cellfabric.core.bmv2log keeps 1 in N when it reads the log into records.
                # The packet's first bytes (logged at info) key it by the same identity hash
                # as p4sim's records.
                from cellfabric.core.bmv2log import log_path

                traces = Path(self.log_dir).parent / "traces"
                traces.mkdir(parents=True, exist_ok=True)
                extra += ["--log-file", str(log_path(traces, self.name, int(sample))),
                          "--log-level", "debug", "--log-flush", "--dump-packet-data", "64",
                          "--log-file-max-size", str(LOG_MAX_BYTES), "--log-file-max-files", "1"]
            elif self.switch_log and self.log_dir:
                extra += ["--log-file", str(self.log_dir / f"{self.name}-bmv2"),
                          "--log-level", "info", "--log-file-max-size", str(LOG_MAX_BYTES),
                          "--log-file-max-files", "1"]
            else:
                extra += ["--log-level", "off"]
        else:
            # p4sim's per-packet trace (BMv2's --log-console format) into the run's logs, only
            # on request: --switch-log, or CELLFABRIC_SWITCH_TRACE=LEVEL to pick the level.
            level = os.environ.get("CELLFABRIC_SWITCH_TRACE") or ("trace" if self.switch_log else "")
            if level and self.log_dir:
                extra += ["--log-file", str(self.log_dir / f"{self.name}.trace.log"),
                          "--log-level", level]
            # `cellfabric run --trace-sample N`: structured records in RUN/traces/ (it wins
            # over the text log above: p4sim takes one trace).
            if sample and self.log_dir:
                traces = Path(self.log_dir).parent / "traces"
                traces.mkdir(parents=True, exist_ok=True)
                extra += ["--trace-file", str(traces / f"{self.name}.jsonl"),
                          "--trace-sample", sample]
        # switch_argv ends with the target options (after "--"), where BMv2 takes TLS's.
        return switch_argv(
            self.target, self.port_map(), self.grpc_addr, device_id=self.device_id,
            cpu_port=self.cpu_port, json=self.json_path, extra=extra,
            thrift_port=self.thrift_port, priority_queues=self.priority_queues,
        ) + self.tls_args

    def wait_ready(self, timeout: float = 30.0) -> bool:
        """True once the gRPC server accepts connections (False if the process died)."""
        from netlab.hosts import tcp_accepts, wait_until

        wait_until(lambda: not self.running() or tcp_accepts(self.grpc_port), timeout, 0.1)
        return self.running() and tcp_accepts(self.grpc_port)
