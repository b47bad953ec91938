"""Frame fuzzer: fabric.p4 on a `p4sim switch` process over veths, valid cells interleaved with
garbage, every truncation of a cell, jumbo frames and bad IPv4 checksums.

Checked: every valid cell comes out byte-exact and in order (the same bytes as when it was
sent alone), nothing malformed comes out that the program would not forward, every frame is
accounted for (forwarded or counted by the program's drop counter: none lost silently), the
switch survives, and its memory grows by less than 10% over the fuzz run.
"""

from __future__ import annotations

import os
import random
import struct
import time
from pathlib import Path

import pytest
from fuzzlib import (
    BADSUM_PSN,
    JUMBO_PSN,
    NEXT_HOP_MAC,
    ROUTER_MAC,
    TRUNC_PSN,
    Collector,
    bad_checksums,
    cell,
    garbage,
    jumbos,
    leaf_entities,
    ns_socket,
    paced,
    psn_of,
    rss_kib,
    truncations,
)
from targets import SwitchProcess, assert_nothing_left

from controlplane.connection import SwitchConnection
from controlplane.entities import CounterEntry
from netlab.hosts import NetLab
from netlab.targets import compile_p4

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="veths and namespaces need root")
ROOT = Path(__file__).resolve().parents[2]

ROUNDS = 5  # the valid cells are sent this many times during the fuzz run
VALID = 200
PPS = 1500
DROP_BAD_PACKET = 4  # p4src/include/defines.p4


def counters(conn: SwitchConnection) -> tuple[int, dict[int, int]]:
    """(frames received on port 0, drop_counter packets by reason)."""
    (rx,) = conn.read(CounterEntry("MyIngress.port_rx", 0))
    drops = {e.index: e.packets for e in conn.read(CounterEntry("drop_counter"))}
    return rx.packets, drops


def check_forwarded(sent: bytes, out: bytes) -> None:
    """A cell as the leaf must forward it: new MACs, TTL - 1, checksum redone, rest intact."""
    assert out[:6] == bytes.fromhex(NEXT_HOP_MAC.replace(":", "")) and out[6:12] == ROUTER_MAC
    assert out[22] == sent[22] - 1
    header = bytearray(out[14:34])
    assert sum(struct.unpack("!10H", bytes(header))) % 0xFFFF == 0  # checksum verifies
    header[8], header[10:12] = sent[22], sent[24:26]
    assert bytes(header) == sent[14:34] and out[34:] == sent[34:]


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    json_path, p4info = compile_p4(ROOT / "p4src" / "fabric.p4",
                                   tmp_path_factory.mktemp("fuzz-build"), "embedded")
    return p4info, json_path


def test_fuzzed_frames_never_disturb_valid_cells(program, tmp_path: Path) -> None:
    rng = random.Random(12)
    valid = [cell(i) for i in range(VALID)]
    malformed = garbage(rng, 500) + truncations() + jumbos(20) + bad_checksums(200)
    with NetLab(prefix="fz") as lab:
        ns = lab.netns("h")
        (s0, h0), (s1, h1) = (lab.veth(f"s{i}", f"h{i}", None, ns, mtu=9500) for i in (0, 1))
        sw = SwitchProcess("embedded", None, tmp_path / "switch.log", interfaces={0: s0, 1: s1})
        with sw, SwitchConnection(sw.addr, 1, timeout=20) as conn:
            conn.set_pipeline(*program)
            conn.insert(*leaf_entities(out_port=1))
            assert sw.proc is not None
            switch_pid = sw.proc.pid
            tx, rx = ns_socket(ns, h0), Collector(ns_socket(ns, h1))
            try:
                # Alone, then once through every malformed kind (to warm the switch up).
                paced(tx, valid, PPS)
                rx.wait_quiet()
                baseline = list(rx.frames)
                assert len(baseline) == VALID
                for sent, out in zip(valid, baseline):
                    check_forwarded(sent, out)
                paced(tx, rng.sample(malformed, 400), PPS)
                rx.wait_quiet()
                assert sw.proc is not None
                rss_before, (rx_before, drops_before) = rss_kib(sw.proc.pid), counters(conn)
                rx.frames.clear()

                shuffled = iter(rng.sample(malformed, len(malformed)))
                cells = iter(valid * ROUNDS)
                total = len(malformed) + VALID * ROUNDS
                slots = set(rng.sample(range(total), VALID * ROUNDS))
                schedule = [next(cells) if i in slots else next(shuffled) for i in range(total)]
                t0 = time.monotonic()
                paced(tx, schedule, PPS)
                rx.wait_quiet()
                fuzz_seconds = time.monotonic() - t0
                rss_after, (rx_after, drops_after) = rss_kib(sw.proc.pid), counters(conn)
            finally:
                rx.stop()
                tx.close()
            assert sw.proc.poll() is None, "the switch died"
    assert_nothing_left(lab, switch_pid)
    out = rx.frames
    psns = [psn_of(f) for f in out]
    valid_out = [f for f, p in zip(out, psns) if p is not None and p < VALID]
    assert valid_out == baseline * ROUNDS  # byte-exact, in order, none lost or duplicated
    others = [p for p in psns if p is None or p >= VALID]
    assert all(p is not None and (JUMBO_PSN <= p < JUMBO_PSN + 20 or p == TRUNC_PSN)
               for p in others), f"unexpected frames out: {sorted(set(others))[:5]}"
    assert BADSUM_PSN not in {p & 0xFF0000 for p in psns if p is not None}
    # Conservation: every frame reached the pipeline and was forwarded or counted as dropped.
    received = rx_after - rx_before
    dropped = sum(drops_after.values()) - sum(drops_before.values())
    assert received == len(schedule)
    assert dropped + len(out) == received, (dropped, len(out), received)
    bad = drops_after.get(DROP_BAD_PACKET, 0) - drops_before.get(DROP_BAD_PACKET, 0)
    cut_in_headers = sum(1 for f in truncations() if len(f) < 54)
    assert bad >= 200 + cut_in_headers  # bad checksums and headers cut short
    growth = (rss_after - rss_before) / rss_before
    print(f"fuzz: {len(schedule)} frames ({len(schedule) - VALID * ROUNDS} malformed) in "
          f"{fuzz_seconds:.1f}s; out {len(out)} ({len(valid_out)} valid); dropped {dropped} "
          f"(bad packet {bad}); switch RSS {rss_before} -> {rss_after} KiB ({growth:+.1%})")
    assert growth < 0.10
