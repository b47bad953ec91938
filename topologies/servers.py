"""AI servers in the topology model: a server's GPUs (each a host, a rank, with its own NIC),
the intra-server (NVLink-like) links between them and their rate, and the ranks a collective
library lays its rings and trees over (``ranks``). Parsed by ``topologies.model``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the model imports this module; these are only its types
    from topologies.model import HostSpec, Topology
    from topologies.model import _Reader as Reader


@dataclass(frozen=True)
class ServerSpec:
    """An AI server: its GPU hosts, by GPU index (index i is on rail i)."""

    name: str
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class ServerSettings:
    nvlink_rate_bps: int = 400 * 10**9  # one intra-server link
    nic_rate_bps: int = 100 * 10**9  # one NIC port: what the file's link rates stand for

    @property
    def nvlink_ratio(self) -> float:
        return self.nvlink_rate_bps / self.nic_rate_bps


@dataclass(frozen=True)
class NvLinkSpec:
    """One intra-server link between two GPUs of a server (host ports, 1-based)."""

    a: str
    b: str
    a_port: int
    b_port: int


_RATE = re.compile(r"^(\d+(?:\.\d+)?)([KMGT]?)$")
_RATE_UNIT = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def parse_bit_rate(value: Any) -> int:
    """Bits per second from ``400G``, ``25G``, ``100M`` or a plain integer; ValueError else."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    m = _RATE.match(str(value).strip().upper().removesuffix("BPS").removesuffix("B"))
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"{value!r} is not a bit rate (e.g. 400G, 100G, 25G)")
    return int(float(m.group(1)) * _RATE_UNIT[m.group(2)])


def server_settings(r: Reader, raw: Any) -> ServerSettings:
    if raw is None:
        return ServerSettings()
    raw = r.mapping(raw, "servers")
    r.only(raw, "servers", {"nvlink_rate", "nic_rate"})
    rates = {}
    for key in ("nvlink_rate", "nic_rate"):
        if key in raw:
            try:
                rates[f"{key}_bps"] = parse_bit_rate(raw[key])
            except ValueError as exc:
                raise r.fail(f"servers.{key}", str(exc)) from None
    return ServerSettings(**rates)


def gpu_of(r: Reader, raw: dict[str, Any], where: str, name_re: re.Pattern[str]) -> tuple[str | None, int | None]:
    if "server" not in raw and "gpu" not in raw:
        return None, None
    if "server" not in raw or "gpu" not in raw:
        raise r.fail(where, "a GPU host names both its 'server' and its 'gpu' index")
    server = raw["server"]
    if not isinstance(server, str) or not name_re.match(server):
        raise r.fail(f"{where}.server", f"bad server name {server!r}")
    return server, r.integer(raw["gpu"], f"{where}.gpu", 0, 63)


def servers_of(r: Reader, hosts: dict[str, HostSpec]) -> dict[str, ServerSpec]:
    """Servers in the order their first GPU appears; each one's GPUs numbered 0..G-1."""
    members: dict[str, dict[int, str]] = {}
    for h in hosts.values():
        if h.server is None or h.gpu is None:
            continue
        if h.server in hosts:
            raise r.fail(f"hosts.{h.name}.server", f"'{h.server}' is a host's name")
        gpus = members.setdefault(h.server, {})
        if h.gpu in gpus:
            raise r.fail(f"hosts.{h.name}.gpu", f"server '{h.server}' has GPU {h.gpu} twice "
                                                f"({gpus[h.gpu]} and {h.name})")
        gpus[h.gpu] = h.name
    servers = {}
    for name, gpus in members.items():
        if sorted(gpus) != list(range(len(gpus))):
            missing = min(set(range(len(gpus))) - set(gpus))
            raise r.fail(f"server '{name}'", f"GPUs are numbered 0..{len(gpus) - 1}, but "
                                             f"GPU {missing} is missing")
        servers[name] = ServerSpec(name, tuple(gpus[i] for i in range(len(gpus))))
    return servers


def nvlinks_of(servers: dict[str, ServerSpec], hosts: dict[str, HostSpec]) -> list[NvLinkSpec]:
    """Every pair of a server's GPUs, joined directly (NVSwitch gives each pair its own path);
    each host's NVLink ports come after its fabric ports, in GPU order."""
    next_port = {h.name: len(h.leaves) + 1 for h in hosts.values()}
    out = []
    for server in servers.values():
        for i, a in enumerate(server.gpus):
            for b in server.gpus[i + 1:]:
                out.append(NvLinkSpec(a, b, next_port[a], next_port[b]))
                next_port[a] += 1
                next_port[b] += 1
    return out


@dataclass(frozen=True)
class Rank:
    """One rank of a collective: a host, the server it is a GPU of, its GPU index (its rail)
    and the leaves its NIC's ports are on (port 0's first)."""

    host: str
    server: str
    gpu: int
    leaves: tuple[str, ...]


def ranks(topology: Topology) -> list[Rank]:
    """Every host as a rank: servers in file order, each one's GPUs by index, then the plain
    hosts (not in a server) in file order, each its own one-GPU server named after itself."""
    out = [Rank(h, name, gpu, tuple(topology.hosts[h].leaves))
           for name, server in topology.servers.items() for gpu, h in enumerate(server.gpus)]
    out += [Rank(h.name, h.name, 0, tuple(h.leaves)) for h in topology.hosts.values()
            if h.server is None]
    return out
