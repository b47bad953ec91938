"""Run PTF tests against one switch on veth pairs, all inside a namespace made for the run.

    python -m netlab.ptf_runner [--target embedded|bmv2] [--dut switch|forwarder]
                                [--ports 4] [--cpu-port 510] [TEST_SPECS...]
    python -m netlab.ptf_runner --all [--target embedded|bmv2]

``--all`` runs every module of tests/ptf, each on a fresh switch (a module's ``DUT =
"forwarder"`` and ``PTF_PORTS = N`` are honoured), with PTF's own output, then a summary.

The switch gets ``--no-p4``; each PTF test pushes its own pipeline over P4Runtime, as
p4lang's PTF suites do. Test params passed to PTF: grpcaddr, target, cpu_port, device_id.
Exit status is PTF's.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from netlab.capture import size_capture_ring_for_mtu
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


def _wire(lab: NetLab, ns: str, a: str, b: str) -> bool:
    """Join veth ends ``a`` and ``b`` into one wire (tc mirred both ways); False if the kernel
    lacks the u32 classifier or the mirred action."""
    for src, dst in ((a, b), (b, a)):
        ok = lab.run(ns, ["tc", "qdisc", "add", "dev", src, "ingress"], check=False)
        if ok.returncode == 0:
            ok = lab.run(ns, ["tc", "filter", "add", "dev", src, "ingress", "protocol", "all",
                              "u32", "match", "u32", "0", "0", "action", "mirred", "egress",
                              "redirect", "dev", dst], check=False)
        if ok.returncode != 0:
            return False
    return True


def make_ports(lab: NetLab, ns: str, count: int) -> tuple[dict, dict, dict]:
    """Switch port i and PTF port i joined by a cuttable link: switch end s_i <-> l_i, wire,
    r_i <-> PTF end p_i. Taking l_i down is a cable pulled at the far end: the switch's port
    loses carrier (operstate lowerlayerdown, what BMv2 and p4sim watch) while both ends stay
    administratively up. (Downing the switch's own end is no test of failover: BMv2 then stops
    receiving on every port, its one pcap thread blocked on the downed handle; and PTF's capture
    thread dies on a downed PTF end.) Without tc mirred, plain pairs; the link is the switch end.
    The switch ends' offloads are off so that a libpcap reader's ring holds a burst.
    Returns (switch ifaces, PTF ifaces, link ifaces) by port."""
    switch_ports: dict[int, str] = {}
    ptf_ports: dict[int, str] = {}
    links: dict[int, str] = {}
    for i in range(count):
        sw_if, far = lab.veth(f"s{i}", f"l{i}", ns_a=ns, ns_b=ns)
        ptf_if, near = lab.veth(f"p{i}", f"r{i}", ns_a=ns, ns_b=ns)
        if not _wire(lab, ns, far, near):
            print("ptf_runner: warning: no tc mirred in this kernel; link tests take the switch "
                  "end down", file=sys.stderr)
            lab.run(ns, ["ip", "link", "del", far], check=False)
            lab.run(ns, ["ip", "link", "del", near], check=False)
            sw_if, ptf_if = lab.veth(f"s{i}", f"p{i}", ns_a=ns, ns_b=ns)
            far = sw_if
        switch_ports[i], ptf_ports[i], links[i] = sw_if, ptf_if, far
        # BMv2 reads the switch end with libpcap: without this its ring holds 32 frames and
        # a longer burst is cut short in the kernel (netlab/capture.py)
        problem = size_capture_ring_for_mtu(sw_if, ns)
        if problem:
            print(f"ptf_runner: warning: {problem}", file=sys.stderr)
    return switch_ports, ptf_ports, links


def _with_scratch_logs(args: argparse.Namespace, prefix: str,
                       body: Callable[[argparse.Namespace], int]) -> int:
    """Runs `body` with a log folder. Without --log-dir the folder is a scratch one: removed
    when everything passed, kept (and named) when something failed, so a failure can be read
    and a passing run leaves nothing behind."""
    if args.log_dir:
        return body(args)
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    rc = 1
    try:
        rc = body(argparse.Namespace(**{**vars(args), "log_dir": str(scratch)}))
    finally:
        if rc == 0:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"ptf_runner: logs kept in {scratch}", file=sys.stderr)
    return rc


def run(args: argparse.Namespace) -> int:
    return _with_scratch_logs(args, "cf-ptf-", _run_in)


def _run_in(args: argparse.Namespace) -> int:
    target = resolve_target(args.target) if args.dut == "switch" else "none"
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    with NetLab(prefix="cfp") as lab:
        ns = lab.netns("ns")
        switch_ports, ptf_ports, links = make_ports(lab, ns, args.ports)
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
        # The interface that cuts each port's link (see make_ports), for link-down tests.
        params += ";link_ifaces='" + ",".join(
            f"{i}:{name}" for i, name in sorted(links.items())) + "'"
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


def module_setting(path: Path, name: str, default: str) -> str:
    """A module-level constant (``DUT``, ``PTF_PORTS``) of a PTF module, without importing it."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ) and isinstance(node.value, ast.Constant):
            return str(node.value.value)
    return default


def run_all(args: argparse.Namespace) -> int:
    return _with_scratch_logs(args, "cf-ptf-all-", _run_all_in)


def _run_all_in(args: argparse.Namespace) -> int:
    failed: list[str] = []
    modules = sorted(PTF_DIR.glob("test_*.py"))
    logs = Path(args.log_dir)
    for module in modules:
        dut = module_setting(module, "DUT", "switch")
        print(f"== PTF {module.stem} (dut {dut if dut != 'switch' else args.target or 'default'})",
              flush=True)
        sub = argparse.Namespace(**vars(args))
        sub.dut, sub.ports, sub.specs = dut, int(module_setting(module, "PTF_PORTS", "4")), \
            [module.stem]
        sub.log_dir = str(logs / module.stem)
        try:
            rc = _run_in(sub)
        except (NetLabError, ToolchainError, ValueError) as exc:
            print(f"ptf_runner: error: {exc}", file=sys.stderr)
            rc = 2
        if rc != 0:
            failed.append(module.stem)
    print(f"PTF: {len(modules)} modules, {len(modules) - len(failed)} passed"
          + (f", failed: {', '.join(failed)}; logs in {logs}" if failed else ""))
    return 1 if failed else 0


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
    parser.add_argument("--all", action="store_true", help="every module of tests/ptf")
    parser.add_argument("specs", nargs="*", help="PTF test specs (module, module.Class, group)")
    args = parser.parse_args(argv)
    if args.cpu_port is not None and args.cpu_port < 0:
        args.cpu_port = None
    if args.all:
        return run_all(args)
    try:
        return run(args)
    except (NetLabError, ToolchainError, ValueError) as exc:
        print(f"ptf_runner: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
