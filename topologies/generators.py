"""Topology generators: leaf-spine, fat-tree, three-tier Clos and rail-optimized fabrics
(``topologies.rail``) as topology data.

Each generator returns the same YAML tree a hand-written ``topologies/*.yaml`` holds (so
``parse_topology`` validates it and numbers its ports), and ``generate`` resolves a *spec*,
the one syntax used wherever a topology is named on a command line:

    GENERATOR:KEY=VALUE,...      e.g.  fat-tree:k=4
                                       clos:pods=2,leaves=2,aggs=2,cores=2,hosts=2
                                       leaf-spine:leaves=4,spines=2,hosts=2
                                       rail:servers=2,gpus=4,tiers=3,nvlink-rate=400G

Optional keys for every generator: ``rate`` (queue rate, packets/s), ``depth`` (packets).

Naming (names are short because they end up in interface names): cores ``c<n>``,
aggregation switches ``a<pod><i>``, edge/leaf switches ``e<pod><i>`` (three tiers) or
``l<n>`` with spines ``s<n>`` (two tiers), hosts ``h<n>``. When a pod or an index exceeds 9
the pod and the index are separated by ``x`` (``a12x3``) so names stay unambiguous. Hosts of
leaf ``e<p><l>`` get 10.<p>.<l>.<i> (leaf-spine: 10.0.<l>.<i>): one /24 per leaf.

Three-tier wiring (the fat-tree's): in every pod each edge switch links to every aggregation
switch of its pod; the cores are split into ``aggs`` planes of ``cores/aggs`` switches, and
aggregation switch ``i`` of every pod links to every core of plane ``i``. Between two pods
there are ``aggs * cores/aggs = cores`` equal-cost paths (k=4: 4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import yaml

from topologies.model import Topology, TopologyError, parse_topology
from topologies.rail import rail

DEFAULT_RATE_PPS = 100
DEFAULT_DEPTH = 64
_MAX_SWITCHES = 4096  # device ids and MAC/IP formats stay within their fields


def _pod_name(prefix: str, pod: int, index: int, wide: bool) -> str:
    return f"{prefix}{pod}x{index}" if wide else f"{prefix}{pod}{index}"


def _fabric_section(rate_pps: int, depth: int, spray: str, cc: str) -> dict[str, Any]:
    return {"cell_size": 1024, "spray": spray, "cc": cc,
            "queue": {"rate_pps": rate_pps, "depth": depth},
            "ecn": {"kmin": 5, "kmax": 20, "pmax": 0.2}, "int": {"mode": "host-sink"}}


def _check(name: str, value: int, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise TopologyError(f"topology generator: {name}={value!r}: expected an integer in "
                            f"[{lo}, {hi}]")
    return value


def clos(pods: int, leaves: int, aggs: int, cores: int, hosts: int,
         rate_pps: int = DEFAULT_RATE_PPS, depth: int = DEFAULT_DEPTH,
         spray: str = "spray", cc: str = "dcqcn", name: str | None = None) -> dict[str, Any]:
    """A three-tier Clos (see the module doc for the wiring) as topology data."""
    _check("pods", pods, 1, 99)
    _check("leaves", leaves, 1, 99)
    _check("aggs", aggs, 1, 99)
    _check("cores", cores, 1, 999)
    _check("hosts", hosts, 1, 254)
    if cores % aggs:
        raise TopologyError(f"topology generator: cores={cores} must be a multiple of "
                            f"aggs={aggs} (each aggregation switch owns one plane of cores)")
    if cores + pods * (leaves + aggs) > _MAX_SWITCHES:
        raise TopologyError(f"topology generator: more than {_MAX_SWITCHES} switches")
    wide = pods > 9 or leaves > 9 or aggs > 9
    per_plane = cores // aggs
    switches = [{"name": f"c{j}", "role": "core"} for j in range(1, cores + 1)]
    switches += [{"name": _pod_name("a", p, i, wide), "role": "spine"}
                 for p in range(1, pods + 1) for i in range(1, aggs + 1)]
    switches += [{"name": _pod_name("e", p, i, wide), "role": "leaf"}
                 for p in range(1, pods + 1) for i in range(1, leaves + 1)]
    host_list = []
    for p in range(1, pods + 1):
        for i in range(1, leaves + 1):
            for h in range(1, hosts + 1):
                host_list.append({"name": f"h{len(host_list) + 1}", "ip": f"10.{p}.{i}.{h}",
                                  "leaf": _pod_name("e", p, i, wide)})
    links = [[_pod_name("e", p, i, wide), _pod_name("a", p, a, wide)]
             for p in range(1, pods + 1) for i in range(1, leaves + 1)
             for a in range(1, aggs + 1)]
    links += [[_pod_name("a", p, a, wide), f"c{(a - 1) * per_plane + j}"]
              for p in range(1, pods + 1) for a in range(1, aggs + 1)
              for j in range(1, per_plane + 1)]
    return {"name": name or f"clos-p{pods}l{leaves}a{aggs}c{cores}h{hosts}",
            "fabric": _fabric_section(rate_pps, depth, spray, cc),
            "switches": switches, "hosts": host_list, "links": links}


def fat_tree(k: int, rate_pps: int = DEFAULT_RATE_PPS, depth: int = DEFAULT_DEPTH,
             spray: str = "spray", cc: str = "dcqcn") -> dict[str, Any]:
    """The k-ary fat-tree: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores,
    k/2 hosts per edge switch (k=4: 20 switches, 16 hosts; k=8: 80 switches, 128 hosts)."""
    _check("k", k, 2, 48)
    if k % 2:
        raise TopologyError(f"topology generator: k={k}: a fat-tree needs an even k")
    half = k // 2
    return clos(pods=k, leaves=half, aggs=half, cores=half * half, hosts=half,
                rate_pps=rate_pps, depth=depth, spray=spray, cc=cc, name=f"fat-tree-k{k}")


def leaf_spine(leaves: int, spines: int, hosts: int, rate_pps: int = DEFAULT_RATE_PPS,
               depth: int = DEFAULT_DEPTH, spray: str = "spray",
               cc: str = "dcqcn") -> dict[str, Any]:
    """Two tiers: every leaf links to every spine, ``hosts`` hosts per leaf."""
    _check("leaves", leaves, 1, 254)
    _check("spines", spines, 1, 254)
    _check("hosts", hosts, 1, 254)
    if leaves + spines > _MAX_SWITCHES:
        raise TopologyError(f"topology generator: more than {_MAX_SWITCHES} switches")
    switches = [{"name": f"s{j}", "role": "spine"} for j in range(1, spines + 1)]
    switches += [{"name": f"l{i}", "role": "leaf"} for i in range(1, leaves + 1)]
    host_list = []
    for i in range(1, leaves + 1):
        for h in range(1, hosts + 1):
            host_list.append({"name": f"h{len(host_list) + 1}", "ip": f"10.0.{i}.{h}",
                              "leaf": f"l{i}"})
    links = [[f"l{i}", f"s{j}"] for i in range(1, leaves + 1) for j in range(1, spines + 1)]
    return {"name": f"leaf-spine-{leaves}x{spines}h{hosts}",
            "fabric": _fabric_section(rate_pps, depth, spray, cc),
            "switches": switches, "hosts": host_list, "links": links}


class Option(NamedTuple):
    """An optional key of one generator: its spec and command-line name (``leaves-per-rail``:
    keyword ``leaves_per_rail``), whether its value is an integer (else text, e.g. ``400G``)
    and a line of help."""

    key: str
    integer: bool
    help: str

    @property
    def kwarg(self) -> str:
        return self.key.replace("-", "_")


class Generator(NamedTuple):
    """One topology generator: its function (required keys as keyword arguments, plus
    ``rate_pps``, ``depth`` and ``spray``), its required keys, a line of help and its own
    optional keys."""

    func: Callable[..., dict[str, Any]]
    required: tuple[str, ...]
    help: str
    options: tuple[Option, ...] = ()


RAIL_OPTIONS = (
    Option("gpus", True, "GPUs per server, each with a 2-port NIC (default 8)"),
    Option("tiers", True, "2: rail leaves + spines; 3: rail leaves in pods, spines, cores"),
    Option("planes", True, "1: a NIC's ports on two leaves of its rail; 2: one per plane"),
    Option("leaves-per-rail", True, "leaves per rail (per pod and plane; default 2, planes=2: 1)"),
    Option("pods", True, "three tiers: pods the servers are split into (default 2)"),
    Option("spines", True, "spines per plane (3 tiers: per pod); default non-blocking"),
    Option("cores", True, "three tiers: cores per plane; default non-blocking"),
    Option("link-rate", False, "a NIC port's bit rate, what the packet rates stand for (100G)"),
    Option("nvlink-rate", False, "intra-server (NVLink-like) link bit rate (default 400G)"),
)


# One entry per generator; `cellfabric topo`'s subcommands and the spec syntax derive from it.
GENERATORS: dict[str, Generator] = {
    "fat-tree": Generator(fat_tree, ("k",), "k-ary fat-tree (k=4: 20 switches, 16 hosts)"),
    "clos": Generator(clos, ("pods", "leaves", "aggs", "cores", "hosts"),
                      "three-tier Clos: pods of leaves and aggs, core planes"),
    "leaf-spine": Generator(leaf_spine, ("leaves", "spines", "hosts"),
                            "two tiers: every leaf to every spine"),
    "rail": Generator(rail, ("servers",), "rail-optimized fabric of GPU servers (2 or 3 tiers)",
                      RAIL_OPTIONS),
}
_OPTIONAL = {"rate": "rate_pps", "depth": "depth"}
SPEC_HELP = ("GENERATOR:KEY=VALUE,... with "
             + " | ".join(f"{name}:" + ",".join(f"{k}={k[0].upper()}" for k in g.required)
                          for name, g in GENERATORS.items())
             + " (optional rate=PPS, depth=PKTS)")


def is_spec(text: str) -> bool:
    """Whether ``text`` names a generated topology (``GENERATOR:...``) rather than a file."""
    head, sep, _ = text.partition(":")
    return bool(sep) and head in GENERATORS


def parse_spec(text: str) -> dict[str, Any]:
    """``GENERATOR:KEY=VALUE,...`` -> topology data; one-line TopologyError on bad input."""
    head, sep, tail = text.partition(":")
    if not sep or head not in GENERATORS:
        raise TopologyError(f"{text}: not a generator spec ({SPEC_HELP})")
    func, required, _, options = GENERATORS[head]
    own = {o.key: o for o in options}
    kwargs: dict[str, Any] = {}
    for item in filter(None, tail.split(",")):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in (*required, *own, *_OPTIONAL):
            raise TopologyError(f"{text}: bad item '{item}' (keys for {head}: "
                                f"{', '.join((*required, *own, *_OPTIONAL))})")
        if key in own and not own[key].integer:
            kwargs[own[key].kwarg] = value.strip()
            continue
        try:
            kwargs[_OPTIONAL.get(key, key.replace("-", "_"))] = int(value)
        except ValueError:
            raise TopologyError(f"{text}: {key}={value!r} is not an integer") from None
    missing = [k for k in required if k not in kwargs]
    if missing:
        raise TopologyError(f"{text}: missing {', '.join(missing)} ({SPEC_HELP})")
    return func(**kwargs)


def generate(text: str) -> Topology:
    """A validated topology from a generator spec."""
    return parse_topology(parse_spec(text), source=text)


def to_yaml(data: dict[str, Any]) -> str:
    """Topology data as a YAML file: one flow-style line per switch, host and link."""
    out = [f"# generated by `cellfabric topo`: {data['name']}", f"name: {data['name']}",
           yaml.safe_dump({"fabric": data["fabric"]}, sort_keys=False,
                          default_flow_style=None).rstrip()]
    if "servers" in data:  # AI servers: NVLink and NIC rates (topologies.servers)
        out.append(yaml.safe_dump({"servers": data["servers"]}, sort_keys=False,
                                  default_flow_style=None).rstrip())
    for section in ("switches", "hosts", "links"):
        out.append(f"{section}:")
        out += [f"  - {yaml.safe_dump(item, default_flow_style=True, sort_keys=False).strip()}"
                for item in data[section]]
    return "\n".join(out) + "\n"
