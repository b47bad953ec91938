"""Runs one p4lang/tutorials exercise unchanged and checks it the way its README says.

    python exercise_driver.py TUTORIALS_ROOT EXERCISE

Run as root, with the toolchain under test first on PATH as `p4c-bm2-ss` and
`simple_switch_grpc` (real p4lang, or `p4sim dropin`) and `p4.tmp.p4config_pb2` importable.
The exercise's solution files are put in place of the skeleton (as a student's finished
exercise), then the tutorials' own Makefile builds it (`make build`), the arguments of its
`make run` are taken from `make -n run`, and `utils/run_exercise.py`'s ExerciseRunner builds the
Mininet network and programs the switches exactly as `make run` does; where `make run` would
open the Mininet CLI, the README's host commands run through the Mininet API instead (no xterm
here). The last line printed is a JSON verdict: {"exercise", "ok", "checks": {name: detail}}.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

Checks = dict[str, tuple[bool, str]]


class Hosts:
    """The README's host commands, each bounded by a timeout, inside Mininet hosts."""

    def __init__(self, net: Any) -> None:
        self.net = net
        self.procs: list[Any] = []

    def start(self, host: str, command: str, seconds: float, stdin: str | None = None) -> Any:
        """A background command in ``host`` (stopped after ``seconds``); read it with wait()."""
        proc = self.net.get(host).popen(
            ["timeout", "-k", "2", "-s", "INT", str(seconds), "sh", "-c", command],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.flush()
        self.procs.append(proc)
        return proc

    def run(self, host: str, command: str, seconds: float, stdin: str | None = None) -> str:
        proc = self.start(host, command, seconds, stdin)
        return self.wait(proc)

    def wait(self, proc: Any) -> str:
        out, _ = proc.communicate(timeout=120)
        # Every host's output goes to stderr, which the tier shows when an exercise fails.
        print(f"--- {' '.join(proc.args[-1:])}\n{out}", file=sys.stderr)
        return out

    def finish(self, proc: Any, grace: float = 1.5) -> str:
        """Stop a receiver as a user's Ctrl-C would (``grace`` seconds after the last send)
        and return what it printed."""
        time.sleep(grace)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        return self.wait(proc)

    def stop(self, proc: Any) -> None:
        """End a command and what it runs: `timeout` passes SIGTERM on to its command (a
        SIGKILL would leave the command running in the host's namespace)."""
        if proc.poll() is not None:
            return
        children = psutil.Process(proc.pid).children(recursive=True)
        proc.terminate()
        try:
            proc.communicate(timeout=3)
        except subprocess.TimeoutExpired:
            # iperf's UDP server ignores SIGTERM: end the command itself, then `timeout`.
            for child in children:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
            proc.kill()
            proc.communicate()

    def stop_all(self) -> None:
        for proc in self.procs:
            self.stop(proc)


def _ping_ok(out: str) -> bool:
    return bool(re.search(r" 0(\.0+)?% packet loss", out))


def _loss_line(out: str) -> str:
    return next((ln for ln in out.splitlines() if "packet loss" in ln), out.strip()[-200:])


def _ttls(out: str) -> set[int]:
    return {int(t) for t in re.findall(r"ttl=(\d+)", out)}


def check_basic(h: Hosts) -> Checks:
    out: Checks = {}
    # pod-topo: h2 shares s1 with h1 (one hop); h3, h4 are three switches away (s1, spine, s2).
    for dst, ip, ttl in (("h2", "10.0.2.2", 63), ("h3", "10.0.3.3", 61), ("h4", "10.0.4.4", 61)):
        text = h.run("h1", f"ping -c 3 -i 0.3 -W 2 {ip}", 15)
        out[f"ping h1->{dst}"] = (_ping_ok(text), _loss_line(text))
        out[f"ttl h1->{dst}"] = (_ttls(text) == {ttl}, f"reply ttl {sorted(_ttls(text))}, "
                                 f"expected {ttl}")
    return out


def _receiver(h: Hosts, host: str) -> Any:
    """The exercise's receive.py, running until finish() stops it (at most a minute)."""
    proc = h.start(host, "exec python3 -u receive.py", 60)
    time.sleep(2.5)  # Scapy's import and sniff set-up before the first packet
    return proc


def check_basic_tunnel(h: Hosts) -> Checks:
    rx = _receiver(h, "h2")
    h.run("h1", "python3 send.py 10.0.2.2 'plain IPv4'", 30)
    h.run("h1", "python3 send.py 10.0.3.3 'tunnelled' --dst_id 2", 30)
    text = h.finish(rx)
    return {
        "IPv4 packet reaches h2": ("plain IPv4" in text, f"{text.count('got a packet')} packets"),
        # dst_id 2 wins over the IP address of h3: the tunnel delivers it to h2.
        "tunnel (dst_id 2, IP of h3) reaches h2": (
            "tunnelled" in text and re.search(r"dst_id\s*=\s*2", text) is not None, ""),
    }


def check_calc(h: Hosts) -> Checks:
    text = h.run("h1", "exec python3 -u calc.py", 20, stdin="6+2\n9-4\n12&10\nquit\n")
    answers = [ln.strip() for ln in text.splitlines()]
    want = {"6+2": "8", "9-4": "5", "12&10": "8"}
    out: Checks = {}
    for expr, result in want.items():
        i = answers.index(f"> {expr}") if f"> {expr}" in answers else (
            answers.index(expr) if expr in answers else -1)
        got = answers[i + 1] if 0 <= i < len(answers) - 1 else "none"
        out[f"{expr} = {result}"] = (got.endswith(result), f"switch answered {got!r}")
    return out


def _congested(h: Hosts, receiver: str, sender_cmd: str, settle: float = 3.0) -> str:
    """The README's set-up: h11 floods h22 over the 0.5 Mb/s s1-s2 link while h1 sends to h2.
    The flood starts ``settle`` seconds ahead (the slow link's queue builds first) and runs
    until the sender is done, however long Scapy takes to start on a loaded machine: a flood
    of fixed length could end before the sender's first packet, which then sees no queue."""
    iperf_server = h.start("h22", "exec iperf -s -u", 150)
    rx = _receiver(h, receiver)
    flood = h.start("h11", "exec iperf -c 10.0.2.22 -u -t 120", 125)
    time.sleep(settle)
    h.run("h1", sender_cmd, 60)
    h.stop(flood)
    # what the flood left queued (up to about 150 frames at 41 per second) drains before the
    # receiver is stopped, so the sender's last packets are not cut off behind it
    text = h.finish(rx, grace=5.0)
    h.stop(iperf_server)
    return text


def check_ecn(h: Hosts) -> Checks:
    text = _congested(h, "h2", "exec python3 send.py 10.0.2.2 'P4 is cool' 8")
    tos = re.findall(r"tos\s*=\s*(0x[0-9a-f]+)", text)
    return {"packets reach h2": (len(tos) > 0, f"{len(tos)} packets"),
            "CE marks (tos 0x3) at h2": ("0x3" in tos, f"tos seen {sorted(set(tos))}")}


def check_mri(h: Hosts) -> Checks:
    text = _congested(h, "h2", "exec python3 send.py 10.0.2.2 'P4 is cool' 8")
    depths = [int(d) for d in re.findall(r"qdepth\s*=\s*(\d+)", text)]
    swids = set(re.findall(r"swid\s*=\s*(\d+)", text))
    return {"MRI traces reach h2": (len(depths) > 0, f"switch ids {sorted(swids)}"),
            "queue depth above zero": (max(depths, default=0) > 0,
                                       f"max qdepth {max(depths, default=0)}")}


def check_load_balance(h: Hosts) -> Checks:
    rx2, rx3 = _receiver(h, "h2"), _receiver(h, "h3")
    for i in range(8):  # every send.py run picks a random TCP source port: a new 5-tuple
        h.run("h1", f"python3 send.py 10.0.0.1 'flow {i}'", 30)
    n2, n3 = h.finish(rx2).count("got a packet"), h.finish(rx3).count("got a packet")
    return {"all 8 flows arrive": (n2 + n3 == 8, f"h2 {n2}, h3 {n3}"),
            "split over h2 and h3": (n2 > 0 and n3 > 0, f"h2 {n2}, h3 {n3}")}


def check_qos(h: Hosts) -> Checks:
    rx = _receiver(h, "h2")
    h.run("h1", "python3 send.py --p=UDP --des=10.0.2.2 --m='P4 is cool' --dur=2", 30)
    h.run("h1", "python3 send.py --p=TCP --des=10.0.2.2 --m='P4 is cool' --dur=2", 30)
    text = h.finish(rx)
    tos = re.findall(r"tos\s*=\s*(0x[0-9a-f]+)", text)
    # README: tos changes from 0x1 to 0xb9 for UDP (EF) and 0xb1 for TCP.
    return {"UDP marked EF (tos 0xb9)": ("0xb9" in tos, f"tos seen {sorted(set(tos))}"),
            "TCP marked (tos 0xb1)": ("0xb1" in tos, f"tos seen {sorted(set(tos))}")}


def _tcp_connects(h: Hosts, client: str, server: str, server_ip: str) -> tuple[bool, str]:
    srv = h.start(server, "exec iperf -s", 12)
    time.sleep(1)
    text = h.run(client, f"exec iperf -c {server_ip} -t 2", 8)
    h.stop(srv)
    ok = re.search(r"\d+(\.\d+)? [KMG]?bits/sec", text) is not None
    return ok, (text.strip().splitlines() or ["no output"])[-1]


def check_firewall(h: Hosts) -> Checks:
    out_ok, out_text = _tcp_connects(h, "h1", "h3", "10.0.3.3")
    in_ok, in_text = _tcp_connects(h, "h3", "h1", "10.0.1.1")
    return {"internal h1 -> external h3 connects": (out_ok, out_text),
            "external h3 -> internal h1 blocked": (not in_ok, in_text)}


def check_link_monitor(h: Hosts) -> Checks:
    rx = _receiver(h, "h1")
    h.start("h1", "exec python3 send.py", 11)
    srv = h.start("h4", "exec iperf -s", 12)
    time.sleep(1)
    h.run("h1", "exec iperf -c 10.0.4.4 -t 6", 10)
    text = h.finish(rx)
    h.stop(srv)
    rates = [float(r) for r in re.findall(r"Port \d+: ([\d.]+) Mbps", text)]
    return {"probe reports arrive": (len(rates) > 0, f"{len(rates)} link reports"),
            "utilization seen under iperf": (max(rates, default=0) > 0,
                                             f"max {max(rates, default=0):.3f} Mbps")}


def check_source_routing(h: Hosts) -> Checks:
    rx = _receiver(h, "h2")
    # The README's route: h1, s1, s2, s3, s1, s2, h2.
    h.run("h1", "exec python3 send.py 10.0.2.2", 30, stdin="2 3 2 2 1\nq\n")
    text = h.finish(rx)
    return {"routed packet reaches h2": ("got a packet" in text,
                                         f"{text.count('got a packet')} packets")}


def check_multicast(h: Hosts) -> Checks:
    out: Checks = {}
    for dst in ("10.0.0.2", "10.0.0.3", "10.0.0.4"):
        text = h.run("h1", f"ping -c 2 -i 0.3 -W 2 {dst}", 12)
        out[f"ping h1->{dst}"] = (_ping_ok(text), _loss_line(text))
    return out


def check_p4runtime(h: Hosts) -> Checks:
    env = dict(os.environ)
    ctl = subprocess.Popen(["timeout", "-s", "INT", "14", "python3", "-u", "mycontroller.py"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    time.sleep(6)  # pipeline pushed, tunnel rules written
    ping = h.run("h1", "ping -c 4 -i 0.3 -W 2 10.0.2.2", 12)
    text, _ = ctl.communicate(timeout=60)
    counts = [int(n) for n in re.findall(r"TunnelCounter \d+: (\d+) packets", text)]
    return {"controller installs the program and rules": (
                "Installed P4 Program" in text and "Installed egress tunnel rule" in text,
                (text.strip().splitlines() or ["no output"])[0]),
            "h1 ping h2 through the tunnel": (_ping_ok(ping), _loss_line(ping)),
            "tunnel counters count": (max(counts, default=0) > 0, f"counters read {counts[-4:]}")}


CHECKS: dict[str, Callable[[Hosts], Checks]] = {
    "basic": check_basic, "basic_tunnel": check_basic_tunnel, "calc": check_calc,
    "ecn": check_ecn, "mri": check_mri, "load_balance": check_load_balance, "qos": check_qos,
    "firewall": check_firewall, "link_monitor": check_link_monitor,
    "source_routing": check_source_routing, "multicast": check_multicast,
    "p4runtime": check_p4runtime,
}


def _use_solution(ex_dir: Path) -> None:
    """Each solution file replaces the skeleton's file of that name, wherever the exercise
    keeps it (multicast's runtime file lives in sig-topo/)."""
    for f in (ex_dir / "solution").iterdir():
        if not f.is_file() or f.name.endswith(".license"):
            continue
        shutil.copy(f, ex_dir / f.name)
        for same in ex_dir.glob(f"*/{f.name}"):
            if same.parent.name != "solution":
                shutil.copy(f, same)


def _run_args(ex_dir: Path) -> list[str]:
    """The run_exercise.py arguments that the exercise's own `make run` passes."""
    dry = subprocess.run(["make", "-s", "-n", "run"], cwd=ex_dir, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    line = next(ln for ln in dry.splitlines() if "run_exercise.py" in ln)
    words = shlex.split(line)
    return words[words.index(next(w for w in words if w.endswith("run_exercise.py"))) + 1:]


def run(root: Path, name: str) -> dict[str, Any]:
    ex_dir = root / "exercises" / name
    _use_solution(ex_dir)
    build = subprocess.run(["make", "build"], cwd=ex_dir, capture_output=True, text=True,
                           timeout=300)
    if build.returncode != 0:
        return {"exercise": name, "ok": False,
                "checks": {"make build": [False, build.stderr.strip()[-400:]]}}
    os.chdir(ex_dir)
    sys.path.insert(0, str(root / "utils"))
    import run_exercise  # the tutorials' own harness

    sys.argv = ["run_exercise.py", *_run_args(ex_dir), "-q"]
    args = run_exercise.get_args()
    runner = run_exercise.ExerciseRunner(args.topo, args.log_dir, args.pcap_dir,
                                         args.switch_json, args.behavioral_exe, args.quiet)
    # P4RuntimeSwitch opens /tmp/p4s.<switch>.log whatever the log folder: removed afterwards
    # unless it was there before.
    stray_logs = [Path(f"/tmp/p4s.{sw}.log") for sw in runner.switches]
    stray_logs = [p for p in stray_logs if not p.exists()]
    started = time.monotonic()
    runner.create_network()
    hosts = Hosts(None)
    checks: Checks = {}
    try:
        runner.net.start()  # what run_exercise() does before its CLI, step for step
        time.sleep(1)
        runner.program_hosts()
        runner.program_switches()
        time.sleep(1)
        ready = time.monotonic() - started
        hosts.net = runner.net
        checks = CHECKS[name](hosts)
    finally:
        hosts.stop_all()
        runner.net.stop()
        for log in stray_logs:
            log.unlink(missing_ok=True)
    return {"exercise": name, "ok": all(ok for ok, _ in checks.values()), "ready_s": ready,
            "checks": checks}


def main() -> int:
    root, name = Path(sys.argv[1]).resolve(), sys.argv[2]
    if name not in CHECKS:
        print(json.dumps({"exercise": name, "ok": False, "error": "unknown exercise"}))
        return 2
    verdict = run(root, name)
    print(json.dumps(verdict))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
