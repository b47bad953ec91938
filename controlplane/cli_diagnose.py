"""One-line explanations for the two mistakes fabricctl users make most: the wrong device id
(fabricctl defaults to 0 as BMv2 does; cellfabric's runner starts switch N as device N) and an
election id that another controller outranks (one already held is named by the connection)."""

from __future__ import annotations

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controlplane.addresses import SwitchAddress
from controlplane.errors import (
    ControlPlaneError,
    NoPipelineError,
    NotPrimaryError,
    P4RuntimeError,
)
from controlplane.tls import ClientTls, open_channel

PROBED_DEVICE_IDS = range(0, 65)  # a topology numbers its switches from 1


def served_device_id(addr: str, not_this: int, timeout: float = 2.0,
                     tls: ClientTls | None = None) -> int | None:
    """The device id that has a pipeline on the switch at ``addr`` (other than ``not_this``).
    GetForwardingPipelineConfig needs no arbitration, so this disturbs no controller."""
    with open_channel(addr, tls) as channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        for dev in PROBED_DEVICE_IDS:
            if dev == not_this:
                continue
            req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
                device_id=dev,
                response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
            try:
                cfg = stub.GetForwardingPipelineConfig(req, timeout=timeout).config
            except grpc.RpcError as err:
                if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    return None
                continue
            if len(cfg.p4info.tables) or cfg.cookie.cookie:  # BMv2 answers OK but empty
                return dev
    return None


def explain(err: ControlPlaneError, target: SwitchAddress, election: tuple[int, int],
            primary_election: tuple[int, int] | None = None,
            tls: ClientTls | None = None) -> ControlPlaneError:
    """``err`` with its cause spelled out when it is a device-id or election-id mismatch."""
    dev, addr = target.device_id, target.grpc_addr
    hint = f"pass --device-id N (or --switch {addr},N)"
    if isinstance(err, P4RuntimeError) and "trying to assign device" in err.server_message:
        other = _served(addr, dev, tls)
        serves = f"it serves device id {other}" if other is not None else \
            "it was started with another --device-id (cellfabric's runner starts switch N " \
            "as device N)"
        return ControlPlaneError(f"switch at {addr} refused device id {dev} ({err.code}: "
                                 f"{err.server_message}): {serves}; {hint}")
    no_pipeline = isinstance(err, NoPipelineError) or (
        isinstance(err, P4RuntimeError) and err.code == "FAILED_PRECONDITION")
    if no_pipeline:
        other = _served(addr, dev, tls)
        if other is not None:
            return ControlPlaneError(f"switch at {addr} has no pipeline on device id {dev} but "
                                     f"has one on device id {other}: pass --device-id {other} "
                                     f"(or --switch {addr},{other})")
    if isinstance(err, NotPrimaryError):
        high, low = primary_election if primary_election else election
        return ControlPlaneError(f"{err}: another controller with a higher election id is "
                                 f"primary; pass --election-id {high},{low + 1} or higher to "
                                 "take over, or stop the other controller")
    return err


def _served(addr: str, dev: int, tls: ClientTls | None = None) -> int | None:
    try:
        return served_device_id(addr, dev, tls=tls)
    except (grpc.RpcError, ValueError):
        return None
