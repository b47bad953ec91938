"""Exceptions of the control plane, each with a one-line message fit for a CLI's stderr.

P4Runtime servers (BMv2/PI and p4sim) report a failed Write as a gRPC status whose
``grpc-status-details-bin`` trailer is a ``google.rpc.Status`` carrying one ``p4.v1.Error`` per
update of the batch. :func:`rpc_error_to_exception` decodes that so the message can name the
update (entity, field and value) that failed instead of a bare gRPC code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

if TYPE_CHECKING:
    import grpc


class ControlPlaneError(Exception):
    """Base class: ``str(exc)`` is always one line describing what and where."""


class P4InfoLookupError(ControlPlaneError, KeyError):
    """A name (table, action, field, ...) that the P4Info does not declare."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class EncodeError(ControlPlaneError, ValueError):
    """A value that cannot be encoded for its field (syntax or bitwidth)."""


class NoPipelineError(ControlPlaneError):
    """An operation needs a P4Info but the switch has no pipeline and none was given."""


class SwitchUnavailableError(ControlPlaneError):
    """The switch cannot be reached (connection refused, timeout, stream closed)."""


class NotPrimaryError(ControlPlaneError):
    """The client is a backup: another controller with a higher election id is primary."""


def code_name(code: int) -> str:
    try:
        return code_pb2.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


@dataclass(frozen=True)
class UpdateError:
    """Outcome of one update of a failed batch (``code`` 0 means that update was applied)."""

    index: int
    code: int
    message: str
    what: str  # human description of the update, e.g. "insert MyIngress.ipv4_lpm {...}"

    @property
    def ok(self) -> bool:
        return self.code == code_pb2.OK


class P4RuntimeError(ControlPlaneError):
    """A P4Runtime RPC failed. ``code`` is the gRPC status code name (e.g. "ALREADY_EXISTS");
    ``updates`` holds per-update outcomes for a Write when the server sent them."""

    def __init__(
        self, rpc: str, code: str, message: str, updates: tuple[UpdateError, ...] = ()
    ) -> None:
        self.rpc = rpc
        self.code = code
        self.server_message = message
        self.updates = updates
        super().__init__(self._one_line())

    @property
    def failed(self) -> list[UpdateError]:
        return [u for u in self.updates if not u.ok]

    def _one_line(self) -> str:
        failed = self.failed
        if not failed:
            msg = self.server_message or "(no message)"
            return f"{self.rpc} failed: {self.code}: {msg}"
        first = failed[0]
        more = f" (and {len(failed) - 1} more failed updates)" if len(failed) > 1 else ""
        return (f"{self.rpc} failed: {code_name(first.code)}: {first.what}: "
                f"{first.message or '(no message)'}{more}")


class AmbiguousWriteError(P4RuntimeError):
    """A Write failed without per-update results (RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, a broken
    connection...): the switch was read back to learn which updates it applied. ``applied[i]``
    is True/False for update i, or None when the switch could not be read."""

    def __init__(self, rpc: str, code: str, message: str,
                 applied: tuple[bool | None, ...]) -> None:
        self.applied = applied
        super().__init__(rpc, code, message)

    def _one_line(self) -> str:
        known = [a for a in self.applied if a is not None]
        if len(known) == len(self.applied):
            back = f"read back: {sum(known)} of {len(self.applied)} updates applied"
        else:
            back = (f"read back: {sum(known)} of {len(self.applied)} updates applied, "
                    f"{len(self.applied) - len(known)} unknown (switch not readable)")
        return f"{super()._one_line()} ({back})"


def _status_details(err: grpc.RpcError) -> status_pb2.Status | None:
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            try:
                status.ParseFromString(value)
            except Exception:  # a malformed trailer must not hide the original error
                return None
            return status
    return None


def decode_update_errors(err: grpc.RpcError, descriptions: list[str]) -> tuple[UpdateError, ...]:
    """Per-update ``p4.v1.Error`` entries of a failed Write, matched with the descriptions of
    the updates that were sent (same order, as the spec requires)."""
    status = _status_details(err)
    if status is None:
        return ()
    out = []
    for i, detail in enumerate(status.details):
        p4err = p4runtime_pb2.Error()
        if not detail.Unpack(p4err):
            continue
        what = descriptions[i] if i < len(descriptions) else f"update #{i}"
        out.append(UpdateError(i, p4err.canonical_code, p4err.message, what))
    return tuple(out)


def rpc_error_to_exception(
    err: grpc.RpcError, rpc: str, addr: str, descriptions: list[str] | None = None
) -> ControlPlaneError:
    """Turn a grpc.RpcError into the matching one-line exception."""
    import grpc  # here: the simulator's in-process channels never load gRPC (0.2 CPU s)

    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else None) or ""
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return SwitchUnavailableError(
            f"switch at {addr} unreachable during {rpc}: {code.name}: {details.splitlines()[0] if details else ''}".rstrip(": "))
    if code == grpc.StatusCode.PERMISSION_DENIED and "primary" in details.lower():
        return NotPrimaryError(f"{rpc} to {addr} refused: PERMISSION_DENIED: {details}")
    updates = decode_update_errors(err, descriptions or [])
    return P4RuntimeError(rpc, code.name, details, updates)
