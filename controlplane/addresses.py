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


def topology_addresses(path: str | Path, grpc_base: int = GRPC_BASE,
                       thrift_base: int = THRIFT_BASE) -> dict[str, SwitchAddress]:
    """Every switch of the topology file, by name, in file order."""
    path = Path(path)
    raw = _raw_switches(path)
    device_ids: dict[str, int] = {}
    try:
        from topologies.model import TopologyError, load_topology
    except ImportError:
        load_topology = None  # type: ignore[assignment]
    if load_topology is not None and not any("grpc" in s for s in raw):
        try:
            topo = load_topology(path)
        except TopologyError as err:
            raise TopologyAddressError(str(err)) from None
        device_ids = {n: sw.device_id for n, sw in topo.switches.items()}
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
