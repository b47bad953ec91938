"""P4Runtime errors of the p4sim switch as BMv2's server (PI) returns them, on
tests/ptf/p4/switch_forwarding.p4.

PI answers a Write in which any update failed with gRPC status UNKNOWN and, in the
``grpc-status-details-bin`` trailer, a google.rpc.Status holding one p4.v1.Error per update, in
order: OK for updates that were applied, the update's own canonical code otherwise
(INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS...). Updates are applied independently (the
default CONTINUE_ON_ERROR). A Write whose election id is not the primary's is refused as a whole
with PERMISSION_DENIED. Requests are built here as raw protobufs on a channel of the test's own
and the trailer is decoded here too, so the control-plane client's checks and decoding are not
part of what is tested (except in ClientReportsUpdateErrors).

    python -m netlab.ptf_runner --ports 4 test_switch_errors
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from switch_lib import SwitchTest, program

from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSession,
    GroupMember,
    MulticastGroup,
    Replica,
    TableEntry,
)
from controlplane.errors import P4RuntimeError
from controlplane.p4rt import SwitchConnection

ING = "SwIngress"
T_L2 = f"{ING}.l2_exact"
T_ACL = f"{ING}.acl"
T_LPM = f"{ING}.ipv4_lpm"
OK = code_pb2.OK
UNKNOWN = code_pb2.UNKNOWN
INVALID_ARGUMENT = code_pb2.INVALID_ARGUMENT
NOT_FOUND = code_pb2.NOT_FOUND
ALREADY_EXISTS = code_pb2.ALREADY_EXISTS
Update = p4runtime_pb2.Update
Mutator = Callable[[p4runtime_pb2.Entity], None]


class WriteFailed(Exception):
    def __init__(self, code: grpc.StatusCode, per_update: list[int]) -> None:
        super().__init__(f"{code.name}: {per_update}")
        self.code = code
        self.per_update = per_update


def per_update_codes(err: grpc.RpcError) -> list[int]:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            codes = []
            for detail in status.details:
                p4err = p4runtime_pb2.Error()
                assert detail.Unpack(p4err), f"detail is not a p4.v1.Error: {detail.type_url}"
                codes.append(p4err.canonical_code)
            return codes
    return []


class ErrorsTest(SwitchTest):
    P4_PROGRAM = program("switch_forwarding.p4")
    ELECTION_ID = (0, 10)

    def setUp(self) -> None:
        super().setUp()
        self.channel = grpc.insecure_channel(self.grpc_addr)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)

    def tearDown(self) -> None:
        self.channel.close()
        super().tearDown()

    def entity(self, entry: TableEntry, mutate: Mutator | None = None
               ) -> p4runtime_pb2.Entity:
        """A valid entity from the client's encoder, then made invalid by ``mutate``."""
        ent = self.sw.codec.to_proto(entry)
        if mutate is not None:
            mutate(ent)
        return ent

    def raw_write(self, updates: list[tuple[int, p4runtime_pb2.Entity]],
                  election_id: tuple[int, int] | None = None) -> None:
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        high, low = election_id or self.ELECTION_ID
        req.election_id.high, req.election_id.low = high, low
        for kind, ent in updates:
            req.updates.add(type=kind, entity=ent)
        try:
            self.stub.Write(req, timeout=10)
        except grpc.RpcError as err:
            raise WriteFailed(err.code(), per_update_codes(err)) from None

    def assert_write_fails(self, updates: list[tuple[int, p4runtime_pb2.Entity]],
                           per_update: list[int]) -> None:
        with self.assertRaises(WriteFailed) as ctx:
            self.raw_write(updates)
        self.assertEqual(ctx.exception.code, grpc.StatusCode.UNKNOWN)
        self.assertEqual(ctx.exception.per_update, per_update)

    def entries(self, table: str) -> list[TableEntry]:
        return [e for e in self.sw.read(TableEntry(table)) if isinstance(e, TableEntry)]


def route(prefix: str, port: int = 1) -> TableEntry:
    return TableEntry(T_LPM, match={"hdr.ipv4.dst_addr": prefix}, action=f"{ING}.route",
                      params={"port": port, "src_mac": "02:00:00:00:00:01",
                              "dst_mac": "02:00:00:00:00:02"})


def acl(value_mask: str, priority: int = 10) -> TableEntry:
    return TableEntry(T_ACL, match={"hdr.ipv4.dst_addr": value_mask},
                      action=f"{ING}.acl_forward", params={"port": 2}, priority=priority)


def l2(mac: str, port: int = 3) -> TableEntry:
    return TableEntry(T_L2, match={"hdr.ethernet.dst_addr": mac}, action=f"{ING}.l2_forward",
                      params={"port": port})


class InvalidArgument(ErrorsTest):
    """Values PI rejects with INVALID_ARGUMENT; none of them changes the tables."""

    def runTest(self) -> None:
        port_id = self.sw.index.param(f"{ING}.route", "port").id

        def param_too_wide(e: p4runtime_pb2.Entity) -> None:
            (param,) = [p for p in e.table_entry.action.action.params if p.param_id == port_id]
            param.value = b"\x02\x00"  # 512 in a bit<9>

        def prefix_too_long(e: p4runtime_pb2.Entity) -> None:
            e.table_entry.match[0].lpm.prefix_len = 33

        def bits_after_prefix(e: p4runtime_pb2.Entity) -> None:
            e.table_entry.match[0].lpm.value = bytes([10, 0, 0, 1])  # with prefix_len 8

        def value_outside_mask(e: p4runtime_pb2.Entity) -> None:
            e.table_entry.match[0].ternary.value = bytes([10, 1, 2, 3])  # mask 255.255.0.0

        def zero_priority(e: p4runtime_pb2.Entity) -> None:
            e.table_entry.priority = 0

        def key_too_wide(e: p4runtime_pb2.Entity) -> None:
            e.table_entry.match[0].exact.value = b"\x01" + bytes(6)  # 49 bits in a bit<48>

        def action_not_in_table(e: p4runtime_pb2.Entity) -> None:
            e.table_entry.action.action.action_id = self.sw.index.id("action", f"{ING}.route")

        cases = [
            ("action parameter wider than its field", route("10.0.0.0/8"), param_too_wide),
            ("LPM prefix longer than the field", route("10.0.0.0/8"), prefix_too_long),
            ("LPM value with bits after the prefix", route("10.0.0.0/8"), bits_after_prefix),
            ("ternary value outside its mask", acl("10.1.0.0&&&255.255.0.0"),
             value_outside_mask),
            ("ternary entry without priority", acl("10.1.0.0&&&255.255.0.0"), zero_priority),
            ("exact key wider than its field", l2("02:00:00:00:00:07"), key_too_wide),
            ("action the table does not have", l2("02:00:00:00:00:07"), action_not_in_table),
        ]
        for what, entry, mutate in cases:
            with self.subTest(what):
                self.assert_write_fails([(Update.INSERT, self.entity(entry, mutate))],
                                        [INVALID_ARGUMENT])
        for table in (T_L2, T_ACL, T_LPM):
            self.assertEqual(self.entries(table), [], f"{table} unchanged")
        # the switch still takes good entries and forwards with them
        self.raw_write([(Update.INSERT, self.entity(l2("02:00:00:00:00:07")))])
        frame = (Ether(src="02:00:00:00:0a:01", dst="02:00:00:00:00:07", type=0x9000)
                 / Raw(bytes(50)))
        self.send(0, frame)
        testutils.verify_packet(self, frame, 3)
        testutils.verify_no_other_packets(self)


class NotFoundAndAlreadyExists(ErrorsTest):
    """Deleting or modifying a missing entry: NOT_FOUND; inserting an existing key (whatever
    the action): ALREADY_EXISTS, and the existing entry is kept."""

    def runTest(self) -> None:
        self.assert_write_fails([(Update.DELETE, self.entity(route("10.7.0.0/16")))],
                                [NOT_FOUND])
        self.assert_write_fails([(Update.MODIFY, self.entity(route("10.7.0.0/16")))],
                                [NOT_FOUND])
        self.raw_write([(Update.INSERT, self.entity(route("10.7.0.0/16", port=1)))])
        self.assert_write_fails([(Update.INSERT, self.entity(route("10.7.0.0/16", port=2)))],
                                [ALREADY_EXISTS])
        self.raw_write([(Update.INSERT, self.entity(acl("10.1.0.0&&&255.255.0.0", 10)))])
        self.assert_write_fails([(Update.INSERT, self.entity(acl("10.1.0.0&&&255.255.0.0", 10)))],
                                [ALREADY_EXISTS])
        # same value and mask at another priority is another entry
        self.raw_write([(Update.INSERT, self.entity(acl("10.1.0.0&&&255.255.0.0", 11)))])
        self.assertEqual(len(self.entries(T_ACL)), 2)
        (kept,) = self.entries(T_LPM)
        self.assertEqual(kept.params["port"], 1)
        pkt = (Ether(src="02:00:00:00:0a:01", dst="02:00:00:00:00:fe")
               / IP(src="1.1.1.1", dst="10.7.0.1", ttl=9) / UDP(sport=1, dport=2) / Raw(bytes(30)))
        exp = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
               / IP(src="1.1.1.1", dst="10.7.0.1", ttl=8) / UDP(sport=1, dport=2)
               / Raw(bytes(30)))
        self.send(0, pkt)
        testutils.verify_packet(self, exp, 1)
        testutils.verify_no_other_packets(self)


class BatchDetails(ErrorsTest):
    """A batch with failing updates: UNKNOWN overall, one code per update in order, and the
    good updates applied."""

    def runTest(self) -> None:
        self.raw_write([(Update.INSERT, self.entity(l2("02:00:00:00:00:0b")))])
        updates = [
            (Update.INSERT, self.entity(l2("02:00:00:00:00:0a", port=1))),
            (Update.INSERT, self.entity(l2("02:00:00:00:00:0b"))),
            (Update.DELETE, self.entity(l2("02:00:00:00:00:0c"))),
            (Update.INSERT, self.entity(route("10.8.0.0/16"),
                                        lambda e: setattr(e.table_entry.match[0].lpm,
                                                          "prefix_len", 40))),
            (Update.INSERT, self.entity(l2("02:00:00:00:00:0d", port=2))),
        ]
        self.assert_write_fails(updates, [OK, ALREADY_EXISTS, NOT_FOUND, INVALID_ARGUMENT, OK])
        macs = sorted(e.match["hdr.ethernet.dst_addr"] for e in self.entries(T_L2))
        self.assertEqual(macs, [0x02000000000A, 0x02000000000B, 0x02000000000D])
        self.assertEqual(self.entries(T_LPM), [])


class NonPrimaryWriter(ErrorsTest):
    """Only the primary (highest election id) may write: a backup's Write, a Write with an
    election id nobody holds, and one with none at all are refused with PERMISSION_DENIED and
    change nothing."""

    def runTest(self) -> None:
        backup = SwitchConnection(self.grpc_addr, self.device_id, (0, 5), reconnect=False)
        backup.connect()
        try:
            self.assertFalse(backup.is_primary)
            self.assertTrue(self.sw.is_primary)
            ent = self.entity(l2("02:00:00:00:00:21"))
            for election_id in ((0, 5), (0, 11), (1, 0)):
                with self.subTest(election_id=election_id):
                    with self.assertRaises(WriteFailed) as ctx:
                        self.raw_write([(Update.INSERT, ent)], election_id=election_id)
                    self.assertEqual(ctx.exception.code, grpc.StatusCode.PERMISSION_DENIED)
            req = p4runtime_pb2.WriteRequest(device_id=self.device_id)  # no election id
            req.updates.add(type=Update.INSERT, entity=ent)
            with self.assertRaises(grpc.RpcError) as ctx2:
                self.stub.Write(req, timeout=10)
            self.assertEqual(ctx2.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertEqual(self.entries(T_L2), [])
            # the primary still writes
            self.raw_write([(Update.INSERT, ent)])
            self.assertEqual(len(self.entries(T_L2)), 1)
        finally:
            backup.close()


class ClientReportsUpdateErrors(ErrorsTest):
    """The control-plane client turns the trailer into per-update outcomes with names."""

    def runTest(self) -> None:
        self.sw.insert(l2("02:00:00:00:00:31"))
        with self.assertRaises(P4RuntimeError) as ctx, self.sw.batch() as b:
            b.insert(l2("02:00:00:00:00:32"), l2("02:00:00:00:00:31"))
            b.delete(l2("02:00:00:00:00:33"))
        err = ctx.exception
        self.assertEqual(err.code, "UNKNOWN")
        self.assertEqual([u.code for u in err.updates], [OK, ALREADY_EXISTS, NOT_FOUND])
        self.assertIn("ALREADY_EXISTS", str(err))
        self.assertIn(T_L2, str(err))


class ReplicationAndProfileErrors(ErrorsTest):
    """Codes PI returns for multicast groups, clone sessions and action profiles (on the
    selector program, whose table is indirect)."""

    P4_PROGRAM = program("switch_selector.p4")

    def runTest(self) -> None:
        sel, table = f"{ING}.ecmp_selector", f"{ING}.ecmp"

        def ent(e: object, mutate: Mutator | None = None) -> p4runtime_pb2.Entity:
            out = self.sw.codec.to_proto(e)
            if mutate is not None:
                mutate(out)
            return out

        def member(member_id: int, port: int = 1) -> ActionProfileMember:
            return ActionProfileMember(sel, member_id, f"{ING}.set_next_hop",
                                       {"port": port, "src_mac": "02:00:00:00:00:01"})

        def group(group_id: int, members: list[int], max_size: int = 4) -> ActionProfileGroup:
            return ActionProfileGroup(sel, group_id, [GroupMember(m) for m in members],
                                      max_size=max_size)

        def zero_group_id(e: p4runtime_pb2.Entity) -> None:
            e.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0

        def zero_session_id(e: p4runtime_pb2.Entity) -> None:
            e.packet_replication_engine_entry.clone_session_entry.session_id = 0

        # multicast groups
        self.raw_write([(Update.INSERT, ent(MulticastGroup(5, [Replica(1, 1)])))])
        cases: list[tuple[str, int, p4runtime_pb2.Entity, int]] = [
            ("duplicate multicast group", Update.INSERT,
             ent(MulticastGroup(5, [Replica(2, 1)])), ALREADY_EXISTS),
            ("delete missing multicast group", Update.DELETE, ent(MulticastGroup(6, [])),
             NOT_FOUND),
            ("modify missing multicast group", Update.MODIFY,
             ent(MulticastGroup(6, [Replica(1, 1)])), NOT_FOUND),
            ("same replica twice", Update.INSERT,
             ent(MulticastGroup(7, [Replica(1, 3), Replica(1, 3)])), INVALID_ARGUMENT),
            ("multicast group id 0", Update.INSERT,
             ent(MulticastGroup(8, [Replica(1, 1)]), zero_group_id), INVALID_ARGUMENT),
            ("clone session id 0", Update.INSERT,
             ent(CloneSession(9, [Replica(1, 1)]), zero_session_id), INVALID_ARGUMENT),
        ]
        # action profile members and groups
        self.raw_write([(Update.INSERT, ent(member(1))), (Update.INSERT, ent(member(2, 2))),
                        (Update.INSERT, ent(member(3, 3))),
                        (Update.INSERT, ent(group(1, [1, 2]))),
                        (Update.INSERT, ent(group(2, [3], 2)))])
        cases += [
            ("duplicate member", Update.INSERT, ent(member(1, 3)), ALREADY_EXISTS),
            ("delete missing member", Update.DELETE, ent(member(40)), NOT_FOUND),
            ("duplicate group", Update.INSERT, ent(group(1, [3])), ALREADY_EXISTS),
            ("delete missing group", Update.DELETE, ent(group(40, [])), NOT_FOUND),
            ("group with an unknown member", Update.MODIFY, ent(group(1, [1, 41])), NOT_FOUND),
            ("max_size changed after creation", Update.MODIFY, ent(group(1, [1, 2, 3], 2)),
             INVALID_ARGUMENT),
            ("more members than max_size", Update.MODIFY, ent(group(2, [1, 2, 3], 2)),
             code_pb2.RESOURCE_EXHAUSTED),
            ("member listed twice", Update.MODIFY, ent(group(2, [1, 1], 2)), INVALID_ARGUMENT),
            ("direct action on an indirect table", Update.INSERT,
             ent(TableEntry(table, match={"hdr.ipv4.dst_addr": "10.0.0.0/8"},
                            action=f"{ING}.set_next_hop",
                            params={"port": 1, "src_mac": "02:00:00:00:00:01"})),
             INVALID_ARGUMENT),
        ]
        for what, kind, entity, code in cases:
            with self.subTest(what):
                self.assert_write_fails([(kind, entity)], [code])
        # nothing above changed the state that was there
        (mc,) = self.sw.read(MulticastGroup(5))
        self.assertEqual(mc.replicas, [Replica(1, 1)])
        (grp,) = self.sw.read(ActionProfileGroup(sel, 1))
        self.assertEqual(sorted(m.member_id for m in grp.members), [1, 2])
        (grp2,) = self.sw.read(ActionProfileGroup(sel, 2))
        self.assertEqual([m.member_id for m in grp2.members], [3])
        members = self.sw.read(ActionProfileMember(sel))
        self.assertEqual(sorted(m.member_id for m in members), [1, 2, 3])
        self.assertEqual(self.entries(table), [])


class RegisterAccessUnimplemented(ErrorsTest):
    """PI does not implement P4Runtime register access: a Read of a RegisterEntry fails with
    UNIMPLEMENTED, a Write with UNKNOWN carrying UNIMPLEMENTED for that update (the suite
    observes registers through packets instead, see test_switch_counters)."""

    P4_PROGRAM = program("switch_counters.p4")

    def runTest(self) -> None:
        reg_id = self.sw.index.id("register", f"{ING}.rx_seq")
        ent = p4runtime_pb2.Entity(register_entry=p4runtime_pb2.RegisterEntry(
            register_id=reg_id, index=p4runtime_pb2.Index(index=1)))
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id, entities=[ent])
        with self.assertRaises(grpc.RpcError) as ctx:
            list(self.stub.Read(req, timeout=10))
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

        written = p4runtime_pb2.Entity()
        written.CopyFrom(ent)
        written.register_entry.data.bitstring = b"\x07"
        self.assert_write_fails([(Update.MODIFY, written)], [code_pb2.UNIMPLEMENTED])
