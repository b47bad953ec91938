"""The bad-request battery: P4Runtime requests a careless or hostile client sends, each with the
gRPC code real BMv2 (simple_switch_grpc 1.15.5, PI 0.1.2) answers. p4sim must answer the same,
except for the documented differences in ``Case.p4sim`` (where p4sim follows the P4Runtime
specification and BMv2 does not), which say why.

Every case runs on the test program cp_test.p4 with the pipeline pushed, and uses keys of its
own so the cases do not depend on each other's order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2 as p4rt
from p4rt_client import Action, Client, Update

INSERT, MODIFY, DELETE = Update.INSERT, Update.MODIFY, Update.DELETE


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[Client], str]
    expect: str  # BMv2's code
    p4sim: str | None = None  # p4sim's code where it differs on purpose
    why: str = ""
    repush: bool = False  # the case may leave another (or, on BMv2, a broken) pipeline behind

    def expected(self, target: str) -> str:
        return self.p4sim if target == "embedded" and self.p4sim else self.expect


# ---- entity builders ---------------------------------------------------------------------------


def lpm(c: Client, net: int, plen: int = 24, action: str = "set_nhop",
        params: dict[int, bytes] | None = None, value: bytes | None = None) -> p4rt.Entity:
    e = p4rt.Entity()
    te = e.table_entry
    te.table_id = c.id("tables", "ipv4_lpm")
    fm = te.match.add(field_id=1)
    fm.lpm.value = value if value is not None else bytes([10, 99, net, 0])
    fm.lpm.prefix_len = plen
    te.action.action.action_id = c.id("actions", action)
    for pid, v in (params if params is not None else {1: b"\x01", 2: b"\x01"}).items():
        te.action.action.params.add(param_id=pid, value=v)
    return e


def acl(c: Client, priority: int, protocol: bytes = b"\x06") -> p4rt.Entity:
    e = p4rt.Entity()
    te = e.table_entry
    te.table_id = c.id("tables", "acl")
    te.priority = priority
    te.match.add(field_id=4).exact.value = protocol
    te.action.action.action_id = c.id("actions", "drop")
    return e


def member(c: Client, member_id: int, profile: int | None = None) -> p4rt.Entity:
    e = p4rt.Entity()
    m = e.action_profile_member
    m.action_profile_id = c.id("action_profiles", "ecmp_selector") if profile is None \
        else profile
    m.member_id = member_id
    m.action.action_id = c.id("actions", "set_nhop")
    m.action.params.add(param_id=1, value=b"\x01")
    m.action.params.add(param_id=2, value=b"\x02")
    return e


def group(c: Client, group_id: int, members: list[int]) -> p4rt.Entity:
    e = p4rt.Entity()
    g = e.action_profile_group
    g.action_profile_id = c.id("action_profiles", "ecmp_selector")
    g.group_id = group_id
    for m in members:
        g.members.add(member_id=m, weight=1)
    return e


def meter(c: Client, index: int, cir: int, cburst: int, pir: int, pburst: int) -> p4rt.Entity:
    e = p4rt.Entity()
    e.meter_entry.meter_id = c.id("meters", "rate_meter")
    e.meter_entry.index.index = index
    cfg = e.meter_entry.config
    cfg.cir, cfg.cburst, cfg.pir, cfg.pburst = cir, cburst, pir, pburst
    return e


def mcast(group_id: int, ports: list[int]) -> p4rt.Entity:
    e = p4rt.Entity()
    mg = e.packet_replication_engine_entry.multicast_group_entry
    mg.multicast_group_id = group_id
    for i, p in enumerate(ports):
        mg.replicas.add(egress_port=p, instance=i)
    return e


def counter(c: Client, index: int) -> p4rt.Entity:
    e = p4rt.Entity()
    e.counter_entry.counter_id = c.id("counters", "port_pkts")
    e.counter_entry.index.index = index
    return e


def register(c: Client, index: int) -> p4rt.Entity:
    e = p4rt.Entity()
    e.register_entry.register_id = c.id("registers", "queue_occ")
    e.register_entry.index.index = index
    e.register_entry.data.bitstring = b"\x01"
    return e


def u(kind: int, entity: p4rt.Entity) -> p4rt.Update:
    return p4rt.Update(type=kind, entity=entity)


def twice(c: Client, kind: int, entity: p4rt.Entity) -> str:
    """Write ``entity`` once (must succeed) then again; the second outcome."""
    first = c.write(u(kind, entity))
    return c.write(u(kind, entity)) if first == "OK" else f"setup failed: {first}"


def edit(entity: p4rt.Entity, change: Callable[[p4rt.Entity], None]) -> p4rt.Entity:
    change(entity)
    return entity


def restore_pipeline(c: Client) -> str:
    """Back to the test program: BMv2 needs a COMMIT first after a failed push (p4sim answers
    that COMMIT with UNKNOWN, harmlessly)."""
    c.set_pipeline(Action.COMMIT)
    return c.set_pipeline()


def other_program(c: Client):
    info = type(c.info)()
    info.CopyFrom(c.info)
    info.tables[0].preamble.name = "MyIngress.not_in_this_json"
    return info


# ---- the cases ---------------------------------------------------------------------------------

PIPELINE = [
    Case("set pipeline, action UNSPECIFIED",
         lambda c: c.set_pipeline(Action.UNSPECIFIED), "INVALID_ARGUMENT"),
    # Before the bad-JSON case: after a failed VERIFY_AND_COMMIT, BMv2 accepts a COMMIT.
    Case("COMMIT with nothing saved",
         lambda c: c.set_pipeline(Action.COMMIT), "UNKNOWN"),
    Case("set pipeline, device config not JSON",
         lambda c: c.set_pipeline(device_config=b"{nope"), "UNKNOWN"),
    Case("write after a failed pipeline push",
         lambda c: c.write(u(INSERT, lpm(c, 200))), "UNKNOWN", "OK",
         "spec: a config that cannot be applied leaves the old one in place; BMv2 keeps "
         "failing writes and pushes until a COMMIT", repush=True),
    Case("VERIFY of a valid config", lambda c: c.set_pipeline(Action.VERIFY), "OK"),
    Case("set pipeline without election id while a primary exists",
         lambda c: c.set_pipeline(election=None), "PERMISSION_DENIED"),
    Case("set pipeline with a backup's election id",
         lambda c: c.set_pipeline(election=3), "PERMISSION_DENIED"),
    Case("set pipeline for another device id",
         lambda c: c.set_pipeline(device_id=c.device_id + 5), "PERMISSION_DENIED"),
    Case("P4Info of another program with this JSON",
         lambda c: c.set_pipeline(p4info=other_program(c)), "OK", "INVALID_ARGUMENT",
         "spec: the server verifies the config; BMv2 accepts the pair and fails on writes",
         repush=True),
    Case("VERIFY of a P4Info of another program",
         lambda c: c.set_pipeline(Action.VERIFY, p4info=other_program(c)), "OK",
         "INVALID_ARGUMENT", "as above, in the VERIFY phase"),
    Case("get pipeline, unknown response_type", lambda c: c.get_pipeline(99),
         "INVALID_ARGUMENT"),
]

TABLES = [
    Case("insert duplicate entry", lambda c: twice(c, INSERT, lpm(c, 1)), "ALREADY_EXISTS"),
    Case("delete missing entry", lambda c: c.write(u(DELETE, lpm(c, 2))), "NOT_FOUND"),
    Case("modify missing entry", lambda c: c.write(u(MODIFY, lpm(c, 3))), "NOT_FOUND"),
    Case("update type UNSPECIFIED", lambda c: c.write(u(Update.UNSPECIFIED, lpm(c, 4))),
         "INVALID_ARGUMENT"),
    Case("unknown table id",
         lambda c: c.write(u(INSERT, edit(lpm(c, 5), lambda e: setattr(
             e.table_entry, "table_id", 0x02FFFFFF)))), "INVALID_ARGUMENT"),
    Case("unknown action id",
         lambda c: c.write(u(INSERT, edit(lpm(c, 6), lambda e: setattr(
             e.table_entry.action.action, "action_id", 0x01FFFFFF)))), "INVALID_ARGUMENT"),
    Case("action not in the table's action list",
         lambda c: c.write(u(INSERT, lpm(c, 7, action="set_smac", params={1: b"\x01"}))),
         "INVALID_ARGUMENT"),
    Case("missing action param", lambda c: c.write(u(INSERT, lpm(c, 8, params={1: b"\x01"}))),
         "INVALID_ARGUMENT"),
    Case("unknown action param id",
         lambda c: c.write(u(INSERT, lpm(c, 9, params={1: b"\x01", 2: b"\x01", 9: b"\x01"}))),
         "INVALID_ARGUMENT"),
    Case("action param wider than its bitwidth",
         lambda c: c.write(u(INSERT, lpm(c, 10, params={1: b"\x01", 2: b"\x02\x00"}))),
         "INVALID_ARGUMENT"),
    Case("lpm prefix longer than the field",
         lambda c: c.write(u(INSERT, lpm(c, 11, plen=33))), "INVALID_ARGUMENT"),
    Case("lpm value with bits beyond the prefix",
         lambda c: c.write(u(INSERT, lpm(c, 12, plen=16))), "INVALID_ARGUMENT"),
    Case("lpm value wider than the field",
         lambda c: c.write(u(INSERT, lpm(c, 13, value=b"\x01\x0a\x63\x0d\x00"))),
         "INVALID_ARGUMENT"),
    Case("match field id unknown",
         lambda c: c.write(u(INSERT, edit(lpm(c, 14), lambda e: setattr(
             e.table_entry.match[0], "field_id", 9)))), "INVALID_ARGUMENT"),
    Case("ternary table entry without priority",
         lambda c: c.write(u(INSERT, acl(c, 0))), "INVALID_ARGUMENT"),
    Case("ternary table entry with priority", lambda c: c.write(u(INSERT, acl(c, 5))), "OK"),
    Case("missing exact match field",
         lambda c: c.write(u(INSERT, edit(acl(c, 6), lambda e: e.table_entry.ClearField(
             "match")))), "INVALID_ARGUMENT"),
    Case("default entry INSERT",
         lambda c: c.write(u(INSERT, edit(lpm(c, 15), lambda e: (
             e.table_entry.ClearField("match"),
             setattr(e.table_entry, "is_default_action", True))))), "INVALID_ARGUMENT"),
    Case("default entry with a match key",
         lambda c: c.write(u(MODIFY, edit(lpm(c, 16), lambda e: setattr(
             e.table_entry, "is_default_action", True)))), "INVALID_ARGUMENT"),
    Case("idle timeout on a table without support",
         lambda c: c.write(u(INSERT, edit(lpm(c, 17), lambda e: setattr(
             e.table_entry, "idle_timeout_ns", 10**9)))), "INVALID_ARGUMENT"),
    Case("meter config on a table without direct meter",
         lambda c: c.write(u(INSERT, edit(lpm(c, 18), lambda e: setattr(
             e.table_entry.meter_config, "cir", 1)))), "INVALID_ARGUMENT"),
    Case("entity not set", lambda c: c.write(p4rt.Update(type=INSERT)), "UNKNOWN"),
    Case("atomicity ROLLBACK_ON_ERROR",
         lambda c: c.write(u(INSERT, lpm(c, 19)), atomicity=p4rt.WriteRequest.ROLLBACK_ON_ERROR),
         "UNIMPLEMENTED"),
    Case("write from a backup's election id",
         lambda c: c.write(u(INSERT, lpm(c, 20)), election=3), "PERMISSION_DENIED"),
    Case("500 inserts with one duplicate: a result per update",
         lambda c: _big_batch(c), "500 results, #250 ALREADY_EXISTS"),
    Case("write without election id while a primary exists",
         lambda c: c.write(u(INSERT, lpm(c, 21)), election=None), "PERMISSION_DENIED"),
]

PROFILES = [
    Case("member of an unknown action profile",
         lambda c: c.write(u(INSERT, member(c, 1, profile=0x11FFFFFF))), "INVALID_ARGUMENT"),
    Case("duplicate member", lambda c: twice(c, INSERT, member(c, 2)), "ALREADY_EXISTS"),
    Case("group with a missing member",
         lambda c: c.write(u(INSERT, group(c, 1, [77]))), "NOT_FOUND"),
    Case("delete a member a group uses",
         lambda c: (c.write(u(INSERT, member(c, 3))), c.write(u(INSERT, group(c, 2, [3]))),
                    c.write(u(DELETE, member(c, 3))))[-1], "UNKNOWN"),
    Case("table entry pointing at a missing member",
         lambda c: c.write(u(INSERT, edit(p4rt.Entity(), lambda e: (
             setattr(e.table_entry, "table_id", c.id("tables", "ecmp_group")),
             setattr(e.table_entry.match.add(field_id=1).exact, "value", b"\x07"),
             setattr(e.table_entry.action, "action_profile_member_id", 99))))),
         "INVALID_ARGUMENT"),
]

RESOURCES = [
    Case("meter INSERT", lambda c: c.write(u(INSERT, meter(c, 1, 1, 1, 2, 1))),
         "INVALID_ARGUMENT"),
    Case("meter cir above pir", lambda c: c.write(u(MODIFY, meter(c, 1, 10, 10, 5, 10))),
         "UNKNOWN"),
    Case("meter cir -1 (as unsigned, above pir)",
         lambda c: c.write(u(MODIFY, meter(c, 2, -1, 10, 5, 10))), "UNKNOWN"),
    Case("meter cir below -1", lambda c: c.write(u(MODIFY, meter(c, 3, -2, 1, 5, 1))),
         "INVALID_ARGUMENT"),
    Case("meter pburst beyond 32 bits",
         lambda c: c.write(u(MODIFY, meter(c, 4, 1, 1, 2, 1 << 33))), "UNIMPLEMENTED"),
    Case("meter index out of range", lambda c: c.write(u(MODIFY, meter(c, 64, 1, 1, 2, 1))),
         "UNKNOWN"),
    Case("valid meter config", lambda c: c.write(u(MODIFY, meter(c, 5, 10, 10, 20, 10))), "OK"),
    Case("counter index out of range (read)", lambda c: c.read(counter(c, 512)), "UNKNOWN"),
    Case("register write", lambda c: c.write(u(MODIFY, register(c, 1))), "UNIMPLEMENTED"),
    Case("register read", lambda c: c.read(register(c, 1)), "UNIMPLEMENTED"),
    Case("duplicate multicast group", lambda c: twice(c, INSERT, mcast(5, [1, 2])),
         "ALREADY_EXISTS"),
    Case("delete missing multicast group", lambda c: c.write(u(DELETE, mcast(6, []))),
         "NOT_FOUND"),
    Case("multicast group id 0", lambda c: c.write(u(INSERT, mcast(0, [1]))),
         "INVALID_ARGUMENT"),
    Case("read of an unknown table id",
         lambda c: c.read(p4rt.Entity(table_entry=p4rt.TableEntry(table_id=0x02FFFFFF))),
         "INVALID_ARGUMENT"),
]


def _big_batch(c: Client) -> str:
    """Per-update results of a large failed batch (what the client needs to stay in sync)."""
    updates = [u(INSERT, lpm(c, 0, plen=24, value=bytes([11, i >> 8, i & 255, 0])))
               for i in range(500)]
    updates[250] = updates[0]
    errors = c.write_errors(*updates)
    failed = [(i, code) for i, code in enumerate(errors) if code != "OK"]
    return f"{len(errors)} results, " + ", ".join(f"#{i} {code}" for i, code in failed)


def _stream_code(s) -> str:
    if not s.ended.wait(3):
        return "OK (stream open)"
    return s.error.code().name if s.error is not None else "OK (stream ended)"


def _packet_out_error(c: Client, metadata: list[tuple[int, bytes]]) -> str:
    msg = p4rt.StreamMessageRequest()
    msg.packet.payload = b"\x00" * 40
    for mid, value in metadata:
        msg.packet.metadata.add(metadata_id=mid, value=value)
    c.primary.send(msg)
    try:
        err = c.primary.inbox["error"].get(timeout=1.0)
    except Exception:
        return "no StreamError"
    return f"StreamError {err.error.canonical_code}"


STREAM = [
    Case("second stream with the primary's election id",
         lambda c: _stream_code(c.stream(election=Client.ELECTION)), "INVALID_ARGUMENT"),
    Case("arbitration changes device id",
         lambda c: (lambda s: (s.inbox["arbitration"].get(timeout=3),
                               s.arbitrate(c.device_id + 1, 2), _stream_code(s))[-1])(
             c.stream(election=2)), "FAILED_PRECONDITION"),
    Case("packet-out with an unknown metadata id",
         lambda c: _packet_out_error(c, [(9, b"\x01")]), "no StreamError",
         "StreamError 3", "PI reports it only with stream error reporting on (off by "
         "default); the spec's StreamError exists for this, so p4sim always reports it"),
]

CASES = PIPELINE + TABLES + PROFILES + RESOURCES + STREAM
