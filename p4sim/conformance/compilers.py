"""The two compilers a conformance target can use: p4sim's own (in this process) or real p4c."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from p4.config.v1 import p4info_pb2

from p4sim.conformance.p4rt import load_p4info


class CompileFailed(RuntimeError):
    """The compiler rejected the program; the message is its first diagnostic line."""


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower():
            return ln
    return lines[0] if lines else "compiler failed without a message"


def compile_p4sim(src: Path, outdir: Path) -> tuple[bytes, p4info_pb2.P4Info]:
    from p4sim.compile import Options, compile_program
    from p4sim.frontend.errors import CompileError

    try:
        doc, info, _ = compile_program(Options(source=str(src)))
    except CompileError as e:
        raise CompileFailed(_first_error(e.render(getattr(e, "sources", {}), str(src)))) from None
    except RecursionError:
        raise CompileFailed("internal: program nested too deeply") from None
    except Exception as e:  # the compiler's own crash is a result too, not a runner failure
        raise CompileFailed(f"internal: {type(e).__name__}: {e}") from None
    data = json.dumps(doc).encode()
    (outdir / "p4sim.json").write_bytes(data)
    return data, info  # type: ignore[return-value]


def p4c_env() -> dict[str, str]:
    """The environment for p4c-bm2-ss; a relocated build (e.g. ../shared/toolchains) does not
    find its p4include by itself, so point it there when P4LANG_HOME says where that is."""
    env = dict(os.environ)
    home = env.get("P4LANG_HOME")
    inc = Path(home, "share", "p4c", "p4include") if home else None
    if inc is not None and inc.is_dir() and "P4C_16_INCLUDE_PATH" not in env:
        env["P4C_16_INCLUDE_PATH"] = str(inc)
    return env


def compile_p4c(src: Path, outdir: Path) -> tuple[bytes, p4info_pb2.P4Info]:
    exe = shutil.which("p4c-bm2-ss")
    if exe is None:
        raise RuntimeError("p4c-bm2-ss is not on PATH")
    out, info_path = outdir / "p4c.json", outdir / "p4c.p4info.txtpb"
    argv = [exe, "--arch", "v1model", "--std", "p4-16", str(src), "-o", str(out),
            "--p4runtime-files", str(info_path)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=p4c_env(), timeout=120)
    if proc.returncode != 0:
        raise CompileFailed(_first_error(proc.stderr or proc.stdout))
    return out.read_bytes(), load_p4info(str(info_path))


COMPILERS = {"p4sim": compile_p4sim, "p4c": compile_p4c}
