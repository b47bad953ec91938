"""A ``random.Random`` whose Mersenne Twister lives in C memory the generated programs draw from.

v1model's ``random`` extern used to call back into Python for every draw of the native path
(``rng.randint``), which the fabric's spraying does for every cell. ``SharedRandom`` gives the
same sequences as ``random.Random`` for the same seed (and takes and gives its states), but its
state is a C buffer (prelude.h ``mt_t``): the native path draws from it in C with no callback,
the Python path through this class, and both advance one stream, so a packet that leaves the
native path half way (a clone, a multicast) draws what the Python path alone would have drawn.

Seeding stays CPython's: a plain ``random.Random`` computes the state, which is copied in. The
draws themselves (``getrandbits``, ``random``, and ``randint`` as a shortcut) are prelude.h's
functions, compiled once into a small library of their own.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from p4sim.switch.native import build
from p4sim.switch.native.cgen import PRELUDE

N = 624  # words of state; the position of the next word follows them (CPython's getstate)
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

CDEF = """
uint64_t crng_bits64(uint32_t *s, int k);
void crng_fill(uint32_t *s, uint8_t *out, int64_t k);
double crng_random(uint32_t *s);
int64_t crng_randint(uint32_t *s, int64_t lo, int64_t hi);
"""

# The exported wrappers of prelude.h's static functions (the state is mt_t: 624 + 1 words).
SOURCE = PRELUDE + r"""
uint64_t crng_bits64(uint32_t *s, int k) { return (uint64_t)mt_bits((mt_t *)s, k); }
/* getrandbits(k) for any k as (k + 31) / 32 little-endian words of bytes */
void crng_fill(uint32_t *s, uint8_t *out, int64_t k) {
    for (; k > 0; k -= 32, out += 4) {
        uint32_t w = mt_next((mt_t *)s);
        if (k < 32) w >>= 32 - k;
        out[0] = (uint8_t)w; out[1] = (uint8_t)(w >> 8);
        out[2] = (uint8_t)(w >> 16); out[3] = (uint8_t)(w >> 24);
    }
}
/* CPython's random(): 27 + 26 bits of two words as a multiple of 2**-53 */
double crng_random(uint32_t *s) {
    uint32_t a = mt_next((mt_t *)s) >> 5, b = mt_next((mt_t *)s) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}
int64_t crng_randint(uint32_t *s, int64_t lo, int64_t hi) {
    return mt_randint((mt_t *)s, lo, hi);
}
"""

_ffi: Any = None
_lib: Any = None
_why_not: str | None = None


def library() -> Any:
    """(ffi, lib) of the draw functions, built once (cached like the programs'), or None when
    this machine cannot build C (no compiler or cffi: then only ``random.Random`` is used)."""
    global _ffi, _lib, _why_not
    if _lib is not None or _why_not is not None:
        return (_ffi, _lib) if _lib is not None else None
    why = build.available()
    if why is not None:
        _why_not = why
        return None
    import cffi

    key = "rng-" + hashlib.sha256((" ".join(build.CFLAGS) + "\n" + SOURCE).encode()).hexdigest()[:24]
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    try:
        _lib = build.build(key, SOURCE, loader=ffi)
    except Exception as e:  # a compiler that does not take it: plain random.Random, as before
        _why_not = f"the rng library did not build ({e})"
        return None
    _ffi = ffi
    return _ffi, _lib


def new(seed: Any = None) -> random.Random:
    """A ``SharedRandom`` seeded with ``seed`` when C can be built here, else a plain
    ``random.Random``: the same sequence either way."""
    if library() is None:
        return random.Random(seed)
    return SharedRandom(seed)


class SharedRandom(random.Random):
    """``random.Random``, draw for draw, with its state in C memory (``address``)."""

    def __init__(self, x: Any = None) -> None:
        lib = library()
        if lib is None:
            raise RuntimeError(f"SharedRandom needs the native build ({_why_not})")
        self._ffi, self._lib = lib
        self._state = self._ffi.new("uint32_t[]", N + 1)  # never replaced: C keeps its address
        super().__init__(x)  # calls self.seed(x)

    @property
    def address(self) -> int:
        """Where the state (prelude.h mt_t) is; valid as long as this object lives."""
        return int(self._ffi.cast("uintptr_t", self._state))

    def _load(self, internal: tuple) -> None:
        self._state[0:N + 1] = list(internal)

    def seed(self, a: Any = None, version: int = 2) -> None:
        # CPython computes the state (init_by_array, the str/bytes hashing): copied in.
        ref = random.Random()
        ref.seed(a, version)
        self._load(ref.getstate()[1])
        self.gauss_next = None

    def getstate(self) -> tuple:
        return (self.VERSION, tuple(self._ffi.unpack(self._state, N + 1)), self.gauss_next)

    def setstate(self, state: tuple) -> None:
        # random.Random checks the state (and converts a version 2 one); then copied in.
        ref = random.Random()
        ref.setstate(state)
        self._load(ref.getstate()[1])
        self.gauss_next = ref.gauss_next

    def getrandbits(self, k: int) -> int:
        if k <= 64:
            if k < 0:
                raise ValueError("number of bits must be non-negative")
            return self._lib.crng_bits64(self._state, k)
        n = (k + 31) // 32 * 4
        buf = self._ffi.new("uint8_t[]", n)
        self._lib.crng_fill(self._state, buf, k)
        return int.from_bytes(self._ffi.buffer(buf, n), "little")

    def random(self) -> float:
        return self._lib.crng_random(self._state)

    def randint(self, a: int, b: int) -> int:
        # The common case in C in one call (the same draws as randrange's _randbelow); the
        # rest (non-int arguments, empty or wider ranges, their errors) as Random does it.
        if type(a) is int and type(b) is int and I64_MIN <= a <= b <= I64_MAX:
            return self._lib.crng_randint(self._state, a, b)
        return super().randint(a, b)

    def randbytes(self, n: int) -> bytes:
        # Python 3.11's definition (3.12 moved it to C, where it would read the unused state)
        return self.getrandbits(n * 8).to_bytes(n, "little")
