"""One FRR instance (zebra, bfdd, bgpd) in one switch's namespace.

Each instance has its own folder (configs, pid files, logs, vty sockets, zebra's API socket,
bfdd's control socket), so any number run side by side and none touches /etc/frr or
/var/run/frr. The daemons are this process's children (started through ``ip netns exec``,
which execs them in place), stopped by their PIDs.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from cellfabric.nos.frr_config import BfdTimers, SwitchRouting, bfdd_conf, bgpd_conf, zebra_conf

FRR_DIR = Path("/usr/lib/frr")
DAEMONS = ("zebra", "bfdd", "bgpd")
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes; keep room for FRR's own suffixes
STOP_WAIT_S = 5.0
READY_WAIT_S = 20.0


class FrrError(RuntimeError):
    """FRR is missing, or a daemon did not start (the message says which and where)."""


def frr_available() -> bool:
    return all((FRR_DIR / d).is_file() for d in DAEMONS) and shutil.which("vtysh") is not None


def _frr_can_reach(path: Path) -> bool:
    """Whether user frr may traverse every folder above ``path`` (pytest's and many users'
    temp folders are 0700 root: the daemons could not open their config there)."""
    frr_uid = pwd.getpwnam("frr").pw_uid
    for folder in path.resolve().parents:
        st = folder.stat()
        if not (st.st_mode & stat.S_IXOTH or st.st_uid == frr_uid):
            return False
    return True


def _chown_frr(path: Path) -> None:
    # the daemons drop to user frr; they must write their pid files and sockets here
    shutil.chown(path, "frr", "frr")
    for p in path.iterdir():
        shutil.chown(p, "frr", "frr")


class FrrInstance:
    def __init__(self, netns: str, routing: SwitchRouting, folder: Path,
                 timers: BfdTimers | None = None) -> None:
        self.netns = netns
        self.routing = routing
        self.record = folder  # configs and logs end up here
        self.timers = timers or BfdTimers()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        folder.mkdir(parents=True, exist_ok=True)
        # sockets need a short path, and the daemons (user frr) must reach every file: else
        # they work in a private temp folder, copied into ``folder`` when they stop
        short = len(str(folder / "zserv.api")) <= SOCKET_PATH_MAX
        self._private = not (short and _frr_can_reach(folder))
        self.folder = Path(tempfile.mkdtemp(prefix="cf-frr-")) if self._private else folder
        self.sock_dir = self.folder

    def write_configs(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for daemon, conf in (("zebra", zebra_conf(self.routing)),
                             ("bfdd", bfdd_conf(self.routing, self.timers)),
                             ("bgpd", bgpd_conf(self.routing))):
            (self.folder / f"{daemon}.conf").write_text(self._log_lines(daemon) + conf)
        _chown_frr(self.folder)

    def _log_lines(self, daemon: str) -> str:
        """Each daemon's log, its times to the millisecond (the failure report reads BFD's
        state changes there). Set in the config, not with ``--log file:``, whose target
        ignores ``log timestamp precision``; what a daemon says before it reads its config
        goes to its .out file."""
        return f"log file {self.log_path(daemon)}\nlog timestamp precision 3\n"

    def _argv(self, daemon: str) -> list[str]:
        argv = ["ip", "netns", "exec", self.netns, str(FRR_DIR / daemon),
                "-f", str(self.folder / f"{daemon}.conf"),
                "-i", str(self.folder / f"{daemon}.pid"),
                "--vty_socket", str(self.sock_dir),
                "-z", str(self.sock_dir / "zserv.api"),
                "--limit-fds", "1024"]
        if daemon == "bfdd":
            argv += ["--bfdctl", str(self.sock_dir / "bfdd.sock")]
        return argv

    def start_daemon(self, daemon: str) -> None:
        with open(self.folder / f"{daemon}.out", "ab") as out:
            self.procs[daemon] = subprocess.Popen(self._argv(daemon), stdout=out,
                                                  stderr=subprocess.STDOUT,
                                                  start_new_session=True)

    def start(self) -> None:
        if not frr_available():
            raise FrrError(f"FRR not found in {FRR_DIR} (install Debian's frr: make setup)")
        self.write_configs()
        self.start_daemon("zebra")
        self._wait_for(self.sock_dir / "zserv.api", "zebra")
        self.start_daemon("bfdd")
        self.start_daemon("bgpd")
        self._wait_for(self.sock_dir / "bgpd.vty", "bgpd")

    def _wait_for(self, path: Path, daemon: str) -> None:
        done = threading.Event()
        for _ in range(int(READY_WAIT_S / 0.05)):
            if path.exists():
                return
            proc = self.procs[daemon]
            if proc.poll() is not None:
                raise FrrError(f"{self.netns}: {daemon} exited with {proc.returncode} "
                               f"(see {self.folder / (daemon + '.out')})")
            done.wait(0.05)
        raise FrrError(f"{self.netns}: {daemon} did not create {path}")

    def stop_daemon(self, daemon: str, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(daemon, None)
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, sig)
        try:
            proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self) -> None:
        for daemon in reversed(DAEMONS):
            self.stop_daemon(daemon)
        if self._private and self.folder.exists():
            for path in self.folder.iterdir():
                if path.is_file() and path.suffix in (".conf", ".log", ".out"):
                    shutil.copy(path, self.record / path.name)
            shutil.rmtree(self.folder, ignore_errors=True)

    def vtysh(self, *commands: str) -> str:
        argv = ["ip", "netns", "exec", self.netns, "vtysh", "--vty_socket", str(self.sock_dir)]
        for c in commands:
            argv += ["-c", c]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise FrrError(f"{self.netns}: vtysh {commands}: {proc.stderr.strip() or proc.stdout}")
        return proc.stdout

    def vtysh_json(self, command: str) -> Any:
        return json.loads(self.vtysh(command) or "{}")

    def log_path(self, daemon: str) -> Path:
        """Where ``daemon`` logs while it runs (copied into the run's folder at stop)."""
        return self.folder / f"{daemon}.log"

    def vtysh_hint(self) -> str:
        """The command a user types to reach this instance's vtysh."""
        return f"ip netns exec {self.netns} vtysh --vty_socket {self.sock_dir}"

    def established_peers(self) -> set[str]:
        summary = self.vtysh_json("show bgp ipv4 unicast summary json")
        peers = summary.get("peers", {})
        return {ip for ip, p in peers.items() if p.get("state") == "Established"}

    def bfd_peers_up(self) -> set[str]:
        peers = self.vtysh_json("show bfd peers json")
        return {p["peer"] for p in peers if p.get("status") == "up"}

    def bgp_routes(self) -> dict[str, int]:
        """Prefix -> number of multipath next hops bgpd selected for it."""
        table = self.vtysh_json("show bgp ipv4 unicast json").get("routes", {})
        out = {}
        for prefix, paths in table.items():
            chosen = [p for p in paths if p.get("bestpath") or p.get("multipath")]
            if chosen:
                out[prefix] = len(chosen)
        return out
