"""The two interchangeable targets: the embedded p4sim toolchain and real BMv2/p4c.

Compiling is a toolchain call that yields files, and a switch is a command line: nothing here
imports p4sim, so the same code drives real p4c-bm2-ss and simple_switch_grpc.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
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


# The embedded compiler's output is a function of its inputs alone: the program's directory
# tree, the compiler's own sources and built-in includes, the interpreter. A cached compile
# skips a second interpreter, its imports and the compile (0.85 CPU s of a `cellfabric sim`).
COMPILE_CACHE_ENV = "CELLFABRIC_COMPILE_CACHE"  # a directory, or "off"
_COMPILER_PARTS = ("frontend", "backend", "p4include", "compile.py", "cli.py", "__init__.py")
_TREE_LIMIT = 400  # files: a program directory larger than this is compiled every time
MAX_COMPILES = 128  # cached compiles kept (the least recently used beyond go)


def compile_cache_dir() -> Path | None:
    env = os.environ.get(COMPILE_CACHE_ENV)
    if env == "off":
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cellfabric" / "p4-compile"


def _tree_files(root: Path) -> list[Path] | None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return files if len(files) <= _TREE_LIMIT else None


def _prune_compiles(cache: Path) -> None:
    """Keep the MAX_COMPILES most recently used entries (a hit touches its entry). (p4sim's
    native libraries are kept the same way, by p4sim.cache; this module imports no p4sim.)"""
    entries = []
    for entry in cache.iterdir():
        if not entry.name.startswith("."):  # ".new-": being stored
            with contextlib.suppress(OSError):
                entries.append((entry.stat().st_mtime, entry))
    for _, entry in sorted(entries, reverse=True)[MAX_COMPILES:]:
        shutil.rmtree(entry, ignore_errors=True)


def compile_key(src: Path) -> str | None:
    """A digest of everything the embedded compile of ``src`` reads (None: not cacheable).
    ``src`` may include only files under its own directory (as fabric.p4 does)."""
    import hashlib
    from importlib.util import find_spec

    spec = find_spec("p4sim")
    if spec is None or not spec.submodule_search_locations:
        return None
    compiler = Path(next(iter(spec.submodule_search_locations)))
    # the path as the compiler is given it: the JSON's source_info names the files by it
    where = str(src) if src.is_absolute() else f"{os.getcwd()}\0{src}"
    digest = hashlib.sha256(f"{sys.version}\0{_p4sim()}\0{where}\0".encode())
    for root in (src.resolve().parent, *(compiler / part for part in _COMPILER_PARTS)):
        files = [root] if root.is_file() else _tree_files(root)
        if files is None:
            return None
        for path in files:
            digest.update(f"{path.relative_to(root.parent)}\0{path.stat().st_size}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def compile_p4_cached(src: str | Path, outdir: str | Path,
                      target: str | None = None) -> tuple[Path, Path]:
    """``compile_p4`` that, for the embedded compiler, reuses an identical earlier compile's
    files (``compile_key``); other targets, or no cache, compile. Failures are never cached."""
    target = resolve_target(target)
    src, outdir = Path(src), Path(outdir)
    cache = compile_cache_dir() if target == "embedded" else None
    key = compile_key(src) if cache is not None else None
    if cache is None or key is None:
        return compile_p4(src, outdir, target)
    names = (f"{src.stem}.json", f"{src.stem}.p4info.txtpb")
    entry = cache / key
    outdir.mkdir(parents=True, exist_ok=True)
    if all((entry / n).is_file() for n in names):
        with contextlib.suppress(OSError):
            os.utime(entry)  # its last use: pruning keeps the recently used
        for n in names:
            shutil.copyfile(entry / n, outdir / n)
        return outdir / names[0], outdir / names[1]
    json_path, p4info_path = compile_p4(src, outdir, target)
    tmp: Path | None = None
    try:  # stored whole or not at all: concurrent runs never see half an entry
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".new-"))
        for n in names:
            shutil.copyfile(outdir / n, tmp / n)
        os.replace(tmp, entry)
        _prune_compiles(cache)
    except OSError:  # another run stored it first, or the cache is not writable
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return json_path, p4info_path
