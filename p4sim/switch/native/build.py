"""Build the generated C with the system compiler, cache it, and load it through cffi.

ABI mode (``ffi.dlopen`` of a shared object gcc built): the generated library is plain C with
a handful of entry points, so it needs neither Python's headers nor cffi's own build step, and
a cached library loads in a millisecond. The cache key is a digest of the program's JSON, the
generator's version, the compiler flags and the prelude, so the same program never compiles
twice.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from p4sim import cache
from p4sim.switch.native.cgen import GENERATOR_VERSION, PRELUDE, Unsupported

CDEF = """
typedef int64_t i64;
typedef int32_t i32;
size_t nat_ctx_size(void);
int nat_nslots(void);
int nat_maxd(void);
int nat_hdr_bytes(void);
void nat_init(void *C, i64 (*randint)(i64, i64), void *mt);
void nat_set_table(void *C, int t, i32 n, i64 *m, i32 *act, i64 *data, i32 *goff, i32 *gcnt,
                   i32 *gact, i64 *gdata, i64 *pk, i64 *by, i32 def_act, i64 *def_data,
                   i32 *hidx, i32 hsize, i64 *runs, i32 nk);
void nat_set_register(void *C, int r, i64 *v);
void nat_set_counter(void *C, int c, uint64_t *pk, uint64_t *by);
int nat_take_counted(void *C);
int nat_ingress(void *C, i64 *F, const uint8_t *data, i32 len, i32 port, i64 igts, i64 *out);
int nat_run(void *C, i64 *F, const uint8_t *data, i32 len, i32 port, i64 igts, i64 nowus,
            const uint8_t *direct, uint8_t *outbuf, i64 *out);
int nat_egress(void *C, i64 *F, const uint8_t *data, i32 len, i32 pos, i32 port, i64 ts,
               i64 left, i64 prio, uint8_t *outbuf, i64 *out);
"""

# Portable code only (the cache may be shared between machines: no -march=native). Without
# semantic interposition the library's exported functions may be inlined into their callers
# inside it (the fabric's hop_step calls hop_arrive and hop_service). Part of every cache key.
CFLAGS = ("-O2", "-fno-semantic-interposition")

_ffi: Any = None
_loaded: dict[str, Any] = {}


def ffi() -> Any:
    global _ffi
    if _ffi is None:
        import cffi

        _ffi = cffi.FFI()
        _ffi.cdef(CDEF)
    return _ffi


def compiler() -> str | None:
    """The C compiler to use ($CC, else cc or gcc on PATH), or None."""
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc)
    return shutil.which("cc") or shutil.which("gcc")


def available() -> str | None:
    """None when the native path can be built here, else why not (one phrase)."""
    try:
        import cffi  # noqa: F401
    except ImportError:
        return "cffi is not installed"
    if compiler() is None:
        return "no C compiler on PATH"
    return None


# Libraries kept (the least recently used beyond go): p4c's STF corpus alone is ~190
# programs, and a fabric's program changes with every edit; a library is ~20 KB.
MAX_CACHED = 512


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "p4sim" / "native"


def cache_key(json_bytes: bytes) -> str:
    h = hashlib.sha256()
    for part in (GENERATOR_VERSION.encode(), " ".join(CFLAGS).encode(), PRELUDE.encode(),
                 json_bytes):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:32]


def library_path(key: str) -> Path:
    return cache_dir() / f"p4sim-{key}.so"


def build(key: str, source: str, loader: Any = None, libs: tuple[str, ...] = ()) -> Any:
    """The loaded library for ``source`` (cached under ``key``), compiling it if needed.
    ``loader``: the cffi FFI to load it through (default: this module's, with CDEF); ``libs``:
    linker flags after the source (``-lm``)."""
    lib = _loaded.get(key)
    if lib is not None:
        return lib
    path = library_path(key)
    if path.exists():
        cache.touch(path)
    else:
        cc = compiler()
        if cc is None:
            raise Unsupported("no C compiler")
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            src = Path(tmp) / "prog.c"
            src.write_text(source)
            out = Path(tmp) / "prog.so"
            proc = subprocess.run([cc, *CFLAGS, "-shared", "-fPIC", "-w", "-o", str(out),
                                   str(src), *libs], capture_output=True, text=True)
            if proc.returncode != 0:
                first = (proc.stderr.strip().splitlines() or ["?"])[0]
                raise Unsupported(f"generated C did not compile ({first})")
            os.replace(out, path)  # atomic: concurrent builders never see half a file
        cache.prune(path.parent, "p4sim-*.so", MAX_CACHED)
    lib = (loader or ffi()).dlopen(str(path))
    _loaded[key] = lib
    return lib
