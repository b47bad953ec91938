"""Run PTF tests against one switch on veth pairs, all inside a namespace made for the run.

    python -m netlab.ptf_runner [--target embedded|bmv2] [--dut switch|forwarder]
                                [--ports 4] [--cpu-port 510] [TEST_SPECS...]

The switch gets ``--no-p4``; each PTF test pushes its own pipeline over P4Runtime, as
p4lang's PTF suites do. Test params passed to PTF: grpcaddr, target, cpu_port, device_id.
Exit status is PTF's.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from netlab.hosts import NetLab, NetLabError, wait_until
from netlab.targets import ToolchainError, resolve_target, switch_argv

PTF_DIR = Path(__file__).resolve().parents[1] / "tests" / "ptf"
GRPC_ADDR = "127.0.0.1:9559"
THRIFT_PORT = 9090  # the runtime admin channel (queue rates/depths), as simple_switch's
DEVICE_ID = 1
CPU_PORT = 510  # the CPU port p4src/fabric.p4 and the test programs use

_PORT_OPEN = (
    "import socket,sys; s=socket.socket(); s.settimeout(0.2); "
    "sys.exit(s.connect_ex((sys.argv[1], int(sys.argv[2]))))"
)


def port_open(lab: NetLab, ns: str, addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    argv = [sys.executable, "-c", _PORT_OPEN, host, port]
    return lab.run(ns, argv, check=False).returncode == 0


def _ptf_exe() -> str:
    local = Path(sys.executable).with_name("ptf")
    return str(local) if local.exists() else (shutil.which("ptf") or "ptf")


def run(args: argparse.Namespace) -> int:
    target = resolve_target(args.target) if args.dut == "switch" else "none"
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="cf-ptf-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    with NetLab(prefix="cfp") as lab:
        ns = lab.netns("ns")
        switch_ports: dict[int, str] = {}
        ptf_ports: dict[int, str] = {}
        for i in range(args.ports):
            sw_if, ptf_if = lab.veth(f"s{i}", f"p{i}", ns_a=ns, ns_b=ns)
            switch_ports[i] = sw_if
            ptf_ports[i] = ptf_if
        dut_log = log_dir / "dut.log"
        if args.dut == "forwarder":
            argv = [sys.executable, "-m", "netlab.forwarder"]
            for i, ifname in switch_ports.items():
                argv += ["-i", f"{i}@{ifname}"]
            dut = lab.popen(ns, argv, name="forwarder", log=dut_log)
        else:
            argv = switch_argv(
                target, switch_ports, GRPC_ADDR, device_id=DEVICE_ID, cpu_port=args.cpu_port,
                thrift_port=THRIFT_PORT, priority_queues=args.priority_queues,
            )
            dut = lab.popen(ns, argv, name="switch", log=dut_log)
            if not wait_until(lambda: port_open(lab, ns, GRPC_ADDR) or not dut.alive(), 30):
                print(f"ptf_runner: switch did not open {GRPC_ADDR}; log: {dut_log}",
                      file=sys.stderr)
                return 1
            if not dut.alive():
                print(f"ptf_runner: switch exited early; log: {dut_log}:\n"
                      f"{dut_log.read_text()[-2000:]}", file=sys.stderr)
                return 1
        params = (f"grpcaddr='{GRPC_ADDR}';target='{target}';device_id={DEVICE_ID};"
                  f"thrift_port={THRIFT_PORT};priority_queues={args.priority_queues}")
        if args.cpu_port is not None:
            params += f";cpu_port={args.cpu_port}"
        # The switch-side interface names, for tests that take a link down.
        params += ";switch_ifaces='" + ",".join(
            f"{i}:{name}" for i, name in sorted(switch_ports.items())) + "'"
        argv = [_ptf_exe(), "--test-dir", str(PTF_DIR), "--log-dir", str(log_dir),
                "--test-params", params]
        for i, ifname in ptf_ports.items():
            argv += ["--interface", f"0-{i}@{ifname}"]
        argv += args.specs
        proc = subprocess.run(["ip", "netns", "exec", ns, *argv], cwd=log_dir)
        if not dut.alive():
            print(f"ptf_runner: the DUT died during the tests; log: {dut_log}", file=sys.stderr)
            return proc.returncode or 1
        return proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netlab.ptf_runner", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=("embedded", "bmv2"), default=None)
    parser.add_argument("--dut", choices=("switch", "forwarder"), default="switch")
    parser.add_argument("--ports", type=int, default=4)
    parser.add_argument("--cpu-port", type=int, default=CPU_PORT,
                        help=f"CPU port for packet-in/out (default {CPU_PORT}; -1 for none)")
    parser.add_argument("--priority-queues", type=int, default=2,
                        help="priority queues per port (simple_switch --priority-queues)")
    parser.add_argument("--log-dir", default=None)
    parser.add_argument("specs", nargs="*", help="PTF test specs (module, module.Class, group)")
    args = parser.parse_args(argv)
    if args.cpu_port is not None and args.cpu_port < 0:
        args.cpu_port = None
    try:
        return run(args)
    except (NetLabError, ToolchainError, ValueError) as exc:
        print(f"ptf_runner: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
