"""P4Runtime server of the p4sim switch: drives a ``DataPlaneApi`` from P4Runtime requests.

``serve`` and ``ServerHandle`` are imported on first use: an in-process user of the device
code (the simulator) never loads gRPC (0.2 CPU s)."""

from __future__ import annotations

from typing import Any

__all__ = ["ServerHandle", "serve"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
