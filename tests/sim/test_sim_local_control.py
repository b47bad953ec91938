"""The simulator's in-process control path against the P4Runtime requests it stands for.

``LocalConnection.set_pipeline`` hands the device one shared ``ForwardingPipelineConfig``
(``Device.commit_pipeline``) instead of a SetForwardingPipelineConfigRequest holding a copy,
and ``apply_diff`` gives it the entities (``LocalConnection.write_entities``) instead of
``Update`` messages holding copies. Here a fabric brought up either way holds the same state,
and a bad pipeline or a bad entry gets the same error either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2 as p4rt
from simlib import bring_up, leaf_spine

from cellfabric.sim import control
from cellfabric.sim.control import LocalConnection, pipeline_files
from cellfabric.sim.run import SimRun
from controlplane import fabric_controller
from controlplane.errors import ControlPlaneError


class RequestConnection(LocalConnection):
    """The P4Runtime requests themselves, as the emulation's connection sends them."""

    write_entities = None  # type: ignore[assignment]  # apply_diff: Update messages

    def set_pipeline(self, p4info_path: str | Path, json_path: str | Path) -> None:
        pipeline = pipeline_files(p4info_path, json_path)
        req = p4rt.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4rt.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.config.CopyFrom(pipeline.config)
        self._call("SetForwardingPipelineConfig", self.device.set_pipeline, req)
        self._codec = pipeline.codec


def _state(run: SimRun) -> dict[str, list[bytes]]:
    """Every entity each switch holds, as a wildcard read returns it, in a stable order."""
    assert run.local is not None
    probes = [p4rt.Entity(table_entry=p4rt.TableEntry()),
              p4rt.Entity(action_profile_member=p4rt.ActionProfileMember()),
              p4rt.Entity(action_profile_group=p4rt.ActionProfileGroup())]
    pre = p4rt.Entity()
    pre.packet_replication_engine_entry.clone_session_entry.SetInParent()
    probes.append(pre)
    out = {}
    for name, conn in run.local.connections.items():
        found = conn.read_protos(*probes)
        out[name] = sorted(e.SerializeToString(deterministic=True) for e in found)
        assert conn.get_pipeline().p4info == pipeline_files(
            run.controller.p4info, run.controller.bmv2_json).config.p4info  # type: ignore[union-attr]
    return out


def _up(tmp: Path, monkeypatch: pytest.MonkeyPatch, requests: bool) -> SimRun:
    if requests:
        monkeypatch.setattr(control, "LocalConnection", RequestConnection)
        monkeypatch.setattr("cellfabric.sim.run.LocalConnection", RequestConnection)
    writes: list[str] = []
    real = LocalConnection.write_protos

    def counted(self: LocalConnection, updates: list) -> None:
        updates = list(updates)
        writes.append(type(updates[0]).__name__)
        real(self, updates)

    monkeypatch.setattr(LocalConnection, "write_protos", counted)
    tmp.mkdir(parents=True, exist_ok=True)
    run = bring_up(tmp, leaf_spine(tmp), 100_000_000_000, 1000, 524288)
    # the path under test ran: the entities themselves, or the Update messages
    assert set(writes) == ({"Update"} if requests else {"LocalUpdate"})
    monkeypatch.undo()
    return run


def test_in_process_path_gives_the_p4runtime_paths_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _up(tmp_path / "fast", monkeypatch, requests=False)
    plain = _up(tmp_path / "plain", monkeypatch, requests=True)
    try:
        fast_state, plain_state = _state(fast), _state(plain)
        assert fast_state == plain_state
        assert sum(len(v) for v in fast_state.values()) > 50
    finally:
        fast.tear_down()
        plain.tear_down()


def _one(run: SimRun) -> LocalConnection:
    assert run.local is not None
    return next(iter(run.local.connections.values()))


def test_a_bad_entry_gets_the_same_error_either_way(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    run = _up(tmp_path, monkeypatch, requests=False)
    try:
        conn = _one(run)
        bad = p4rt.Entity()
        bad.table_entry.table_id = 12345  # no such table
        bad.table_entry.action.action.action_id = 1
        errors = []
        with pytest.raises(ControlPlaneError) as err:
            conn.write_entities(p4rt.Update.INSERT, [bad])
        errors.append(str(err.value))
        with pytest.raises(ControlPlaneError) as err:
            conn.write_protos([p4rt.Update(type=p4rt.Update.INSERT, entity=bad)])
        errors.append(str(err.value))
        assert errors[0] == errors[1] and "update 0" in errors[0]
    finally:
        run.tear_down()


def test_a_bad_pipeline_gets_the_same_error_either_way(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    run = _up(tmp_path, monkeypatch, requests=False)
    try:
        assert run.controller is not None
        conn = _one(run)
        p4info = run.controller.p4info
        bad_json = tmp_path / "bad.json"
        bad_json.write_bytes(b'{"not": "a program"}')
        errors = []
        for cls in (LocalConnection, RequestConnection):
            fresh = cls(conn.name, conn.device.dp, conn.device_id)
            with pytest.raises(ControlPlaneError) as err:
                fresh.set_pipeline(p4info, bad_json)
            errors.append(str(err.value))
            wrong_id = cls(conn.name, conn.device.dp, conn.device_id)
            wrong_id.device_id += 1
            with pytest.raises(ControlPlaneError) as err:
                wrong_id.set_pipeline(p4info, run.controller.bmv2_json)
            errors.append(str(err.value))
        assert errors[:2] == errors[2:]
        assert "SetForwardingPipelineConfig" in errors[0]
    finally:
        run.tear_down()


def test_shrink_refusing_wrapper_still_sees_every_write(tmp_path: Path) -> None:
    """apply_diff asks the channel's class for write_entities: a wrapper forwarding
    attributes (tests' ShrinkRefusingConnection) still gets each write as Update messages."""
    seen: list[str] = []

    class Wrapper:
        def __init__(self, conn: LocalConnection) -> None:
            self.conn = conn

        def __getattr__(self, name: str) -> object:
            return getattr(self.conn, name)

        def write_protos(self, updates: list) -> None:
            seen.extend(type(u).__name__ for u in updates)

    diff = fabric_controller.SwitchDiff("s")
    diff.inserts.append(p4rt.Entity())
    fabric_controller.apply_diff(Wrapper(object.__new__(LocalConnection)), diff)
    assert seen == ["Update"]


def test_shared_protos_encode_an_entity_planned_alike_once(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """desired_protos with the in-process codec's shared_protos: the same messages as a
    codec without it gives, and an entity planned alike for two switches encoded once."""
    run = _up(tmp_path, monkeypatch, requests=False)
    try:
        assert run.controller is not None and run.local is not None
        conns = list(run.local.connections.values())
        codec = conns[0].codec
        assert codec.shared_protos is not None and codec is conns[1].codec
        plain = control.Codec(codec.index)

        class Plain:
            pass

        plain_conn = Plain()
        plain_conn.codec = plain  # type: ignore[attr-defined]
        encoded = 0
        real = control.Codec.to_proto

        def counting(self: control.Codec, *a: object, **k: object) -> p4rt.Entity:
            nonlocal encoded
            encoded += self is codec
            return real(self, *a, **k)

        monkeypatch.setattr(control.Codec, "to_proto", counting)
        codec.shared_protos.clear()
        firsts = {}
        for conn in conns:
            entities = run.controller.plans[conn.name].entities
            fast = fabric_controller.desired_protos(conn, entities)
            assert fast == fabric_controller.desired_protos(plain_conn, entities)
            for proto in fast.values():
                firsts.setdefault(repr(proto), proto)
                assert proto is firsts[repr(proto)] or proto != firsts[repr(proto)]
        total = sum(len(run.controller.plans[c.name].entities) for c in conns)
        assert encoded == len(codec.shared_protos) < total
    finally:
        run.tear_down()


def test_the_simulator_loads_neither_grpc_nor_scapy() -> None:
    """The simulator's modules import no gRPC (its channels are in-process) and no Scapy
    (frame templates are built with struct): 0.7 CPU s of every run's start."""
    import subprocess
    import sys

    code = ("import sys, cellfabric.sim.run, cellfabric.sim.cli, hosts.cells, hosts.sender, "
            "hosts.collector, hosts.receiver; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'grpc', 'scapy'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_a_write_builds_error_messages_only_when_an_update_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Device.write_updates answers a write that applied every update without building a
    p4.v1.Error per update; a failed one still gets one per update, in order."""
    from p4sim.switch.p4runtime import device as device_module

    run = _up(tmp_path, monkeypatch, requests=False)
    try:
        conn = _one(run)
        made: list[int] = []
        real = p4rt.Error

        def counted(*a: object, **k: object) -> p4rt.Error:
            made.append(1)
            return real(*a, **k)

        monkeypatch.setattr(device_module.p4rt, "Error", counted)
        member = conn.read_protos(p4rt.Entity(
            action_profile_member=p4rt.ActionProfileMember()))[0]
        status = conn.device.write_updates([control.LocalUpdate(p4rt.Update.MODIFY, member)],
                                           conn.device_id)
        assert status.code == 0 and not made
        bad = p4rt.Entity()
        bad.table_entry.table_id = 12345
        status = conn.device.write_updates(
            [control.LocalUpdate(p4rt.Update.MODIFY, member),
             control.LocalUpdate(p4rt.Update.INSERT, bad)], conn.device_id)
        monkeypatch.undo()
        errors = []
        for detail in status.details:
            err = p4rt.Error()
            detail.Unpack(err)
            errors.append((err.canonical_code, bool(err.message), err.space))
        assert status.code != 0 and len(made) == 2
        assert errors[0] == (0, False, "") and errors[1][0] != 0 and errors[1][1]
    finally:
        run.tear_down()
