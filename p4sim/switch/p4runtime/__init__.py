"""P4Runtime server of the p4sim switch: drives a ``DataPlaneApi`` from P4Runtime requests."""

from .server import ServerHandle, serve

__all__ = ["ServerHandle", "serve"]
