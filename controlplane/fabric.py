"""Many switch connections at once: connect, run and close them concurrently."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from google.protobuf import any_pb2

from controlplane.channel import ChannelSet
from controlplane.connection import ResyncCallback, SwitchConnection
from controlplane.errors import ControlPlaneError
from controlplane.tls import ClientTls

T = TypeVar("T")


class FabricError(ControlPlaneError):
    """Some switches failed; ``errors`` maps switch name to its exception."""

    def __init__(self, what: str, errors: dict[str, Exception]) -> None:
        self.errors = errors
        first = next(iter(errors.items()))
        more = f" (and {len(errors) - 1} more switches)" if len(errors) > 1 else ""
        super().__init__(f"{what} failed on switch {first[0]}: {first[1]}{more}")


class Fabric(ChannelSet[SwitchConnection]):
    """A pool of :class:`SwitchConnection`, one per switch, keyed by name.

    ``switches`` maps a name to ``"addr"`` or ``(addr, device_id)``; ``tls`` is every
    connection's TLS (None: plaintext)."""

    def __init__(self, switches: Mapping[str, str | tuple[str, int]],
                 election_id: tuple[int, int] = (0, 1), *, reconnect: bool = True,
                 on_resync: ResyncCallback | None = None, timeout: float = 5.0,
                 tls: ClientTls | None = None, role: str = "",
                 role_config: any_pb2.Any | None = None) -> None:
        self.connections: dict[str, SwitchConnection] = {}
        for name, spec in switches.items():
            addr, device_id = (spec, 0) if isinstance(spec, str) else spec
            self.connections[name] = SwitchConnection(
                addr, device_id, election_id, name, reconnect=reconnect, on_resync=on_resync,
                timeout=timeout, tls=tls, role=role, role_config=role_config)

    def run(self, fn: Callable[[SwitchConnection], T], what: str = "operation") -> dict[str, T]:
        """``fn(conn)`` on every switch concurrently; raises FabricError if any failed (after
        all have finished)."""
        results: dict[str, T] = {}
        errors: dict[str, Exception] = {}
        with ThreadPoolExecutor(max_workers=min(32, max(1, len(self.connections)))) as pool:
            futures = {name: pool.submit(fn, conn) for name, conn in self.connections.items()}
            for name, fut in futures.items():
                try:
                    results[name] = fut.result()
                except Exception as err:
                    errors[name] = err
        if errors:
            raise FabricError(what, errors)
        return results

    def connect(self) -> Fabric:
        try:
            self.run(lambda c: c.connect(), "connect")
        except FabricError:
            self.close()
            raise
        return self

    def close(self) -> None:
        for conn in self.connections.values():
            conn.close()

    def __enter__(self) -> Fabric:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()
