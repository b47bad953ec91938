"""The native data plane against the Python path (the reference), byte for byte."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from native_harness import Pair, fabric_frames, mutate, random_fabric_state

from p4sim.switch.api import CloneSession, Replica
from p4sim.switch.native import build

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(build.available() is not None,
                                reason=f"native data plane unavailable: {build.available()}")


@pytest.fixture(scope="module")
def fabric_json() -> bytes:
    import json

    from p4sim.compile import compile_program, parse_args

    opts = parse_args([str(ROOT / "p4src" / "fabric.p4"), "-o", "unused.json",
                       "-I", str(ROOT / "p4src")])
    doc, _info, _builder = compile_program(opts, warnings=[])
    return json.dumps(doc).encode()


def test_fabric_runs_native(fabric_json: bytes) -> None:
    pair = Pair(fabric_json)
    assert pair.native.dataplane == "native"
    assert pair.dps["python"].dataplane == "python"


@pytest.mark.parametrize("seed", range(6))
def test_fabric_differential(fabric_json: bytes, seed: int) -> None:
    rng = random.Random(seed)
    pair = Pair(fabric_json, seed=seed, cpu_port=64)
    random_fabric_state(pair, rng)
    pair.both("mcast_group_set", 1, [Replica(1, 1), Replica(2, 2)])
    for session in range(4):
        pair.both("clone_session_set", CloneSession(session, [Replica(3, 0)]))
    if rng.random() < 0.5:
        pair.both("set_queue_rate", 2000, 1)  # port 1 queues: enq/deq depths and delays
    frames = fabric_frames(rng)
    for i in range(500):
        frame = rng.choice(frames)
        if rng.random() < 0.2:
            frame = mutate(frame, rng)
        pair.receive(rng.randrange(0, 4), frame)
        pair.advance(rng.choice([0, 100, 10_000, 1_000_000]))
        if i % 100 == 50:
            pair.both("set_port_up", rng.randrange(0, 4), rng.random() < 0.5)
            pair.check()
    pair.advance(10**10)
    pair.check()
    assert len(pair.out["native"]) > 40  # the state let traffic through


def test_entry_change_reaches_native_copy(fabric_json: bytes) -> None:
    """A table changed between two packets: the second one sees the change."""
    rng = random.Random(7)
    pair = Pair(fabric_json, seed=7)
    random_fabric_state(pair, rng)
    frames = fabric_frames(rng)
    for frame in frames:
        pair.receive(0, frame)
    for name in list(pair.native.cp.tables):  # type: ignore[union-attr]
        pair.both("table_clear", name)
    for frame in frames:
        pair.receive(0, frame)
    pair.check()


def test_library_is_cached(fabric_json: bytes, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A second load of the same program does not compile again."""
    from p4sim.switch.native import runtime

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setattr(runtime, "_programs", {})
    key = build.cache_key(fabric_json)
    Pair(fabric_json)
    lib = build.library_path(key)
    assert lib.exists() and lib.is_relative_to(tmp_path)
    inode = lib.stat().st_ino
    os.utime(lib, (1_000_000, 1_000_000))  # long unused
    monkeypatch.setattr(build, "_loaded", {})  # a new process: only the file cache is left
    monkeypatch.setattr(runtime, "_programs", {})

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(build.subprocess, "run", no_compile)
    assert Pair(fabric_json).native.dataplane == "native"
    # the same file, now marked used (pruning keeps the most recently used)
    assert lib.stat().st_ino == inode and lib.stat().st_mtime > 1_000_000


def _compile(name: str) -> bytes:
    import json

    from p4sim.compile import compile_program, parse_args

    src = ROOT / "tests" / "unit" / "p4progs" / name
    opts = parse_args([str(src), "-o", "unused.json", "-I", str(src.parent)])
    return json.dumps(compile_program(opts, warnings=[])[0]).encode()


def test_uncovered_program_runs_on_python_and_says_so_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    from p4sim.switch import native_select
    from p4sim.switch.dataplane import DataPlane

    program = _compile("meters.p4")
    native_select._said.clear()
    first, second = DataPlane(dataplane="native"), DataPlane(dataplane="native")
    first.load_pipeline(program)
    second.load_pipeline(program)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("p4sim:")]
    assert first.dataplane == second.dataplane == "python"
    assert len(lines) == 1 and "does not cover meters" in lines[0], lines


def test_python_mode_and_environment_choose_the_python_path(
        fabric_json: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    from p4sim.switch.dataplane import DataPlane

    dp = DataPlane(dataplane="python")
    dp.load_pipeline(fabric_json)
    assert dp.dataplane == "python"
    monkeypatch.setenv("P4SIM_DATAPLANE", "python")
    dp = DataPlane()
    dp.load_pipeline(fabric_json)
    assert dp.dataplane == "python"
    monkeypatch.setenv("P4SIM_DATAPLANE", "bogus")
    with pytest.raises(ValueError, match="bogus"):
        DataPlane()


def test_no_compiler_means_the_python_path(fabric_json: bytes,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from p4sim.switch.dataplane import DataPlane

    monkeypatch.setattr(build, "compiler", lambda: None)
    dp = DataPlane()
    dp.load_pipeline(fabric_json)
    assert dp.dataplane == "python"


@pytest.mark.parametrize("choice", ["native", "python"])
def test_switch_command_line_chooses_the_path(fabric_json: bytes, tmp_path: Path,
                                              choice: str) -> None:
    from p4sim.switch.main import _data_plane, parse_args

    prog = tmp_path / "fabric.json"
    prog.write_bytes(fabric_json)
    dp = _data_plane(parse_args(["--dataplane", choice, str(prog), "--",
                                 "--grpc-server-addr", "127.0.0.1:1"]))
    assert dp.dataplane == choice


def test_counter_and_register_writes_read_back_alike(fabric_json: bytes) -> None:
    """Counters and registers live in C memory on the native path: any 64-bit counter value
    and any register value of its width reads back as on the Python path, and bad ones fail
    alike."""
    pair = Pair(fabric_json)
    pair.both("counter_write", "MyIngress.port_rx", 1, (1 << 64) - 1, 1 << 63)
    assert pair.both("counter_read", "MyIngress.port_rx", 1) == ("ok", ((1 << 64) - 1, 1 << 63))
    pair.both("register_write", "port_qdepth", 3, (1 << 32) - 1)
    assert pair.both("register_read", "port_qdepth", 3) == ("ok", (1 << 32) - 1)
    assert pair.both("register_write", "port_qdepth", 3, 1 << 32)[0] == "error"
    assert pair.both("counter_read", "MyIngress.port_rx", 512)[0] == "error"


def test_large_exact_tables_match_as_python(fabric_json: bytes) -> None:
    """Exact tables with many entries (the native path indexes them by hash): the same hits,
    misses and direct counters as the Python path's dict."""
    from native_harness import ING, IPS

    from p4sim.switch.api import ActionCall, Exact, TableEntry

    rng = random.Random(11)
    pair = Pair(fabric_json, seed=11)
    random_fabric_state(pair, rng)
    for table, action in (("host_tenant_dst", "set_dst_tenant"),
                          ("host_tenant_src", "set_src_tenant")):
        for low in range(300):
            ip = 0x0A000000 | (rng.choice([1, 2, 3]) << 8) | low
            if ip in IPS:
                continue
            pair.both("table_insert", f"{ING}.isolation.{table}", TableEntry(
                (Exact(ip),), ActionCall(f"{ING}.isolation.{action}", (rng.randrange(1, 3),))))
    frames = fabric_frames(rng)
    for _ in range(300):
        frame = bytearray(rng.choice(frames))
        if len(frame) > 34 and frame[12:14] == b"\x08\x00" and rng.random() < 0.7:
            frame[33] = rng.randrange(256)  # another host of the same subnets
            frame[29] = rng.randrange(256)
            frame[24:26] = b"\0\0"
            total = sum(int.from_bytes(frame[i:i + 2], "big") for i in range(14, 34, 2))
            total = (total & 0xFFFF) + (total >> 16)
            frame[24:26] = (~((total & 0xFFFF) + (total >> 16)) & 0xFFFF).to_bytes(2, "big")
        pair.receive(rng.randrange(4), bytes(frame))
    pair.check()
    hits = sum(e.counter[0] for e in pair.native.table_entries(f"{ING}.isolation.host_tenant_dst"))
    # the frames did reach the big table (some are refused before it, by the host-port guard)
    assert hits > 50


@pytest.mark.parametrize("mode", ["python", "native"])
def test_switches_share_the_parsed_program_and_leave_it_unchanged(fabric_json: bytes,
                                                                  mode: str) -> None:
    """Switches loading the same JSON share one parsed document (a fabric's switches each
    kept ~1 MiB of it): building a switch from it, and running a packet, must not change it."""
    import json

    from p4sim.switch.dataplane import DataPlane

    first, second = DataPlane(dataplane=mode), DataPlane(dataplane=mode)
    first.load_pipeline(fabric_json)
    second.load_pipeline(bytes(bytearray(fabric_json)))  # equal bytes, another object
    assert first.dataplane == second.dataplane == mode
    assert first.cp.p.doc is second.cp.p.doc
    for frame in fabric_frames(random.Random(1))[:20]:
        first.receive(1, frame)
    assert first.cp.p.doc == json.loads(fabric_json)
