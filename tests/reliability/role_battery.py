"""The role rows of the reliability battery: P4Runtime roles (spec 1.4, "Client Arbitration and
Controller Replication" and "Role Config") against p4sim and real BMv2. PI 0.1.2, the P4Runtime
server of simple_switch_grpc 1.15.5, has no roles: it ignores ``MasterArbitrationUpdate.role``
and ``WriteRequest.role`` and elects one primary per device. Where that changes the answer,
``Case.p4sim`` holds the specification's answer and ``why`` says how BMv2 differs.

Each case opens its own streams (role configs are p4sim.v1.RoleConfig, see
p4sim/switch/p4runtime/roleconfig.py), closes them when done, and uses election ids and keys of
its own, so the cases do not depend on each other's order. No default-role client is connected
while they run (on BMv2 it would outrank every role client).
"""

from __future__ import annotations

import itertools
import queue
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from battery import INSERT, Case, acl, lpm, u
from google.protobuf import any_pb2
from p4.v1 import p4runtime_pb2 as p4rt
from p4rt_client import Action, Client, Stream, code_of

from controlplane.roles import role_config

ACL, LPM = "MyIngress.acl", "MyIngress.ipv4_lpm"
_elections = itertools.count(100)
_keys = itertools.count(1)
SPEC_NO_ROLES = "PI 0.1.2 has no roles: it ignores the role and elects one primary per device"


class RoleStream(Stream):
    """A StreamChannel that arbitrates for ``role`` with ``config`` (both optional)."""

    def __init__(self, stub, device_id: int, election: int, role: str,
                 config: any_pb2.Any | None) -> None:
        self.role, self.config = role, config
        super().__init__(stub, device_id, election)

    def arbitrate(self, device_id: int, election: int, role: str | None = None) -> None:
        req = p4rt.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.low = election
        req.arbitration.role.name = self.role if role is None else role
        if self.config is not None:
            req.arbitration.role.config.CopyFrom(self.config)
        self.out.put(req)

    def status(self, timeout: float = 3.0) -> str:
        """The code of the first arbitration answer, or how the stream ended."""
        try:
            msg = self.inbox["arbitration"].get(timeout=timeout)
        except queue.Empty:
            return stream_outcome(self)
        code = msg.arbitration.status.code
        return "primary" if code == 0 else "backup"


def stream_outcome(s: Stream, wait: float = 2.0) -> str:
    if not s.ended.wait(wait):
        return "OK (stream open)"
    return s.error.code().name if s.error is not None else "OK (stream ended)"


@contextmanager
def streams(c: Client) -> Iterator[Callable[..., RoleStream]]:
    """``open(role, config, election=None)`` opens a role stream; all close at the end."""
    opened: list[RoleStream] = []

    def open_stream(role: str, config: any_pb2.Any | None,
                    election: int | None = None) -> RoleStream:
        s = RoleStream(c.stub, c.device_id, election or next(_elections), role, config)
        opened.append(s)
        return s

    try:
        yield open_stream
    finally:
        for s in opened:
            s.close()


def role_write(c: Client, role: str, election: int, *updates: p4rt.Update) -> str:
    req = p4rt.WriteRequest(device_id=c.device_id, role=role, updates=updates)
    req.election_id.low = election
    return Client._call(c.stub.Write, req)


def new_lpm(c: Client) -> p4rt.Entity:
    return lpm(c, 0, value=bytes([10, 98, next(_keys), 0]))


def new_acl(c: Client) -> p4rt.Entity:
    return acl(c, 1000 + next(_keys))


def _primary_of(open_stream, role: str, names: list[str]) -> tuple[RoleStream, int]:
    election = next(_elections)
    s = open_stream(role, role_config(names), election)
    status = s.status()
    assert status == "primary", f"role '{role}' client is {status}"
    return s, election


def write_outside_role(c: Client) -> str:
    with streams(c) as open_stream:
        _, e = _primary_of(open_stream, "acl-writer", [ACL])
        return role_write(c, "acl-writer", e, u(INSERT, new_lpm(c)))


def write_inside_role(c: Client) -> str:
    with streams(c) as open_stream:
        _, e = _primary_of(open_stream, "acl-writer", [ACL])
        return role_write(c, "acl-writer", e, u(INSERT, new_acl(c)))


def second_primary_same_role(c: Client) -> str:
    with streams(c) as open_stream:
        _, first = _primary_of(open_stream, "acl-writer", [ACL])
        _, second = _primary_of(open_stream, "acl-writer", [ACL])
        old = role_write(c, "acl-writer", first, u(INSERT, new_acl(c)))
        new = role_write(c, "acl-writer", second, u(INSERT, new_acl(c)))
        return f"old primary {old}, new primary {new}"


def same_election_same_role(c: Client) -> str:
    with streams(c) as open_stream:
        _, e = _primary_of(open_stream, "acl-writer", [ACL])
        return stream_outcome(open_stream("acl-writer", role_config([ACL]), e))


def same_election_two_roles(c: Client) -> str:
    with streams(c) as open_stream:
        _, e = _primary_of(open_stream, "acl-writer", [ACL])
        return stream_outcome(open_stream("lpm-writer", role_config([LPM]), e))


def lower_election_other_role(c: Client) -> str:
    """Role B's only client has a lower election id than role A's: is it B's primary?"""
    with streams(c) as open_stream:
        _primary_of(open_stream, "acl-writer", [ACL])
        election = next(_elections) - 50
        s = open_stream("lpm-writer", role_config([LPM]), election)
        s.status()
        return role_write(c, "lpm-writer", election, u(INSERT, new_lpm(c)))


def malformed_config(c: Client) -> str:
    bad = any_pb2.Any(type_url="type.googleapis.com/p4sim.v1.RoleConfig", value=b"\xff\xff")
    with streams(c) as open_stream:
        return stream_outcome(open_stream("acl-writer", bad))


def role_nobody_holds(c: Client) -> str:
    with streams(c) as open_stream:
        _, e = _primary_of(open_stream, "acl-writer", [ACL])
        return role_write(c, "no-such-role", e, u(INSERT, new_acl(c)))


def role_changed_on_stream(c: Client) -> str:
    with streams(c) as open_stream:
        s, e = _primary_of(open_stream, "acl-writer", [ACL])
        s.arbitrate(c.device_id, e, role="lpm-writer")
        return stream_outcome(s)


def read_with_role_filter(c: Client) -> str:
    """Both tables hold entries; a read filtered by the ACL role: what comes back?"""
    with streams(c) as open_stream:
        _, e = _primary_of(open_stream, "all", [ACL, LPM])
        assert role_write(c, "all", e, u(INSERT, new_acl(c)), u(INSERT, new_lpm(c))) == "OK"
        _primary_of(open_stream, "acl-reader", [ACL])
        req = p4rt.ReadRequest(device_id=c.device_id, role="acl-reader",
                               entities=[p4rt.Entity(table_entry=p4rt.TableEntry())])
        try:
            found = [ent for r in c.stub.Read(req, timeout=20) for ent in r.entities]
        except Exception as err:  # a gRPC error is the outcome
            return code_of(err)
        acl_id = c.id("tables", ACL)
        kinds = {"acl" if ent.table_entry.table_id == acl_id else "other" for ent in found}
        return " and ".join(sorted(kinds)) + " entries"


def packet_out_without_permission(c: Client) -> str:
    with streams(c) as open_stream:
        s, _ = _primary_of(open_stream, "acl-writer", [ACL])
        msg = p4rt.StreamMessageRequest()
        msg.packet.payload = b"\x00" * 40
        msg.packet.metadata.add(metadata_id=1, value=b"\x01")
        s.send(msg)
        try:
            err = s.inbox["error"].get(timeout=1.0)
        except queue.Empty:
            return "no StreamError"
        return f"StreamError {err.error.canonical_code}"


def seventeen_clients_one_role(c: Client) -> str:
    with streams(c) as open_stream:
        for _ in range(16):
            status = open_stream("acl-writer", role_config([ACL])).status()
            assert status in ("primary", "backup"), status
        return stream_outcome(open_stream("acl-writer", role_config([ACL])))


def pipeline_push_from_role(c: Client) -> str:
    with streams(c) as open_stream:
        _, e = _primary_of(open_stream, "acl-writer", [ACL])
        req = p4rt.SetForwardingPipelineConfigRequest(
            device_id=c.device_id, role="acl-writer", action=Action.VERIFY)
        req.election_id.low = e
        req.config.p4info.CopyFrom(c.info)
        req.config.p4_device_config = c.json
        return Client._call(c.stub.SetForwardingPipelineConfig, req, timeout=60)


ROLE_CASES = [
    Case("role: write outside the role", write_outside_role, "OK", "PERMISSION_DENIED",
         f"{SPEC_NO_ROLES}, so the role's only client may write anything; spec: an update "
         "outside the role is PERMISSION_DENIED"),
    Case("role: write inside the role", write_inside_role, "OK"),
    Case("role: second primary for the same role", second_primary_same_role,
         "old primary PERMISSION_DENIED, new primary OK"),
    Case("role: same election id twice in one role", same_election_same_role,
         "INVALID_ARGUMENT"),
    Case("role: same election id in two roles", same_election_two_roles, "INVALID_ARGUMENT",
         "OK (stream open)", f"{SPEC_NO_ROLES}; spec: election ids are unique per "
         "(device, role)"),
    Case("role: only client of a second role, lower election id", lower_election_other_role,
         "PERMISSION_DENIED", "OK", f"{SPEC_NO_ROLES}, where this client is a backup; spec: "
         "each (device, role) has its own primary"),
    Case("role: malformed role config", malformed_config, "OK (stream open)",
         "INVALID_ARGUMENT", "PI ignores role.config; spec: a config outside the agreed "
         "scheme (p4sim.v1.RoleConfig) is INVALID_ARGUMENT"),
    Case("role: write naming a role no client holds", role_nobody_holds, "OK", "NOT_FOUND",
         f"{SPEC_NO_ROLES}; spec: a role that matches none of the device's is NOT_FOUND"),
    Case("role: role changed on a live stream", role_changed_on_stream, "OK (stream open)",
         "FAILED_PRECONDITION", f"{SPEC_NO_ROLES}; spec: a stream cannot change its role"),
    Case("role: read filtered by role", read_with_role_filter, "acl and other entries",
         "acl entries", "PI ignores ReadRequest.role; spec: the role filters what is read"),
    Case("role: packet-out from a role without packet-out", packet_out_without_permission,
         "no StreamError", "StreamError 7", f"{SPEC_NO_ROLES}; spec: such a PacketOut is "
         "dropped, reported PERMISSION_DENIED"),
    Case("role: 17th client of one role", seventeen_clients_one_role, "RESOURCE_EXHAUSTED"),
    Case("role: pipeline push from a role that may not", pipeline_push_from_role, "OK",
         "PERMISSION_DENIED", f"{SPEC_NO_ROLES}; p4sim's role config gates "
         "SetForwardingPipelineConfig (can_push_pipeline)"),
]
