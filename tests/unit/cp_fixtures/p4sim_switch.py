"""Start and stop real `p4sim switch` processes for control-plane tests (no data-plane ports:
control-only tests need none) and compile the test program once."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from netlab.hosts import free_port, port_free, tcp_accepts
from netlab.targets import compile_p4, switch_argv

HERE = Path(__file__).parent
TEST_PROGRAM = HERE / "cp_test.p4"
CPU_PORT = 510


port_open = tcp_accepts  # the name this fixture's callers use


class P4simSwitch:
    """One `p4sim switch --no-p4` process serving P4Runtime on 127.0.0.1:PORT."""

    def __init__(self, device_id: int = 0, port: int | None = None, log: Path | None = None,
                 admin_port: int | None = None, target_args: list[str] | None = None):
        self.device_id = device_id
        self.target_args = target_args or []  # after "--", e.g. the --grpc-server-ssl options
        self.port = port or free_port()
        # The admin channel defaults to 9090: never share it with other tests' switches.
        self.admin_port = admin_port or free_port()
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def admin_addr(self) -> str:
        return f"127.0.0.1:{self.admin_port}"

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> P4simSwitch:
        argv = switch_argv("embedded", {}, self.addr, device_id=self.device_id,
                           cpu_port=CPU_PORT, thrift_port=self.admin_port) + self.target_args
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"p4sim switch exited with {self.proc.returncode}: "
                                   f"{' '.join(argv)}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"p4sim switch did not open {self.addr} in {timeout}s")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> P4simSwitch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port_block(count: int, tries: int = 50) -> int:
    """A base B with B+1..B+count all free on 127.0.0.1 (as the topology runner numbers
    switch ports by device id)."""
    import random

    for _ in range(tries):
        base = random.randrange(20000, 60000)
        if all(port_free(base + i) for i in range(1, count + 1)):
            return base
    raise RuntimeError(f"no block of {count} free ports found")


def compile_test_program(outdir: Path) -> tuple[Path, Path]:
    """(json, p4info) of cp_test.p4, compiled with the embedded toolchain."""
    return compile_p4(TEST_PROGRAM, outdir, "embedded")
