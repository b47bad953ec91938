"""Real BMv2 runs' journeys: simple_switch_grpc's own log read into the per-switch records of
p4sim.switch.jsontrace, with only the fields BMv2 gives.

`cellfabric run --target bmv2 --trace-sample N` starts each BMv2 switch with
``--log-file traces/SWITCH.bmv2-every-N --log-level debug --dump-packet-data 64`` (BMv2 adds
``.txt``). BMv2 cannot sample: it logs every packet, and this reader keeps 1 in N by the same
identity hash as p4sim (p4sim.switch.tracesample), read from the packet's first bytes, which
``--dump-packet-data`` logs on receive and on send. Per packet, the debug level gives:

- "Received packet of length L on port P: HEX" (receive thread, no packet id; the ingress
  thread takes packets in the order received) and "Processing packet received on port P"
  ([ID.COPY]): the ingress time, port, length, identity and IPv4 header;
- "Extracting header 'H'" and "Exception while parsing: ERROR": the parser's headers and error;
- "Looking up key:" with "* FIELD: HEX" lines, "Table 'T': hit with handle H" / "miss",
  "Dumping entry H" (match key, action), "Choosing member M from group G" (with the group's
  members in the dump) and "Action entry is A - ARGS,": the tables, choices and actions;
- "Egress port is P", "Pipeline 'egress': start", "Transmitting packet of size L out of port P"
  and "Sending packet of length L on port P: HEX": the copy's port, its queue wait (from the
  end of ingress to the start of egress), the time it left and what the hop changed;
- "Dropping packet at the end of ingress" / "of egress": a drop, its stage.

It does not give: the queue depth at enqueue, the priority queue, a drop's reason code (the
program's drop_reason metadata) nor a tail drop in the queue, the liveness of a selector's
members, and times finer than 1 ms (its log's clock). Every record names
these in ``lacks``; the page lists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4sim.switch.jsontrace import _changes
from p4sim.switch.tracesample import TraceSampler, ip_header, packet_identity

LACKS = ["depth", "prio", "drop.code", "queue tail drops", "choice.live",
         "times finer than 1 ms"]
LOG_NAME = re.compile(r"^(?P<switch>.+)\.bmv2-every-(?P<every>\d+)\.txt$")
_LINE = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\.(\d{3})\] \[bmv2\] \[\w\] \[thread (\d+)\] "
                   r"(?:\[(\d+)\.(\d+)\] \[cxt \d+\] )?(.*)$")
_RECEIVED = re.compile(r"Received packet of length (\d+) on port (\d+): ([0-9a-f]*)")
_SENDING = re.compile(r"Sending packet of length (\d+) on port (\d+): ([0-9a-f]*)")
_TABLE = re.compile(r"Table '([^']+)': (hit with handle \d+|miss)")
_ACTION = re.compile(r"Action entry is (\S+) - (.*)")
_CHOICE = re.compile(r"Choosing member (\d+) from group (\d+)")
_MEMBER = re.compile(r"\s*mbr (\d+): (\S+) - (.*)")
_TRANSMIT = re.compile(r"Transmitting packet of size (\d+) out of port (\d+)")


def log_path(traces: Path, switch: str, every: int) -> Path:
    """The --log-file value for a BMv2 switch (BMv2 appends .txt)."""
    return traces / f"{switch}.bmv2-every-{every}"


def _args(text: str) -> list[int]:
    return [int(a, 16) for a in text.strip().rstrip(",").split(",") if a.strip()]


@dataclass
class _Message:
    t: int  # ns of the day, at 1 ms resolution
    thread: str
    pkt: tuple[int, int] | None
    text: str
    more: list[str] = field(default_factory=list)  # its continuation lines


def _messages(path: Path) -> list[_Message]:
    out: list[_Message] = []
    with open(path, errors="replace") as f:
        for line in f:
            m = _LINE.match(line)
            if m is None:
                if out and line.strip():
                    out[-1].more.append(line.rstrip("\n"))
                continue
            h, mi, s, ms, thread, pid, cid, text = m.groups()
            t = (((int(h) * 60 + int(mi)) * 60 + int(s)) * 1000 + int(ms)) * 1_000_000
            out.append(_Message(t, thread, (int(pid), int(cid)) if pid is not None else None,
                                text))
    return out


class _Reader:
    """One log's messages into records (see the module docstring)."""

    def __init__(self, switch: str, sampler: TraceSampler) -> None:
        self.switch, self.sampler = switch, sampler
        self.received: list[tuple[int, int, bytes]] = []  # (port, length, first bytes)
        self.recs: dict[int, dict[str, Any]] = {}  # BMv2 packet id -> record
        self.copies: dict[tuple[int, int], dict[str, Any]] = {}
        self.key: dict[tuple[int, int], dict[str, int]] = {}
        self.choice: dict[tuple[int, int], dict[str, Any]] = {}
        self.last_table: dict[tuple[int, int], dict[str, Any] | None] = {}
        self.sending: dict[str, dict[str, Any]] = {}  # thread -> copy awaiting its bytes
        self.order: list[int] = []

    def read(self, messages: list[_Message]) -> list[dict[str, Any]]:
        for msg in messages:
            try:
                self._one(msg)
            except (ValueError, IndexError, KeyError):
                continue  # a line of another shape: the record keeps what it has
        out = []
        for pid in self.order:
            rec = self.recs[pid]
            frame = rec.pop("_frame")
            if not self.sampler.wants(frame):
                continue
            for k in ("_port", "_t_enq"):
                rec.pop(k, None)
            for c in rec["copies"]:
                c.pop("_rec", None)
            for ev in rec["ingress"] + [e for c in rec["copies"] for e in c["egress"]]:
                ev.pop("_choice", None)
                ev.pop("_member", None)
            out.append(rec)
        return out

    def _events(self, pkt: tuple[int, int]) -> list[dict[str, Any]] | None:
        copy = self.copies.get(pkt)
        if copy is not None:
            return copy["egress"]
        rec = self.recs.get(pkt[0])
        return rec["ingress"] if rec is not None else None

    def _one(self, msg: _Message) -> None:
        text, pkt = msg.text, msg.pkt
        if pkt is None:
            self._unkeyed(msg)
            return
        if text.startswith("Processing packet received on port"):
            self._received(msg, pkt)
        elif text.startswith(("Extracting header '", "Exception while parsing: ")):
            self._parser(pkt, text)
        elif text.startswith("Looking up key:"):
            self.key[pkt] = {ln[2:].split(":")[0].strip(): int(ln.rsplit(":", 1)[1].strip(), 16)
                             for ln in msg.more if ln.startswith("* ")}
        elif (m := _TABLE.match(text)) is not None:
            self._table(pkt, m.group(1), m.group(2) != "miss")
        elif text.startswith("Dumping entry"):
            self._entry(pkt, msg.more)
        elif (m := _CHOICE.match(text)) is not None:
            self.choice[pkt] = {"ev": "choice", "group": int(m.group(2)), "members": [],
                                "chosen": None, "_member": int(m.group(1))}
        elif (m := _ACTION.match(text)) is not None:
            self._action(pkt, m.group(1), m.group(2))
        elif text.startswith("Egress port is"):
            rec = self.recs.get(pkt[0])
            if rec is not None:
                rec["_port"], rec["_t_enq"] = int(text.rsplit(" ", 1)[1]), msg.t
        elif text.startswith("Pipeline 'egress': start"):
            self._egress(msg, pkt)
        elif text.startswith("Dropping packet at the end of"):
            self._dropped(msg, pkt, text.rsplit(" ", 1)[1])
        elif (m := _TRANSMIT.match(text)) is not None:
            copy = self.copies.get(pkt)
            if copy is not None:
                copy.update(t_out=msg.t, out_len=int(m.group(1)))
                self.sending[msg.thread] = copy

    def _unkeyed(self, msg: _Message) -> None:
        if (m := _RECEIVED.match(msg.text)) is not None:
            self.received.append((int(m.group(2)), int(m.group(1)), bytes.fromhex(m.group(3))))
        elif (m := _SENDING.match(msg.text)) is not None:
            copy = self.sending.pop(msg.thread, None)
            if copy is not None:
                rec = copy["_rec"]
                copy["changes"] = _changes(rec["hdr"], ip_header(bytes.fromhex(m.group(3))),
                                           rec["len"], copy["out_len"])

    def _received(self, msg: _Message, pkt: tuple[int, int]) -> None:
        port = int(msg.text.rsplit(" ", 1)[1])
        at = next((i for i, r in enumerate(self.received) if r[0] == port), None)
        _, length, frame = self.received.pop(at) if at is not None else (port, 0, b"")
        rec = {"switch": self.switch, "pkt": pkt[0], "t_in": msg.t, "in_port": port,
               "len": length, "instance": 0, "id": packet_identity(frame),
               "hdr": ip_header(frame), "ingress": [], "copies": [], "source": "bmv2",
               "lacks": LACKS, "_frame": frame}
        if pkt[0] not in self.recs:
            self.order.append(pkt[0])
        self.recs[pkt[0]] = rec

    def _parser(self, pkt: tuple[int, int], text: str) -> None:
        rec = self.recs.get(pkt[0])
        if rec is None or pkt in self.copies:  # egress has no parser
            return
        if not rec["ingress"] or rec["ingress"][0]["ev"] != "parser":
            rec["ingress"].insert(0, {"ev": "parser", "headers": []})
        ev = rec["ingress"][0]
        if text.startswith("Extracting"):
            ev["headers"].append(text.split("'")[1])
        else:  # BMv2 names the error (p4sim's records give its number)
            ev["error"] = text.split(": ", 1)[1].strip()

    def _table(self, pkt: tuple[int, int], table: str, hit: bool) -> None:
        events, key = self._events(pkt), self.key.pop(pkt, {})
        self.last_table[pkt] = None
        if events is None or not key:  # a keyless table: p4c's wrapper of a statement
            return
        ev: dict[str, Any] = {"ev": "table", "table": table, "hit": hit, "key": key}
        events.append(ev)
        self.last_table[pkt] = ev
        choice = self.choice.pop(pkt, None)
        if choice is not None:
            choice["table"] = table
            ev["_choice"] = choice
            events.append(choice)

    def _entry(self, pkt: tuple[int, int], lines: list[str]) -> None:
        ev = self.last_table.get(pkt)
        if ev is None:
            return
        ev["entry"] = [ln[2:].strip() for ln in lines if ln.startswith("* ")]
        members = [(int(m.group(1)), m.group(2), _args(m.group(3)))
                   for m in map(_MEMBER.match, lines) if m is not None]
        choice = ev.pop("_choice", None)
        if choice is not None and members:
            chosen = choice["_member"]
            choice["members"] = [{"member": mid, "action": a, "args": args}
                                 for mid, a, args in members]
            choice["chosen"] = next((i for i, (mid, _, _) in enumerate(members)
                                     if mid == chosen), None)
        for ln in lines:
            if ln.startswith("Action entry:"):
                ev["action"] = ln.split(":", 1)[1].strip().rstrip(",")

    def _action(self, pkt: tuple[int, int], name: str, args: str) -> None:
        ev, events = self.last_table.pop(pkt, None), self._events(pkt)
        if ev is None or events is None or name == "NoAction":
            return
        action: dict[str, Any] = {"ev": "action", "name": name, "args": _args(args)}
        if not ev["hit"]:
            action["default"] = True
        elif "action" not in ev:
            ev["action"] = f"{name} - {args.strip()}"
        events.append(action)

    def _egress(self, msg: _Message, pkt: tuple[int, int]) -> None:
        rec = self.recs.get(pkt[0])
        if rec is None or "_port" not in rec:
            return
        t_enq = rec.get("_t_enq", msg.t)
        copy = {"port": rec["_port"], "t_enq": t_enq, "depth": None, "t_deq": msg.t,
                "wait_ns": msg.t - t_enq, "egress": [], "_rec": rec}
        rec["copies"].append(copy)
        self.copies[pkt] = copy

    def _dropped(self, msg: _Message, pkt: tuple[int, int], stage: str) -> None:
        rec = self.recs.get(pkt[0])
        if rec is None:
            return
        drop: dict[str, Any] = {"stage": stage, "t": msg.t,
                                "reason": f"dropped at the end of {stage} (BMv2's log)"}
        copy = self.copies.get(pkt)
        if copy is not None:
            drop["port"] = copy["port"]
            copy["dropped"] = True
        rec["drop"] = drop


def read_log(path: Path, switch: str | None = None) -> list[dict[str, Any]]:
    """The sampled packets' records of one BMv2 log named by ``log_path``."""
    m = LOG_NAME.match(path.name)
    if m is None:
        raise ValueError(f"{path}: not a BMv2 trace log (SWITCH.bmv2-every-N.txt)")
    sampler = TraceSampler(int(m.group("every")))
    return _Reader(switch or m.group("switch"), sampler).read(_messages(path))


def bmv2_logs(traces: Path) -> dict[str, Path]:
    """{file stem's switch: log} of the BMv2 trace logs in a run's traces/ folder."""
    out = {}
    for path in sorted(traces.glob("*.bmv2-every-*.txt")):
        m = LOG_NAME.match(path.name)
        if m is not None:
            out[m.group("switch")] = path
    return out
