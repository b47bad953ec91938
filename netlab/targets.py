"""The two interchangeable targets: the embedded p4sim toolchain and real BMv2/p4c.

Compiling is a toolchain call that yields files, and a switch is a command line: nothing here
imports p4sim, so the same code drives real p4c-bm2-ss and simple_switch_grpc.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

TARGETS = ("embedded", "bmv2")


class ToolchainError(RuntimeError):
    """Compilation failed; the message is the compiler's own diagnostics."""


def bmv2_available() -> bool:
    return bool(shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss"))


def default_target() -> str:
    return "bmv2" if bmv2_available() else "embedded"


def resolve_target(target: str | None) -> str:
    target = target or default_target()
    if target not in TARGETS:
        raise ValueError(f"unknown target '{target}' (expected one of {', '.join(TARGETS)})")
    if target == "bmv2" and not bmv2_available():
        raise ToolchainError(
            "target bmv2 needs simple_switch_grpc and p4c-bm2-ss on PATH; use --target embedded"
        )
    return target


def p4c_env() -> dict[str, str]:
    """The environment for p4c-bm2-ss. A relocated p4c build (the prebuilt toolchain that
    ../shared/toolchains/activate.sh unpacks into $P4LANG_HOME) does not find its own p4include
    (it looks under its configure-time prefix), so point P4C_16_INCLUDE_PATH there."""
    env = dict(os.environ)
    home = env.get("P4LANG_HOME")
    inc = Path(home, "share", "p4c", "p4include") if home else None
    if inc is not None and inc.is_dir():
        env.setdefault("P4C_16_INCLUDE_PATH", str(inc))
    return env


def _p4sim() -> list[str]:
    exe = shutil.which("p4sim")
    # Prefer the console script next to this interpreter (the project venv), so a test run
    # from .venv/bin/pytest does not pick up another installation.
    local = Path(sys.executable).with_name("p4sim")
    if local.exists():
        return [str(local)]
    return [exe] if exe else [sys.executable, "-m", "p4sim.cli"]


def compile_p4(
    src: str | Path,
    outdir: str | Path,
    target: str | None = None,
    includes: Sequence[str | Path] = (),
    defines: Sequence[str] = (),
) -> tuple[Path, Path]:
    """Compile ``src`` into ``outdir/NAME.json`` and ``outdir/NAME.p4info.txtpb``."""
    target = resolve_target(target)
    src = Path(src)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    json_path = outdir / f"{src.stem}.json"
    p4info_path = outdir / f"{src.stem}.p4info.txtpb"
    tool = [*_p4sim(), "compile"] if target == "embedded" else ["p4c-bm2-ss"]
    argv = [*tool, str(src), "-o", str(json_path), "--p4runtime-files", str(p4info_path)]
    if target == "bmv2":
        argv += ["--arch", "v1model", "--std", "p4-16"]
    for inc in includes:
        argv += ["-I", str(inc)]
    for d in defines:
        argv += ["-D", d]
    proc = subprocess.run(argv, capture_output=True, text=True,
                          env=p4c_env() if target == "bmv2" else None)
    if proc.returncode != 0:
        raise ToolchainError((proc.stderr or proc.stdout).strip())
    return json_path, p4info_path


def switch_argv(
    target: str | None,
    ports: Mapping[int, str],
    grpc_addr: str,
    device_id: int = 0,
    cpu_port: int | None = None,
    json: str | Path | None = None,
    extra: Sequence[str] = (),
    thrift_port: int | None = None,
    priority_queues: int = 0,
) -> list[str]:
    """The command line that starts one switch; the same flags for both targets."""
    target = resolve_target(target)
    argv = [*_p4sim(), "switch"] if target == "embedded" else ["simple_switch_grpc"]
    argv += ["--device-id", str(device_id)]
    for num, ifname in sorted(ports.items()):
        argv += ["-i", f"{num}@{ifname}"]
    if thrift_port is not None:
        argv += ["--thrift-port", str(thrift_port)]
    argv += list(extra)
    argv.append(str(json) if json else "--no-p4")
    # simple_switch_grpc takes its gRPC options after "--"; p4sim accepts the same form.
    argv += ["--", "--grpc-server-addr", grpc_addr]
    if cpu_port is not None:
        argv += ["--cpu-port", str(cpu_port)]
    if priority_queues:
        # A simple_switch target option, so it too goes after "--".
        argv += ["--priority-queues", str(priority_queues)]
    return argv
