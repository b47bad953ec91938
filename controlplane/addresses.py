"""Where each switch of a topology listens: gRPC (P4Runtime) and admin channel addresses.

The runner (cellfabric/emulation/network.py) starts switch N (its ``device_id``) with gRPC on
127.0.0.1:(GRPC_BASE + N) and the admin channel on 127.0.0.1:(THRIFT_BASE + N). A topology file
may also give explicit addresses per switch (``grpc: HOST:PORT``, ``admin: HOST:PORT``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controlplane.errors import ControlPlaneError
from topologies.model import GRPC_BASE, THRIFT_BASE


class TopologyAddressError(ControlPlaneError):
    pass


@dataclass(frozen=True)
class SwitchAddress:
    name: str
    grpc_addr: str
    device_id: int
    admin_addr: str | None = None


def _raw_switches(path: Path) -> list[dict[str, Any]]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise TopologyAddressError(f"topology {path}: {str(err).splitlines()[0]}") from None
    switches = data.get("switches") if isinstance(data, dict) else None
    if isinstance(switches, dict):
        switches = [{"name": k, **(v or {})} for k, v in switches.items()]
    return [s for s in switches or [] if isinstance(s, dict)]


def _locate(spec: str | Path) -> tuple[list[dict[str, Any]], Any]:
    """(the switches as the file lists them, [] for a spec; the topology model or None), with names
    resolved as `cellfabric run` resolves them (topologies.catalog): a file, a shipped name,
    or a generator spec. Without the topologies package only a file can be read."""
    try:
        from topologies.catalog import locate_topology, resolve_topology
        from topologies.model import TopologyError
    except ImportError:
        return _raw_switches(Path(spec)), None
    try:
        path = locate_topology(str(spec))
        if path is None:  # a generator spec: no file, no explicit addresses
            return [], resolve_topology(str(spec))
        raw = _raw_switches(path)
        # a file with explicit addresses need not be a valid model (a bare switch list)
        return raw, None if any("grpc" in s for s in raw) else resolve_topology(str(path))
    except TopologyError as err:
        raise TopologyAddressError(str(err)) from None


def topology_addresses(spec: str | Path, grpc_base: int = GRPC_BASE,
                       thrift_base: int = THRIFT_BASE) -> dict[str, SwitchAddress]:
    """Every switch of the topology (a file, a shipped name or a generator spec such as
    ``fat-tree:k=4``), by name, in file order."""
    raw, topo = _locate(spec)
    if topo is not None and not raw:
        raw = [{"name": n} for n in topo.switches]
    device_ids = {n: sw.device_id for n, sw in topo.switches.items()} if topo else {}
    out: dict[str, SwitchAddress] = {}
    for i, sw in enumerate(raw):
        name = str(sw.get("name"))
        dev = int(sw.get("device_id", device_ids.get(name, i + 1)))
        grpc = sw.get("grpc") or f"127.0.0.1:{grpc_base + dev}"
        admin = sw.get("admin") or f"127.0.0.1:{thrift_base + dev}"
        out[name] = SwitchAddress(name, str(grpc), dev, str(admin))
    return out


def topology_switch(path: str | Path, name: str, grpc_base: int = GRPC_BASE,
                    thrift_base: int = THRIFT_BASE) -> SwitchAddress:
    switches = topology_addresses(path, grpc_base, thrift_base)
    if name not in switches:
        known = ", ".join(switches) or "none"
        raise TopologyAddressError(f"topology {path}: no switch named '{name}' (known: {known})")
    return switches[name]
