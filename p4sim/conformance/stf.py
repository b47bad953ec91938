"""STF (p4c's "simple test framework") files: parsing into commands.

The format, as p4c's BMv2 test driver reads it (one command a line, ``#`` starts a comment):
- ``add TABLE [PRIORITY] FIELD:VALUE ... ACTION(PARAM:VALUE, ...) [= ID]`` and
  ``setdefault TABLE ACTION(...)``;
- ``packet PORT HEX...`` sends a frame; ``expect PORT [HEX...] [$]`` expects one on ``PORT``
  (in order per port; ``*`` is a nibble that matches anything; a trailing ``$`` requires the
  exact length, otherwise the frame may be longer; ``expect PORT`` alone accepts anything);
- ``wait``; the simple_switch_CLI pass-through commands ``mirroring_add SESSION PORT``,
  ``mc_mgrp_create GROUP``, ``mc_node_create RID PORT...``, ``mc_node_associate GROUP NODE``
  and the register/counter/meter commands (kept as ``Direct`` commands).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

DIRECT_COMMANDS = (
    "mirroring_add", "mirroring_add_mc", "mirroring_delete", "mirroring_get",
    "mc_mgrp_create", "mc_node_create", "mc_node_update", "mc_node_associate",
    "counter_read", "counter_write", "register_read", "register_write", "register_reset",
    "meter_get_rates", "meter_set_rates", "meter_array_set_rates",
)


class StfError(ValueError):
    """A line the parser does not understand; the message names file:line."""


@dataclass(frozen=True)
class Add:
    line: int
    table: str
    priority: int | None
    keys: tuple[tuple[str, str], ...]
    action: str
    args: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SetDefault:
    line: int
    table: str
    action: str
    args: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Packet:
    line: int
    port: int
    data: bytes


@dataclass(frozen=True)
class Expect:
    line: int
    port: int
    pattern: str | None  # upper-case hex nibbles and '*'; None: any frame (not checked)
    exact_length: bool = False

    def matches(self, frame: bytes) -> bool:
        if self.pattern is None:
            return True
        got = frame.hex().upper()
        if self.exact_length and len(got) > len(self.pattern):
            return False
        if len(got) < len(self.pattern):
            return False
        return all(p == "*" or p == g for p, g in zip(self.pattern, got))


@dataclass(frozen=True)
class Wait:
    line: int


@dataclass(frozen=True)
class Direct:
    """A simple_switch_CLI command passed through (multicast, mirroring, registers...)."""

    line: int
    name: str
    args: tuple[str, ...]


Command = Add | SetDefault | Packet | Expect | Wait | Direct


@dataclass
class StfFile:
    path: Path
    commands: list[Command] = field(default_factory=list)

    def ports(self) -> list[int]:
        """Every port a packet or an expectation names (the switch's interfaces)."""
        return sorted({c.port for c in self.commands if isinstance(c, Packet | Expect)})


_ACTION = re.compile(r"^(?P<name>[A-Za-z_$][\w$.\[\]]*)\s*\((?P<args>[^)]*)\)\s*(=\s*\S+)?\s*$")
_HEXDATA = re.compile(r"^[0-9a-fA-F*]*$")


def _action_call(text: str, where: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    m = _ACTION.match(text.strip())
    if not m:
        raise StfError(f"{where}: expected ACTION(PARAM:VALUE, ...), got '{text.strip()}'")
    args = []
    for part in m.group("args").split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition(":")
        if not sep or not name.strip() or not value.strip():
            raise StfError(f"{where}: bad action argument '{part}' (expected NAME:VALUE)")
        args.append((name.strip(), value.strip()))
    return m.group("name"), tuple(args)


def _parse_add(rest: str, line: int, where: str) -> Add:
    paren = rest.find("(")
    if paren < 0:
        raise StfError(f"{where}: 'add' without an action call")
    head = rest[:paren].split()
    if len(head) < 2:
        raise StfError(f"{where}: 'add' needs TABLE [PRIORITY] KEYS... ACTION(...)")
    table, action_name, middle = head[0], head[-1], head[1:-1]
    priority = None
    if middle and middle[0].isdigit():
        priority = int(middle[0])
        middle = middle[1:]
    keys = []
    for tok in middle:
        name, sep, value = tok.rpartition(":")
        if not sep or not name or not value:
            raise StfError(f"{where}: bad match field '{tok}' (expected FIELD:VALUE)")
        keys.append((name, value))
    action, args = _action_call(action_name + rest[paren:], where)
    return Add(line, table, priority, tuple(keys), action, args)


def _packet_data(tokens: list[str], where: str) -> tuple[str, bool]:
    text = "".join(tokens)
    exact = text.endswith("$")
    if exact:
        text = text[:-1]
    if not _HEXDATA.match(text):
        raise StfError(f"{where}: packet data must be hex digits (and '*' in expect)")
    return text.upper(), exact


def _parse_line(words: list[str], text: str, line: int, where: str) -> Command | None:
    cmd = words[0].lower()
    if cmd == "add":
        return _parse_add(text.split(None, 1)[1] if len(words) > 1 else "", line, where)
    if cmd == "setdefault":
        if len(words) < 3:
            raise StfError(f"{where}: 'setdefault' needs TABLE ACTION(...)")
        rest = text.split(None, 2)[2]
        action, args = _action_call(rest, where)
        return SetDefault(line, words[1], action, args)
    if cmd in ("packet", "expect"):
        if len(words) < 2 or not words[1].isdigit():
            raise StfError(f"{where}: '{cmd}' needs a port number")
        port = int(words[1])
        data, exact = _packet_data(words[2:], where)
        if cmd == "packet":
            if "*" in data or len(data) % 2:
                raise StfError(f"{where}: packet data must be whole bytes without '*'")
            return Packet(line, port, bytes.fromhex(data))
        if len(words) == 2:
            return Expect(line, port, None)
        return Expect(line, port, data, exact)
    if cmd == "wait":
        return Wait(line)
    if cmd in DIRECT_COMMANDS:
        return Direct(line, cmd, tuple(words[1:]))
    raise StfError(f"{where}: unknown STF command '{words[0]}'")


def parse_stf(path: str | Path) -> StfFile:
    path = Path(path)
    out = StfFile(path)
    for lineno, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(),
                                 start=1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        cmd = _parse_line(text.split(), text, lineno, f"{path}:{lineno}")
        if cmd is not None:
            out.commands.append(cmd)
    return out
