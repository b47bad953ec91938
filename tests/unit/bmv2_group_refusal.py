"""A switch connection that answers every action-profile group MODIFY as real BMv2's PI
answers one that drops a watched member: UNKNOWN "Unexpected error in RPC handling", with the
change applied (``applies``) or not (BMv2 does either). Writers that must cope (the central
controller, the route agent) are tested through it on p4sim."""

from __future__ import annotations

from typing import Any

from controlplane.errors import P4RuntimeError


class ShrinkRefusingConnection:
    def __init__(self, conn: Any, applies: bool) -> None:
        self.conn, self.applies = conn, applies
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    def write_protos(self, updates, *args, **kwargs) -> None:
        updates = list(updates)
        if any(u.type == u.MODIFY and u.entity.WhichOneof("entity") == "action_profile_group"
               for u in updates):
            self.refused += 1
            if self.applies:
                self.conn.write_protos(updates, *args, **kwargs)
            raise P4RuntimeError("Write", "UNKNOWN", "Unexpected error in RPC handling")
        self.conn.write_protos(updates, *args, **kwargs)
        self.after_write()

    def after_write(self) -> None:
        """Checks to make after every write the switch took (none here)."""
