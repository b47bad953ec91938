"""The native table index (prelude.h tbl_index / tbl_find) against the linear scan it replaces.

The scan is the reference (it searches the entries in the Python lookup's order, which the
differential tests hold equal to the Python path): for random tables of overlapping LPM
prefixes, ternary entries with repeated masks, values and priorities, and range entries among
them, the index must give the same entry for every key, hits and misses alike.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from p4sim.switch.native import build
from p4sim.switch.native.cgen import PRELUDE

pytestmark = pytest.mark.skipif(build.available() is not None, reason="no C compiler or cffi")

HARNESS = r"""
/* the table as nat_set_table sets it, then every key through tbl_find and the plain scan */
int t_lookup(i32 n, i64 *m, i32 nk, i32 *hidx, i32 hsize, i64 *runs, const i64 *keys,
             i32 nkeys, i32 *got, i32 *want) {
    tbl_t t;
    memset(&t, 0, sizeof t);
    t.n = n; t.m = m; t.hidx = hidx; t.hsize = hsize; t.runs = runs;
    if (t.hsize) tbl_index(&t, nk);
    for (int i = 0; i < nkeys; i++) {
        got[i] = tbl_find(&t, keys + (i64)i * nk, nk);
        want[i] = tbl_scan(&t, keys + (i64)i * nk, nk, 0, n);
    }
    return t.hsize;
}
"""

Matcher = tuple[int, int, int]  # is_range, a, b: key & a == b, or a <= key <= b


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import cffi

    tmp: Path = tmp_path_factory.mktemp("tblidx")
    src, out = tmp / "t.c", tmp / "t.so"
    src.write_text(PRELUDE + HARNESS)
    cc = build.compiler()
    assert cc is not None
    subprocess.run([cc, *build.CFLAGS, "-shared", "-fPIC", "-w", "-o", str(out), str(src)],
                   check=True)
    ffi = cffi.FFI()
    ffi.cdef("""typedef int64_t i64; typedef int32_t i32;
        int t_lookup(i32 n, i64 *m, i32 nk, i32 *hidx, i32 hsize, i64 *runs, const i64 *keys,
                     i32 nkeys, i32 *got, i32 *want);""")
    return ffi, ffi.dlopen(str(out))


def lookup(lib: Any, entries: list[list[Matcher]], keys: list[list[int]]) -> tuple[int, list,
                                                                                   list]:
    """(index size used, 0 when declined; tbl_find's answers; the scan's answers)."""
    ffi, c = lib
    n, nk = len(entries), len(keys[0])
    m = ffi.new("i64[]", [v for e in entries for mt in e for v in mt] or [0])
    hsize = 1 << (2 * n).bit_length()
    hidx = ffi.new("i32[]", hsize)
    runs = ffi.new("i64[]", (2 + nk) * n + 1)
    flat = ffi.new("i64[]", [v for k in keys for v in k])
    got, want = ffi.new("i32[]", len(keys)), ffi.new("i32[]", len(keys))
    used = c.t_lookup(n, m, nk, hidx, hsize, runs, flat, len(keys), got, want)
    return used, list(got), list(want)


def prefix(width: int, plen: int) -> int:
    return ((1 << plen) - 1) << (width - plen)


def near(rng: random.Random, values: list[int], width: int) -> int:
    """A key that often falls under an entry (a value with low bits flipped), else random."""
    if values and rng.random() < 0.8:
        return rng.choice(values) ^ rng.getrandbits(rng.randrange(0, width // 2))
    return rng.getrandbits(width)


@pytest.mark.parametrize("seed", range(8))
def test_lpm_index_equals_scan(lib: Any, seed: int) -> None:
    """Overlapping prefixes of a few lengths, longest first, with an exact field beside."""
    rng = random.Random(seed)
    width, lens = 32, sorted(rng.sample(range(12, 33), 4), reverse=True)
    entries, seen = [], set()
    for plen in lens:
        base = rng.getrandbits(width)  # many prefixes of one region: they overlap
        for _ in range(rng.randrange(10, 40)):
            v = (base ^ rng.getrandbits(rng.randrange(1, 20))) & prefix(width, plen)
            port = rng.randrange(3)
            if (plen, v, port) in seen:  # the Python table keeps keys distinct
                continue
            seen.add((plen, v, port))
            entries.append([(0, 0xFF, port), (0, prefix(width, plen), v)])
    values = [e[1][2] for e in entries]
    keys = [[rng.randrange(4), near(rng, values, width)] for _ in range(3000)]
    used, got, want = lookup(lib, entries, keys)
    assert used, "the index should be used for a few prefix lengths"
    assert got == want
    assert sum(w >= 0 for w in want) > 300  # hits at several lengths, not only misses


@pytest.mark.parametrize("seed", range(8))
def test_ternary_index_equals_scan(lib: Any, seed: int) -> None:
    """Priority order with runs of equal masks, the same (mask, value) more than once (only
    the first may answer), and ranges between them (scanned runs)."""
    rng = random.Random(100 + seed)
    masks = [0xFFFF, 0xFF00, 0x00F0, 0]
    entries: list[list[Matcher]] = []
    while len(entries) < 300:
        mask = [rng.choice(masks), rng.choice(masks)]
        run: list[list[Matcher]] = []
        for _ in range(rng.randrange(10, 40)):  # a run of one mask pair
            if run and rng.random() < 0.15:  # the same entry again, later in the run
                run.append(list(rng.choice(run)))
                continue
            v = (0x1000 | rng.getrandbits(16) & 0x0F0F) & mask[0]
            run.append([(0, mask[0], v), (0, mask[1], rng.getrandbits(4) << 4 & mask[1])])
        entries += run
        if rng.random() < 0.3:  # ranges between runs: a scanned run
            lo = rng.getrandbits(16)
            entries.append([(1, lo, lo + rng.randrange(0, 3000)), (0, 0, 0)])
        if entries and rng.random() < 0.2:  # an earlier run's entry: shadowed, or not
            entries.append(list(rng.choice(entries)))
    vals = [e[0][2] for e in entries if not e[0][0]]
    keys = [[near(rng, vals, 16), rng.getrandbits(8)] for _ in range(3000)]
    used, got, want = lookup(lib, entries, keys)
    assert used
    assert got == want
    assert sum(w >= 0 for w in want) > 300


def test_index_declined_when_runs_are_many(lib: Any) -> None:
    """Every entry a mask of its own: the scan stays (and answers as before)."""
    rng = random.Random(7)
    entries = [[(0, (1 << i) | 1, rng.getrandbits(1) << i)] for i in range(1, 40)]
    keys = [[rng.getrandbits(48)] for _ in range(500)]
    used, got, want = lookup(lib, entries, keys)
    assert used == 0
    assert got == want


def test_empty_and_exact(lib: Any) -> None:
    rng = random.Random(3)
    entries = [[(0, 0xFFFFFFFF, v)] for v in rng.sample(range(1 << 20), 300)]
    keys = [[e[0][2]] for e in entries] + [[rng.getrandbits(21)] for _ in range(300)]
    used, got, want = lookup(lib, entries, keys)
    assert used and got == want
    assert got[:300] == list(range(300))
