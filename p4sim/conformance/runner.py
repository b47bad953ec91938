"""Run one STF test: compile, start the switch, install over P4Runtime, send, compare.

Outcomes: ``pass``; ``fail`` (frames differ from the expectations); ``compile-error`` (the
compiler rejected the program); ``load-error`` (the switch refused the pipeline);
``error`` (an STF line the program or the switch refused: an unknown table, a rejected entry);
``crash`` (the switch process died: BMv2 does not validate its JSON); ``timeout``. Comparison follows p4c's BMv2 driver: the switch has one interface per port that
a packet or an expect names; on each, the frames out must be exactly the expected ones in order
(``expect PORT`` without data leaves that port unchecked); frames to other ports are lost.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from p4sim.conformance.stf import (
    Add,
    Direct,
    Expect,
    Packet,
    SetDefault,
    StfError,
    StfFile,
    Wait,
    parse_stf,
)

# target name -> (compiler, switch)
TARGETS = {
    "embedded": ("p4sim", "p4sim"),
    "bmv2": ("p4c", "bmv2"),
    "mixed-p4c-on-p4sim": ("p4c", "p4sim"),
    "mixed-p4sim-on-bmv2": ("p4sim", "bmv2"),
}
STATUSES = ("pass", "fail", "crash", "compile-error", "load-error", "error", "timeout")


@dataclass
class Result:
    name: str
    status: str
    reason: str = ""
    seconds: float = 0.0
    frames_sent: int = 0
    details: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"name": self.name, "status": self.status, "reason": self.reason,
                "seconds": round(self.seconds, 3), "frames_sent": self.frames_sent,
                "details": self.details}


def _describe_diff(exp: Expect, got: bytes) -> str:
    text = got.hex().upper()
    pat = exp.pattern or ""
    if len(text) < len(pat):
        return f"{len(got)} bytes, shorter than the expected {len(pat) // 2}"
    if exp.exact_length and len(text) > len(pat):
        return f"{len(got)} bytes, longer than the exact {len(pat) // 2}"
    for i, (p, g) in enumerate(zip(pat, text)):
        if p not in ("*", g):
            return (f"byte {i // 2} differs: expected {pat[i & ~1:(i & ~1) + 2]}, "
                    f"got {text[i & ~1:(i & ~1) + 2]}")
    return "differs"


def compare(stf: StfFile, outputs: dict[int, list[bytes]]) -> list[str]:
    """Every difference between the expectations and the frames out, one line each."""
    problems: list[str] = []
    expects: dict[int, list[Expect]] = {}
    unchecked: set[int] = set()
    for c in stf.commands:
        if isinstance(c, Expect):
            if c.pattern is None:
                unchecked.add(c.port)
            else:
                expects.setdefault(c.port, []).append(c)
    for port in stf.ports():
        if port in unchecked:
            continue
        want, got = expects.get(port, []), outputs.get(port, [])
        for exp, frame in zip(want, got):
            if not exp.matches(frame):
                problems.append(f"port {port}, frame {want.index(exp) + 1} (expect line "
                                f"{exp.line}): {_describe_diff(exp, frame)}; got {frame.hex()}")
        if len(want) != len(got):
            extra = (f"; first extra {got[len(want)].hex()}" if len(got) > len(want) else
                     f"; first missing is line {want[len(got)].line}")
            problems.append(f"port {port}: expected {len(want)} frames, got {len(got)}{extra}")
    return problems


class _Stop(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def _open_switch(kind: str, ports: list[int]):
    from p4sim.conformance.switches import Bmv2Switch, EmbeddedSwitch

    return EmbeddedSwitch(ports) if kind == "p4sim" else Bmv2Switch(ports)


def _execute(stf: StfFile, sw, client, translator, result: Result) -> None:
    from p4.v1 import p4runtime_pb2 as p4rt

    from p4sim.conformance.entries import EntryError, Replication
    from p4sim.conformance.p4rt import P4RuntimeError

    replication = Replication()
    sent_since_settle = False
    for cmd in stf.commands:
        try:
            if isinstance(cmd, Add | SetDefault | Direct) and sent_since_settle:
                sw.settle()  # frames already sent see the tables as they were
                sent_since_settle = False
            if isinstance(cmd, Add):
                client.write(p4rt.Update.INSERT, translator.add(cmd), "add")
            elif isinstance(cmd, SetDefault):
                client.write(p4rt.Update.MODIFY, translator.set_default(cmd), "setdefault")
            elif isinstance(cmd, Direct):
                for utype, ent in replication.apply(cmd):
                    client.write(utype, ent, cmd.name)
            elif isinstance(cmd, Packet):
                sw.send(cmd.port, cmd.data)
                result.frames_sent += 1
                sent_since_settle = True
            elif isinstance(cmd, Wait):
                sw.settle()
                sent_since_settle = False
        except (EntryError, P4RuntimeError) as e:
            raise _Stop("error", f"line {cmd.line}: {e}") from None
    expected = sum(1 for c in stf.commands if isinstance(c, Expect) and c.pattern is not None)
    sw.settle(expected)


def run_test(p4: Path, stf_path: Path, target: str) -> Result:
    """Run one program against its STF file on ``target`` (a key of TARGETS)."""
    from p4sim.conformance.compilers import COMPILERS, CompileFailed
    from p4sim.conformance.entries import Translator
    from p4sim.conformance.p4rt import Client, P4RuntimeError

    compiler, switch_kind = TARGETS[target]
    result = Result(p4.stem, "error")
    start = time.monotonic()
    sw = client = None
    try:
        with tempfile.TemporaryDirectory(prefix="p4sim-conf-") as tmp:
            try:
                stf = parse_stf(stf_path)
            except StfError as e:
                raise _Stop("error", str(e)) from None
            try:
                device_json, info = COMPILERS[compiler](p4, Path(tmp))
            except CompileFailed as e:
                raise _Stop("compile-error", str(e).replace(str(p4.parent) + "/", "")) from None
            sw = _open_switch(switch_kind, stf.ports())
            client = Client(sw.addr, sw.device_id)
            try:
                client.set_pipeline(info, device_json)
            except P4RuntimeError as e:
                raise _Stop("load-error", str(e)) from None
            try:
                _execute(stf, sw, client, Translator(info), result)
            except _Stop as e:
                dead = sw.died()
                raise _Stop("crash", f"{dead} at {e.reason}") if dead else e from None
            result.details = compare(stf, sw.outputs())
            dead = sw.died()
            if dead:
                raise _Stop("crash", f"{dead} after {result.frames_sent} frames sent; "
                            + (result.details[0] if result.details else "outputs as expected"))
            result.status = "fail" if result.details else "pass"
            result.reason = result.details[0] if result.details else ""
    except _Stop as e:
        result.status, result.reason = e.status, e.reason
    finally:
        if client is not None:
            client.close()
        if sw is not None:
            sw.close()
        result.seconds = time.monotonic() - start
    return result
