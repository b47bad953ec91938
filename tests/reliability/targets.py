"""The two targets of the reliability tier: p4sim always, real BMv2 when the p4lang toolchain
sits beside the repository (<repo>/../shared/toolchains, or $CELLFABRIC_TOOLCHAINS), activated
for the child processes only (this process's environment is left alone)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from netlab.hosts import NetLab, existing_links, existing_namespaces, free_port, tcp_accepts
from netlab.targets import _p4sim

ROOT = Path(__file__).resolve().parents[2]
CP_TEST = ROOT / "tests" / "unit" / "cp_fixtures" / "cp_test.p4"
CPU_PORT = 510


def toolchain_dir() -> Path | None:
    env = os.environ.get("CELLFABRIC_TOOLCHAINS")
    where = Path(env) if env else ROOT.parent / "shared" / "toolchains"
    return where if (where / "activate.sh").is_file() else None


def toolchain_env() -> dict[str, str] | None:
    """The environment with the toolchain activated, or None (with the reason printed)."""
    where = toolchain_dir()
    if where is None:
        return None
    proc = subprocess.run(["bash", "-c", f'eval "$("{where}/activate.sh")" && env -0'],
                          capture_output=True, timeout=600)
    if proc.returncode != 0:
        return None
    env = dict(line.split("=", 1) for line in proc.stdout.decode().split("\0") if "=" in line)
    home = env.get("P4LANG_HOME")
    if home and "P4C_16_INCLUDE_PATH" not in env:
        # This build of p4c-bm2-ss does not find its own p4include beside the binary.
        env["P4C_16_INCLUDE_PATH"] = f"{home}/share/p4c/p4include"
    return env


def compile_program(target: str, outdir: Path, env: dict[str, str] | None,
                    src: Path = CP_TEST, includes: tuple[Path, ...] = ()) -> tuple[Path, Path]:
    """(p4info, json) of ``src`` compiled by the target's own compiler."""
    outdir.mkdir(parents=True, exist_ok=True)
    json_path, p4info = outdir / f"{src.stem}.json", outdir / f"{src.stem}.p4info.txtpb"
    tool = [*_p4sim(), "compile"] if target == "embedded" else \
        ["p4c-bm2-ss", "--arch", "v1model", "--std", "p4-16"]
    argv = [*tool, str(src), "-o", str(json_path), "--p4runtime-files", str(p4info)]
    for inc in includes:
        argv += ["-I", str(inc)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{target} compile of {src.name} failed: {proc.stderr.strip()}")
    return p4info, json_path


class SwitchProcess:
    """One switch process with no data-plane ports, serving P4Runtime on a free port."""

    def __init__(self, target: str, env: dict[str, str] | None, log: Path,
                 device_id: int = 1, port: int | None = None,
                 interfaces: dict[int, str] | None = None,
                 target_args: list[str] | None = None) -> None:
        self.target, self.env, self.log, self.device_id = target, env, log, device_id
        self.port = port or free_port()
        self.interfaces = interfaces or {}
        self.target_args = target_args or []  # after "--": e.g. the TLS rows' options
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        exe = [*_p4sim(), "switch"] if self.target == "embedded" else \
            ["simple_switch_grpc", "--log-level", "off"]
        argv = [*exe, "--device-id", str(self.device_id), "--thrift-port", str(free_port())]
        for num, name in sorted(self.interfaces.items()):
            argv += ["-i", f"{num}@{name}"]
        return [*argv, "--no-p4", "--", "--grpc-server-addr", self.addr,
                "--cpu-port", str(CPU_PORT), *self.target_args]

    def start(self, timeout: float = 30.0) -> SwitchProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv(), stdout=out, stderr=subprocess.STDOUT,
                                         env=self.env)
        deadline = time.monotonic() + timeout
        while not tcp_accepts(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.target} switch exited with {self.proc.returncode} "
                                   f"(log {self.log})")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.target} switch did not listen on {self.addr}")
            time.sleep(0.05)
        return self

    def kill(self) -> None:
        """SIGKILL: no chance to clean up, as a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> SwitchProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def assert_nothing_left(lab: NetLab, pid: int) -> None:
    """The lab's namespaces and veths are gone, and so is the switch process."""
    assert not {n for n in existing_links() if lab.suffix in n}
    assert not set(lab.namespaces) & existing_namespaces()
    assert not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
