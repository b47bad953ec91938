"""Packet-in/packet-out and digests on the StreamChannel, as a part of SwitchConnection.

Received packets and digest lists go to a handler if one is set (called on the stream thread:
keep it short), else to a bounded queue read with ``packet_in()``/``digest()``. A handler that
raises is logged and does not break the stream.
"""

from __future__ import annotations

import contextlib
import logging
import queue
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from p4.v1 import p4runtime_pb2

from controlplane.entities import DigestList, PacketIn
from controlplane.errors import SwitchUnavailableError

if TYPE_CHECKING:
    from controlplane.codec import Codec
    from controlplane.p4info import P4InfoIndex

log = logging.getLogger("controlplane")


class PacketIO:
    # Provided by SwitchConnection.
    who: str
    packets_in: queue.Queue[PacketIn]
    digests: queue.Queue[DigestList]
    packet_in_handler: Callable[[PacketIn], None] | None
    digest_handler: Callable[[DigestList], None] | None
    _codec: Codec | None
    _requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] | None

    @property
    def codec(self) -> Codec:
        raise NotImplementedError

    @property
    def index(self) -> P4InfoIndex:
        raise NotImplementedError

    def _check_primary(self, what: str) -> None:
        raise NotImplementedError

    def _send_stream(self, req: p4runtime_pb2.StreamMessageRequest) -> None:
        requests = self._requests
        if requests is None:
            raise SwitchUnavailableError(f"{self.who}: not connected")
        requests.put(req)

    def packet_out(self, payload: bytes, **metadata: object) -> None:
        """Send ``payload`` with packet_out controller-header fields given by name."""
        self._check_primary("PacketOut")
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.CopyFrom(self.codec.packet_out(payload, metadata))
        self._send_stream(req)

    def packet_in(self, timeout: float | None = None) -> PacketIn | None:
        try:
            return self.packets_in.get(timeout=timeout)
        except queue.Empty:
            return None

    def digest(self, timeout: float | None = None) -> DigestList | None:
        try:
            return self.digests.get(timeout=timeout)
        except queue.Empty:
            return None

    def ack_digest(self, dl: DigestList) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.digest_ack.digest_id = self.index.id("digest", dl.digest)
        req.digest_ack.list_id = dl.list_id
        self._send_stream(req)

    # ---- called on the stream thread ----

    def _on_packet_in(self, msg: p4runtime_pb2.PacketIn) -> None:
        pkt = self._codec.packet_in(msg) if self._codec else PacketIn(msg.payload, {})
        self._deliver(pkt, self.packet_in_handler, self.packets_in, "packet-in")

    def _on_digest(self, msg: p4runtime_pb2.DigestList) -> None:
        if self._codec is not None:
            dl = self._codec.digest_list(msg)
            self._deliver(dl, self.digest_handler, self.digests, "digest")

    def _deliver(self, item: Any, handler: Callable[[Any], None] | None, backlog: queue.Queue,
                 what: str) -> None:
        """To the user's handler if one is set (its errors logged, never the stream's end),
        else into the backlog queue for ``wait_*`` (dropped when full)."""
        if handler is None:
            with contextlib.suppress(queue.Full):
                backlog.put_nowait(item)
            return
        try:
            handler(item)
        except Exception:
            log.exception("%s: %s handler failed", self.who, what)
